import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { Redis } from 'ioredis';
import type { Logger } from './logger';

/** Finds a free TCP port on 127.0.0.1 by binding port 0. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as net.AddressInfo).port;
      srv.close(() => resolve(port));
    });
  });
}

export async function redisReachable(url: string, timeoutMs = 1500): Promise<boolean> {
  const client = new Redis(url, { lazyConnect: true, connectTimeout: timeoutMs, maxRetriesPerRequest: 0, enableOfflineQueue: false, retryStrategy: () => null });
  client.on('error', () => undefined);
  try {
    await client.connect();
    return (await client.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    client.disconnect();
  }
}

export class RedisServerMissingError extends Error {
  constructor() {
    super(
      'redis-server was not found on PATH and REDIS_URL is not set or not reachable.\n' +
        '  Install it (Debian/Ubuntu: `apt-get update && apt-get install -y redis-server`; macOS: `brew install redis`)\n' +
        '  or point REDIS_URL at a running Redis 7 (e.g. REDIS_URL=redis://127.0.0.1:6379).',
    );
  }
}

export interface EmbeddedRedis {
  url: string;
  stop(): Promise<void>;
}

/**
 * Starts `redis-server` from PATH on a free port, configured as production wants it for BullMQ
 * (noeviction). Persistence is off: the embedded server is for the demo and tests.
 */
export async function startEmbeddedRedis(opts: { dir: string; logger?: Logger; port?: number }): Promise<EmbeddedRedis> {
  const which = spawnSync('redis-server', ['--version'], { encoding: 'utf8' });
  if (which.error || which.status !== 0) throw new RedisServerMissingError();
  mkdirSync(opts.dir, { recursive: true });
  const port = opts.port ?? (await freePort());
  const child: ChildProcess = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--maxmemory-policy', 'noeviction', '--dir', path.resolve(opts.dir)],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let output = '';
  child.stdout?.on('data', (b: Buffer) => (output += b.toString()));
  child.stderr?.on('data', (b: Buffer) => (output += b.toString()));
  const url = `redis://127.0.0.1:${port}`;
  const deadline = Date.now() + 10_000;
  while (!(await redisReachable(url, 300))) {
    if (child.exitCode !== null || Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`redis-server did not start on port ${port}: ${output.slice(-500)}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  opts.logger?.info(`started redis-server on ${url}`);
  return {
    url,
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
        setTimeout(() => child.kill('SIGKILL'), 3000).unref();
      }),
  };
}

export interface EmbeddedS3 {
  endpoint: string;
  stop(): Promise<void>;
}

/** Starts the in-process S3-compatible server (s3rver) on a local folder, on a free port. */
export async function startEmbeddedS3(opts: { dir: string; bucket: string; accessKeyId: string; secretAccessKey: string; logger?: Logger }): Promise<EmbeddedS3> {
  const { default: S3rver } = await import('s3rver');
  mkdirSync(opts.dir, { recursive: true });
  const port = await freePort();
  const server = new S3rver({
    address: '127.0.0.1',
    port,
    silent: true,
    directory: path.resolve(opts.dir),
    configureBuckets: [{ name: opts.bucket, configs: [] }],
    allowMismatchedSignatures: false,
  });
  await server.run();
  const endpoint = `http://127.0.0.1:${port}`;
  opts.logger?.info(`started in-process S3 server on ${endpoint} (folder ${opts.dir})`);
  return { endpoint, stop: () => server.close() };
}
