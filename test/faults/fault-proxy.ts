import net from 'node:net';
import readline from 'node:readline';

export type ProxyMode = 'pass' | 'reset' | 'stall' | 'refuse';

/**
 * A fault-injecting TCP proxy (on 127.0.0.1 unless told another address) in front of `target` (host:port):
 * - `pass`: relays bytes both ways, each chunk held `delayMs` first when that is set (a per-chunk
 *   latency, in order and pipelined: a stand-in for `tc qdisc ... netem delay`, which this kernel
 *   lacks; a chunk is what one read of the socket returned, one or a few TCP segments);
 * - `reset`: every new connection is reset (RST) as soon as it is accepted, and switching to it
 *   resets the connections in flight;
 * - `stall`: connections are accepted and never answered (held until the mode changes, then reset),
 *   and switching to it freezes the connections in flight the same way;
 * - `refuse`: the listening socket is closed (connect() gets ECONNREFUSED) and reopened on the
 *   same port when the mode changes.
 */
export class FaultProxy {
  private server: net.Server;
  private mode: ProxyMode = 'pass';
  private readonly held = new Set<net.Socket>();
  /** Every client connection still open, whatever its mode. */
  private readonly open = new Set<net.Socket>();
  private readonly piped = new Set<{ client: net.Socket; upstream: net.Socket; drop: () => void; stop: () => void }>();
  port = 0;
  /** Latency added to every chunk relayed in `pass` mode, each way (0: none). */
  delayMs = 0;
  /** Chunks that were held by `delayMs`. */
  delayedChunks = 0;
  /** Connections accepted in each mode. */
  readonly counts: Record<ProxyMode, number> = { pass: 0, reset: 0, stall: 0, refuse: 0 };

  constructor(private readonly targetHost: string, private readonly targetPort: number, private readonly host = '127.0.0.1') {
    this.server = this.createServer();
  }

  /** Listens on `opts.host` (default 127.0.0.1) and `opts.port` (default a free one). */
  static async start(target: string, opts: { host?: string; port?: number } = {}): Promise<FaultProxy> {
    const u = new URL(target);
    const p = new FaultProxy(u.hostname, Number(u.port), opts.host);
    await p.listen(opts.port ?? 0);
    return p;
  }

  get endpoint(): string {
    return `http://${this.host}:${this.port}`;
  }

  /**
   * Relays `from` to `to`, holding each chunk `delayMs` (read when the chunk arrives) and keeping
   * their order; undelayed chunks keep the sockets' back-pressure. `stop()` ends the relay.
   */
  private relay(from: net.Socket, to: net.Socket): () => void {
    const queue: { at: number; chunk: Buffer }[] = [];
    let timer: NodeJS.Timeout | undefined;
    let ended = false;
    const flush = () => {
      timer = undefined;
      const now = Date.now();
      while (queue.length && queue[0].at <= now) to.write(queue.shift()!.chunk);
      if (queue.length) timer = setTimeout(flush, queue[0].at - now);
      else if (ended) to.end();
    };
    const onData = (chunk: Buffer) => {
      if (this.delayMs <= 0 && !queue.length) {
        if (!to.write(chunk)) {
          from.pause();
          to.once('drain', () => from.resume());
        }
        return;
      }
      this.delayedChunks++;
      queue.push({ at: Math.max(Date.now() + this.delayMs, queue.at(-1)?.at ?? 0), chunk });
      timer ??= setTimeout(flush, queue[0].at - Date.now());
    };
    const onEnd = () => {
      ended = true;
      if (!queue.length) to.end();
    };
    from.on('data', onData);
    from.once('end', onEnd);
    return () => {
      from.off('data', onData);
      from.off('end', onEnd);
      if (timer) clearTimeout(timer);
      queue.length = 0;
    };
  }

  private createServer(): net.Server {
    return net.createServer((client) => {
      this.counts[this.mode]++;
      client.on('error', () => undefined);
      this.open.add(client);
      client.once('close', () => this.open.delete(client));
      if (this.mode === 'reset') return void client.resetAndDestroy();
      if (this.mode === 'stall') {
        this.held.add(client);
        client.once('close', () => this.held.delete(client));
        return;
      }
      const upstream = net.connect(this.targetPort, this.targetHost);
      upstream.on('error', () => client.destroy());
      const drop = () => {
        this.piped.delete(pair);
        upstream.destroy();
        client.destroy();
      };
      const stops = [this.relay(client, upstream), this.relay(upstream, client)];
      const pair = { client, upstream, drop, stop: () => stops.forEach((s) => s()) };
      this.piped.add(pair);
      client.once('close', drop);
      upstream.once('close', drop);
    });
  }

  private listen(port: number): Promise<void> {
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, this.host, () => {
        this.server.off('error', reject);
        this.port = (this.server.address() as net.AddressInfo).port;
        resolve();
      });
    });
  }

  async set(mode: ProxyMode): Promise<void> {
    const was = this.mode;
    if (mode === was) return;
    this.mode = mode;
    if (was === 'stall') for (const s of this.held) s.resetAndDestroy();
    if (mode === 'reset') {
      for (const { client, upstream } of this.piped) {
        client.resetAndDestroy();
        upstream.destroy();
      }
    }
    if (mode === 'stall') {
      // In-flight connections freeze: nothing more flows either way; they are reset when the stall ends.
      for (const pair of this.piped) {
        pair.client.off('close', pair.drop);
        pair.upstream.off('close', pair.drop);
        pair.stop();
        pair.upstream.destroy();
        this.piped.delete(pair);
        this.held.add(pair.client);
      }
    }
    if (mode === 'refuse') {
      // Stop listening at once (close()'s callback would wait for every connection) and reset them all.
      this.server.close();
      for (const c of this.open) c.resetAndDestroy();
      for (const { upstream } of this.piped) upstream.destroy();
    }
    if (was === 'refuse') {
      this.server = this.createServer();
      await this.listen(this.port);
    }
  }

  async stop(): Promise<void> {
    for (const c of this.open) c.destroy();
    for (const s of this.held) s.destroy();
    for (const { client, upstream } of this.piped) {
      client.destroy();
      upstream.destroy();
    }
    if (this.mode !== 'refuse') await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

/**
 * Drives `proxy` from this process's stdin, for a proxy run as a host of the cross-host suite:
 * one command a line, `delay <ms>` (every chunk relayed is held that long, each way; answered
 * `ok <command>`) and `stats` (answered `stats <delayed chunks> <connections>`). `onClose` runs
 * when stdin closes (the suite ended or died).
 */
export function controlByStdin(proxy: FaultProxy, onClose: () => Promise<void>): void {
  const lines = readline.createInterface({ input: process.stdin });
  lines.on('line', (line) => {
    const [cmd, arg] = line.trim().split(/\s+/);
    if (cmd === 'delay' && Number.isFinite(Number(arg))) {
      proxy.delayMs = Number(arg);
      console.log(`ok ${line.trim()}`);
    } else if (cmd === 'stats') {
      console.log(`stats ${proxy.delayedChunks} ${proxy.counts.pass}`);
    } else {
      console.log(`error unknown command: ${line.trim()}`);
    }
  });
  lines.once('close', () => {
    void proxy.stop().then(onClose).finally(() => process.exit(0));
  });
}
