import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';

/**
 * Hosts for the cross-host fault suite: each a Linux network namespace with one address, joined
 * by veth pairs to a bridge inside a namespace of its own (the switch). The test process reaches
 * the hosts through one more veth pair into that bridge (its end in this namespace holds `.1` of
 * the subnet), so nothing the hosts send leaves the namespaces the test made. Faults:
 * - `isolate(host)`: the host's port on the switch goes down: nothing reaches it, nothing leaves
 *   it (its link has no carrier; packets are dropped silently, no RST);
 * - `cut(a, b)`: a and b alone stop hearing each other: each side's neighbour entry for the other
 *   is pinned to a MAC address nobody has, so their frames are flooded by the bridge and dropped
 *   by every host (no netfilter or tc classifier needed: this kernel has neither);
 * - `heal()` undoes both; `kill(host)` isolates the host and SIGKILLs every process it runs, as a
 *   machine that dies sends nothing more (no FIN, no RST).
 * `destroy()` deletes every namespace (their veths go with them); it also runs at process exit.
 */

const NOWHERE_MAC = '02:00:00:00:0b:ad';

export interface Host {
  name: string;
  ns: string;
  ip: string;
  /** The host's port on the switch (its veth's peer, in the switch namespace). */
  port: string;
  procs: HostProc[];
}

export interface HostProc {
  child: ChildProcess;
  output: () => string;
  exited: Promise<void>;
}

/** Runs `ip`; throws with its stderr when it fails. */
function ip(args: string[]): string {
  const r = spawnSync('ip', args, { encoding: 'utf8' });
  if (r.error) throw r.error;
  if (r.status !== 0) throw new Error(`ip ${args.join(' ')}: ${(r.stderr || r.stdout).trim()}`);
  return r.stdout;
}

/**
 * Whether this process may make network namespaces (root with CAP_SYS_ADMIN and `ip` from
 * iproute2): the reason when it may not, else null.
 */
export function namespacesForbidden(): string | null {
  const probe = `latprobe-${randomBytes(3).toString('hex')}`;
  const r = spawnSync('ip', ['netns', 'add', probe], { encoding: 'utf8' });
  if (r.error) return `\`ip\` (iproute2) is not available: ${r.error.message}`;
  if (r.status !== 0) return `\`ip netns add\` is not permitted here (${(r.stderr || '').trim() || `exit ${r.status}`}); run as root with CAP_SYS_ADMIN and CAP_NET_ADMIN, as CI does`;
  spawnSync('ip', ['netns', 'del', probe]);
  const v = spawnSync('ip', ['link', 'add', `${probe.slice(0, 10)}a`, 'type', 'veth', 'peer', 'name', `${probe.slice(0, 10)}b`], { encoding: 'utf8' });
  if (v.status !== 0) return `veth pairs are not permitted here (${(v.stderr || '').trim()})`;
  spawnSync('ip', ['link', 'del', `${probe.slice(0, 10)}a`]);
  return null;
}

/** A /24 in 10.213.0.0/16 that no address or route of this namespace touches. */
function freeSubnet(): string {
  const taken = `${ip(['-4', 'addr'])}\n${ip(['-4', 'route', 'show', 'table', 'all'])}`;
  for (let i = 0; i < 64; i++) {
    const third = 16 + Math.floor(Math.random() * 230);
    const net = `10.213.${third}`;
    if (!taken.includes(`${net}.`)) return net;
  }
  throw new Error('no free /24 in 10.213.0.0/16 for the test hosts');
}

export class Hosts {
  readonly tag = randomBytes(3).toString('hex');
  readonly subnet = freeSubnet();
  readonly switchNs = `lat-${this.tag}-sw`;
  /** The test process's address on the hosts' network. */
  readonly clientIp = `${this.subnet}.1`;
  private readonly clientLink = `lat${this.tag}c`;
  readonly hosts = new Map<string, Host>();
  private readonly cuts: [Host, Host][] = [];
  private destroyed = false;
  private readonly onExit = () => this.destroy();

  constructor() {
    process.once('exit', this.onExit);
    ip(['netns', 'add', this.switchNs]);
    ip(['-n', this.switchNs, 'link', 'add', 'br0', 'type', 'bridge']);
    ip(['-n', this.switchNs, 'link', 'set', 'br0', 'up']);
    ip(['link', 'add', this.clientLink, 'type', 'veth', 'peer', 'name', 'client', 'netns', this.switchNs]);
    ip(['-n', this.switchNs, 'link', 'set', 'client', 'master', 'br0', 'up']);
    ip(['addr', 'add', `${this.clientIp}/24`, 'dev', this.clientLink]);
    ip(['link', 'set', this.clientLink, 'up']);
  }

  /** A new host `name` (a namespace with loopback and eth0 at the next address on the switch). */
  add(name: string): Host {
    const n = this.hosts.size;
    const host: Host = { name, ns: `lat-${this.tag}-${name}`, ip: `${this.subnet}.${10 + n}`, port: `p${n}`, procs: [] };
    ip(['netns', 'add', host.ns]);
    ip(['-n', host.ns, 'link', 'set', 'lo', 'up']);
    ip(['-n', this.switchNs, 'link', 'add', host.port, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', host.ns]);
    ip(['-n', this.switchNs, 'link', 'set', host.port, 'master', 'br0', 'up']);
    ip(['-n', host.ns, 'addr', 'add', `${host.ip}/24`, 'dev', 'eth0']);
    ip(['-n', host.ns, 'link', 'set', 'eth0', 'up']);
    this.hosts.set(name, host);
    return host;
  }

  get(name: string): Host {
    const h = this.hosts.get(name);
    if (!h) throw new Error(`no host ${name}`);
    return h;
  }

  /** Runs `command` on `host` (inside its namespace), its output kept. */
  run(host: Host, command: string[], env: NodeJS.ProcessEnv, opts: { stdin?: boolean } = {}): HostProc {
    const child = spawn('ip', ['netns', 'exec', host.ns, ...command], { env, stdio: [opts.stdin ? 'pipe' : 'ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout!.on('data', (b: Buffer) => (out += b.toString()));
    child.stderr!.on('data', (b: Buffer) => (out += b.toString()));
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    const proc = { child, output: () => out, exited };
    host.procs.push(proc);
    return proc;
  }

  /** Cuts `host` off from every other host (and the test). */
  isolate(host: Host): void {
    ip(['-n', this.switchNs, 'link', 'set', host.port, 'down']);
  }

  /** Cuts `a` and `b` off from each other only. */
  cut(a: Host, b: Host): void {
    ip(['-n', a.ns, 'neigh', 'replace', b.ip, 'lladdr', NOWHERE_MAC, 'dev', 'eth0', 'nud', 'permanent']);
    ip(['-n', b.ns, 'neigh', 'replace', a.ip, 'lladdr', NOWHERE_MAC, 'dev', 'eth0', 'nud', 'permanent']);
    this.cuts.push([a, b]);
  }

  /** Every host back on the switch, every cut undone (neighbours are learnt again by ARP). */
  heal(): void {
    for (const [a, b] of this.cuts.splice(0)) {
      ip(['-n', a.ns, 'neigh', 'del', b.ip, 'dev', 'eth0']);
      ip(['-n', b.ns, 'neigh', 'del', a.ip, 'dev', 'eth0']);
    }
    for (const h of this.hosts.values()) ip(['-n', this.switchNs, 'link', 'set', h.port, 'up']);
  }

  /** The host dies: off the switch first (it sends nothing more), then every process it runs is SIGKILLed. */
  async kill(host: Host): Promise<void> {
    this.isolate(host);
    for (const p of host.procs) if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGKILL');
    await Promise.all(host.procs.map((p) => p.exited));
  }

  /** Stops every process (SIGKILL) and deletes every namespace; safe to call twice. */
  destroy(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    process.off('exit', this.onExit);
    for (const h of this.hosts.values()) for (const p of h.procs) if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGKILL');
    for (const h of this.hosts.values()) spawnSync('ip', ['netns', 'del', h.ns]);
    spawnSync('ip', ['netns', 'del', this.switchNs]);
    // Gone with its peer in the switch namespace; deleted here in case that did not happen.
    spawnSync('ip', ['link', 'del', this.clientLink]);
  }
}
