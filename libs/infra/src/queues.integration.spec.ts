import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { ALL_QUEUES } from '@lateral/shared';
import { createLogger } from './logger';
import { WorkerHost, type HandlerRegistry } from './queues';

/**
 * A Redis that completes the client handshake (CLIENT SETNAME / SETINFO) and then never answers
 * another command: the state of a Redis under heavy load when a process is told to stop.
 */
async function stalledRedis(): Promise<{ url: string; close: () => Promise<void> }> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    s.on('error', () => {});
    s.on('data', (chunk) => {
      const lines = chunk.toString().split('\r\n');
      for (let i = 0; i + 2 < lines.length; i++) {
        if (lines[i].startsWith('*') && lines[i + 2].toLowerCase() === 'client') s.write('+OK\r\n');
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as net.AddressInfo;
  return {
    url: `redis://127.0.0.1:${port}`,
    close: () => {
      for (const s of sockets) s.destroy();
      return new Promise((r) => server.close(() => r()));
    },
  };
}

describe('WorkerHost.close', () => {
  // BullMQ's RedisConnection re-emits a failed initialisation as an 'error' event, and close()
  // removes its listeners first: a process told to stop while a connection is still initialising
  // (Redis slow to answer its INFO) crashed with "Connection is closed" (seen in CI on SIGINT).
  it('stops without an unhandled error while its connections are still initialising', async () => {
    const redis = await stalledRedis();
    const uncaught: string[] = [];
    const onUncaught = (err: unknown) => uncaught.push(String(err));
    process.on('uncaughtException', onUncaught);
    process.on('unhandledRejection', onUncaught);
    try {
      const handlers = Object.fromEntries(ALL_QUEUES.map((q) => [q, async () => ({})])) as HandlerRegistry;
      const host = new WorkerHost({ redisUrl: redis.url, prefix: 'wh', logger: createLogger('error', 'test'), concurrency: {} });
      host.start([...ALL_QUEUES], handlers);
      await new Promise((r) => setTimeout(r, 200));
      const t0 = Date.now();
      await host.close(500);
      expect(Date.now() - t0).toBeLessThan(10_000);
      await new Promise((r) => setTimeout(r, 300));
    } finally {
      process.off('uncaughtException', onUncaught);
      process.off('unhandledRejection', onUncaught);
      await redis.close();
    }
    expect(uncaught).toEqual([]);
  });
});
