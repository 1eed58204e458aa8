import { AsyncLocalStorage } from 'node:async_hooks';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createWriteStream, existsSync, mkdirSync, readFileSync, realpathSync } from 'node:fs';
import { mkdir, rename, rm } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { Readable, Transform, type Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { Redis } from 'ioredis';
import type { S3rverInstance, S3rverMiddleware } from 's3rver';
import type { Logger } from './logger';
import { objectKeyProblem } from './object-keys';

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
  port: number;
  /** The server's working folder (its append-only files when `persistent`). */
  dir: string;
  /** Whether it writes an append-only file under `dir`, so its data survives a restart. */
  persistent: boolean;
  /** Process id of redis-server itself (its watchdog shell is its parent). */
  pid: number | undefined;
  stop(): Promise<void>;
}

/**
 * Runs redis-server as a child of a small POSIX shell that owns it: the shell kills it (SIGTERM,
 * which makes it flush its append-only file and exit) when the read end of fd 3 reaches EOF,
 * i.e. when this process closes the pipe (`stop()`) or dies in any way, SIGKILL included, since
 * the kernel closes the pipe then. It also forwards SIGINT/SIGTERM/SIGHUP sent to the shell. So an
 * embedded redis-server is never left running without the process that started it. The first
 * line on stdout is the server's pid.
 */
const REDIS_WATCHDOG = [
  'redis-server "$@" &',
  'pid=$!',
  'echo "lateral-redis-pid=$pid"',
  "trap 'kill -TERM $pid 2>/dev/null' INT TERM HUP",
  '{ read _ <&3; kill -TERM $pid 2>/dev/null; } &',
  'watcher=$!',
  'code=0',
  'while :; do',
  '  wait $pid; code=$?',
  '  kill -0 $pid 2>/dev/null || break',
  'done',
  'kill $watcher 2>/dev/null',
  'exit $code',
].join('\n');

/** The pid of a live redis-server already serving `dir` (from its pidfile), if any. */
function liveRedisIn(dir: string): number | undefined {
  const pidfile = path.join(dir, 'redis-server.pid');
  if (!existsSync(pidfile)) return undefined;
  const pid = Number(readFileSync(pidfile, 'utf8').trim());
  if (!Number.isInteger(pid) || pid <= 0) return undefined;
  try {
    process.kill(pid, 0);
  } catch {
    return undefined;
  }
  // A pid can be reused: on Linux, the server's working folder must be this one.
  try {
    return realpathSync(`/proc/${pid}/cwd`) === realpathSync(dir) ? pid : undefined;
  } catch {
    const comm = spawnSync('ps', ['-p', String(pid), '-o', 'comm='], { encoding: 'utf8' });
    return comm.stdout?.includes('redis') ? pid : undefined;
  }
}

/**
 * Starts `redis-server` from PATH on a free port, configured as production wants it for BullMQ
 * (noeviction), in its own process group (a Ctrl-C in the terminal reaches the node process, which
 * stops the workers first and Redis last) and tied to this process's life (see REDIS_WATCHDOG).
 *
 * `persistent`: an append-only file under `dir` (`appendonlydir/`, fsync every second and at
 * shutdown), so queues, jobs and caches survive a restart on the same folder; `npm start` uses it.
 * Refuses to start when another live redis-server already writes that folder. Off (the default):
 * nothing is written, for tests.
 */
export async function startEmbeddedRedis(opts: { dir: string; logger?: Logger; port?: number; persistent?: boolean }): Promise<EmbeddedRedis> {
  const which = spawnSync('redis-server', ['--version'], { encoding: 'utf8' });
  if (which.error || which.status !== 0) throw new RedisServerMissingError();
  const dir = path.resolve(opts.dir);
  mkdirSync(dir, { recursive: true });
  const persistent = opts.persistent ?? false;
  const port = opts.port ?? (await freePort());
  const args = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--maxmemory-policy', 'noeviction', '--dir', dir];
  if (persistent) {
    const other = liveRedisIn(dir);
    if (other !== undefined) {
      throw new Error(`another redis-server (pid ${other}) is already using ${dir}: stop it (or the lateral process that started it), or use another DATA_DIR`);
    }
    const major = Number(/v=(\d+)/.exec(which.stdout)?.[1] ?? 7);
    args.push('--appendonly', 'yes', '--appendfsync', 'everysec', '--pidfile', path.join(dir, 'redis-server.pid'));
    // Redis 7 keeps a multi-part AOF in a folder; Redis 6 one appendonly.aof in --dir.
    if (major >= 7) args.push('--appenddirname', 'appendonlydir');
  } else {
    args.push('--appendonly', 'no');
  }
  const child: ChildProcess = spawn('sh', ['-c', REDIS_WATCHDOG, 'lateral-redis', ...args], {
    stdio: ['ignore', 'pipe', 'pipe', 'pipe'],
    detached: true,
  });
  const lifeline = child.stdio[3] as Writable;
  lifeline.on('error', () => undefined);
  let pid: number | undefined;
  let output = '';
  child.stdout?.on('data', (b: Buffer) => {
    output += b.toString();
    pid ??= Number(/lateral-redis-pid=(\d+)/.exec(output)?.[1]) || undefined;
  });
  child.stderr?.on('data', (b: Buffer) => (output += b.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const url = `redis://127.0.0.1:${port}`;
  const deadline = Date.now() + 10_000;
  while (!(await redisReachable(url, 300))) {
    if (child.exitCode !== null || Date.now() > deadline) {
      if (pid) process.kill(pid, 'SIGKILL');
      child.kill('SIGKILL');
      throw new Error(`redis-server did not start on port ${port}: ${output.slice(-500)}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  opts.logger?.info(`started redis-server on ${url} (pid ${pid}; ${persistent ? `append-only file under ${dir}` : 'nothing kept on disk'})`);
  let stopping: Promise<void> | undefined;
  // An exit we did not ask for: say so, and what to do, instead of leaving callers with ioredis's errors.
  child.once('exit', (code, signal) => {
    if (stopping) return;
    const how = signal ? `was killed by ${signal}` : `exited with code ${code}`;
    const tail = output.trim().split('\n').slice(-5).join(' | ').slice(-800);
    opts.logger?.error(
      `the embedded redis-server (pid ${pid}, ${url}) ${how}: queues are unavailable, requests that need them answer 503 and workers wait. ` +
        `Restart lateral to start a new one${persistent ? ` (queued jobs are kept in the append-only file under ${dir}; if Redis refuses it as corrupt, run redis-check-aof --fix on it)` : ''}, ` +
        `check free memory and disk space, or set REDIS_URL to a Redis you run.${tail ? ` Its last output: ${tail}` : ''}`,
      { service: 'redis-server', pid, code, signal },
    );
  });
  return {
    url,
    port,
    dir,
    persistent,
    get pid() {
      return pid;
    },
    stop: () =>
      (stopping ??= (async () => {
        if (child.exitCode !== null || child.signalCode !== null) return;
        // EOF on the lifeline: the watchdog sends SIGTERM (Redis flushes its AOF) and exits after it.
        lifeline.destroy();
        const timer = setTimeout(() => {
          if (pid) {
            try {
              process.kill(pid, 'SIGKILL');
            } catch {
              // already gone
            }
          }
          child.kill('SIGKILL');
        }, 10_000);
        await exited;
        clearTimeout(timer);
      })()),
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
  atomicPuts(server);
  await addConditionalWrites(server);
  await refuseUnsafeKeys(server);
  await fixListV2Pagination();
  await server.run();
  const endpoint = `http://127.0.0.1:${port}`;
  opts.logger?.info(`started in-process S3 server on ${endpoint} (folder ${opts.dir})`);
  return { endpoint, stop: () => server.close() };
}

let partialFiles = 0;

/**
 * Gives s3rver S3's read-after-write behaviour: a GET sees the whole previous object or the whole
 * new one, never part of one. s3rver 3.x's putObject rewrites the object file in place and, for a
 * buffered body, answers before the write has finished; its GET takes the length from the file's
 * size at that moment, so a GET right after a PUT, or during an overwrite (a retried job writing
 * its output again), could return a truncated object. Here the body is written to a temporary
 * file beside the object (a name s3rver's listing ignores: it lists only `._S3rver_object`), the
 * write awaited, and the file renamed over the object (atomic on one file system); then s3rver's
 * own putMetadata writes the md5 and the metadata as before.
 */
function atomicPuts(server: S3rverInstance): void {
  const store = server.store;
  store.putObject = async (object) => {
    const objectPath = store.getResourcePath(object.bucket, object.key, 'object');
    await mkdir(path.dirname(objectPath), { recursive: true });
    const partial = `${objectPath}.partial-${process.pid}-${++partialFiles}`;
    const md5 = createHash('md5');
    let size = 0;
    const source = Buffer.isBuffer(object.content) ? Readable.from([object.content]) : object.content;
    try {
      await pipeline(
        source,
        new Transform({
          transform(chunk: Buffer, _enc, done) {
            md5.update(chunk);
            size += chunk.length;
            done(null, chunk);
          },
        }),
        createWriteStream(partial),
      );
      await rename(partial, objectPath);
    } catch (err) {
      await rm(partial, { force: true });
      throw err;
    }
    const digest = md5.digest('hex');
    await store.putMetadata(object.bucket, object.key, object.metadata, digest);
    return { size, md5: digest };
  };
}

/** What a conditional write request asked for, visible to the store calls made while serving it. */
const conditionalWrite = new AsyncLocalStorage<{ ifNoneMatch: boolean }>();

/**
 * Gives s3rver (3.x ignores the header) S3's conditional-write semantics for `If-None-Match: *` on
 * PutObject, CopyObject and CompleteMultipartUpload: the write is refused with 412
 * PreconditionFailed when the key already holds an object.
 *
 * - A Koa middleware, put right after s3rver's vhost rewrite (so the path is `/bucket/key` for
 *   path-style and virtual-host requests alike) and before its router, takes a per-key lock for
 *   such a request and runs the rest of the request inside an AsyncLocalStorage context.
 * - The store's putObject/copyObject check, inside that context, whether the key exists, and throw
 *   s3rver's own S3Error (its onerror renders the S3 XML body) instead of writing. The check thus
 *   runs where S3 runs it: after authentication and the bucket check, at the moment of the write.
 *
 * The lock is a per-key promise chain in this process, held until s3rver's handler has returned
 * (object and metadata written, or the request refused): this one
 * process serialises check-then-write for conditional writers, so of N concurrent
 * `If-None-Match: *` PUTs of a new key exactly one writes. It does not serialise against
 * unconditional PUTs (as on S3, a plain PUT just overwrites) nor against another process writing
 * the same folder. `If-Match` and any other `If-None-Match` value on a write answer 501
 * NotImplemented instead of being ignored silently.
 */
async function addConditionalWrites(server: S3rverInstance): Promise<void> {
  const { default: S3Error } = await import('s3rver/lib/models/error.js');
  const store = server.store;
  const putObject = store.putObject.bind(store);
  const copyObject = store.copyObject.bind(store);
  const refuseIfPresent = async (bucket: string, key: string) => {
    if (conditionalWrite.getStore()?.ifNoneMatch && (await store.existsObject(bucket, key))) {
      throw new S3Error('PreconditionFailed', 'At least one of the pre-conditions you specified did not hold', { Condition: 'If-None-Match' });
    }
  };
  store.putObject = async (object) => {
    await refuseIfPresent(object.bucket, object.key);
    return putObject(object);
  };
  store.copyObject = async (srcBucket, srcKey, destBucket, destKey, replacementMetadata) => {
    await refuseIfPresent(destBucket, destKey);
    return copyObject(srcBucket, srcKey, destBucket, destKey, replacementMetadata);
  };

  const tails = new Map<string, Promise<void>>();
  const middleware: S3rverMiddleware = async (ctx, next) => {
    const ifNoneMatch = ctx.get('if-none-match');
    const ifMatch = ctx.get('if-match');
    const objectPath = /^\/[^/]+\/./.test(ctx.path);
    if (!objectPath || (ctx.method !== 'PUT' && ctx.method !== 'POST') || (!ifNoneMatch && !ifMatch)) return next();
    if (ifMatch || ifNoneMatch.trim() !== '*') {
      throw new S3Error('NotImplemented', 'A header you provided implies functionality that is not implemented', { Header: ifMatch ? 'If-Match' : 'If-None-Match' });
    }
    let lockKey: string;
    try {
      lockKey = decodeURIComponent(ctx.path);
    } catch {
      lockKey = ctx.path;
    }
    const previous = tails.get(lockKey) ?? Promise.resolve();
    let release!: () => void;
    const mine = new Promise<void>((resolve) => (release = resolve));
    const tail = previous.then(() => mine);
    tails.set(lockKey, tail);
    await previous;
    try {
      await conditionalWrite.run({ ifNoneMatch: true }, next);
    } finally {
      release();
      if (tails.get(lockKey) === tail) tails.delete(lockKey);
    }
  };
  afterVhost(server, middleware, 'add If-None-Match support');
}

/**
 * s3rver keeps objects as files under its folder and resolves `..` and `./` in a key as a path, so
 * a request for `bucket/tenants/a/../b/x` (or `../../../etc/x`) reads another tenant's object or a
 * file outside the folder. The service's own client never sends such a key (object-keys.ts); this
 * refuses them at the server too, for any other client that reaches it, with S3's InvalidArgument
 * (400) before s3rver's handlers see the request: the object key of the path and a listing's
 * `prefix`, `start-after` and `marker`.
 */
async function refuseUnsafeKeys(server: S3rverInstance): Promise<void> {
  const { default: S3Error } = await import('s3rver/lib/models/error.js');
  const refuse = (what: string, problem: string) => new S3Error('InvalidArgument', `${what} ${problem}`, { ArgumentName: what });
  const middleware: S3rverMiddleware = async (ctx, next) => {
    const m = /^\/[^/]+\/(.*)$/s.exec(ctx.path);
    if (m && m[1] !== '') {
      let key: string;
      try {
        key = decodeURIComponent(m[1]);
      } catch {
        throw refuse('key', 'is not valid percent-encoded UTF-8');
      }
      const problem = objectKeyProblem(key);
      if (problem) throw refuse('key', problem);
    }
    for (const name of ['prefix', 'start-after', 'marker']) {
      const v = ctx.query[name];
      if (v === undefined) continue;
      const problem = objectKeyProblem(Array.isArray(v) ? v.join('') : v, { prefix: name === 'prefix' });
      if (problem) throw refuse(name, problem);
    }
    return next();
  };
  afterVhost(server, middleware, 'guard object keys');
}

/** Puts `middleware` right after s3rver's vhost rewrite, where the path is `/bucket/key` for every addressing style. */
function afterVhost(server: S3rverInstance, middleware: S3rverMiddleware, purpose: string): void {
  const vhost = server.middleware.findIndex((fn) => fn.name === 'vhost');
  if (vhost < 0) throw new Error(`s3rver: vhost middleware not found; cannot ${purpose} (s3rver version changed?)`);
  server.middleware.splice(vhost + 1, 0, middleware);
}

const PAGINATION_FIXED = Symbol.for('lateral.s3rver.listV2Pagination');
const TOKEN_TAG = 'lateral1:';

/**
 * s3rver 3.7 encrypts ListObjectsV2 continuation tokens with DES, which OpenSSL 3 (Node >= 17) no
 * longer offers: every truncated V2 listing (more keys than max-keys, 1000 by default) and every
 * request carrying a continuation token answers 500. This wraps s3rver's bucket controller (the
 * router looks `getBucket` up on the module's exports at each request; the wrapper runs after
 * authentication, which signs the original query) so that it never reaches the DES code: a token
 * is `lateral1:` + the last key listed, base64, turned into `start-after` for s3rver; the listing
 * runs with a store view that reports no truncation, and the answer gets IsTruncated and our
 * NextContinuationToken back. Patches the module once per process; every embedded server shares it.
 */
async function fixListV2Pagination(): Promise<void> {
  const { default: bucketCtrl } = await import('s3rver/lib/controllers/bucket.js');
  const { default: S3Error } = await import('s3rver/lib/models/error.js');
  const patched = bucketCtrl as typeof bucketCtrl & { [PAGINATION_FIXED]?: true };
  if (patched[PAGINATION_FIXED]) return;
  const getBucket = bucketCtrl.getBucket;
  bucketCtrl.getBucket = async (ctx) => {
    if (ctx.query['list-type'] !== '2') return getBucket(ctx);
    const bucket = ctx.params.bucket;
    const token = ctx.query['continuation-token'];
    if (token) {
      const decoded = Buffer.from(token, 'base64').toString('utf8');
      const prefix = `${TOKEN_TAG}${bucket}/`;
      if (!decoded.startsWith(prefix)) {
        throw new S3Error('InvalidArgument', 'The continuation token provided is incorrect', { ArgumentName: 'continuation-token' });
      }
      const rest = { ...ctx.query };
      delete rest['continuation-token'];
      ctx.query = { ...rest, 'start-after': decoded.slice(prefix.length) };
    }
    const store = ctx.store;
    let lastKey: string | undefined;
    ctx.store = Object.create(store, {
      listObjects: {
        value: async (b: string, options: unknown) => {
          const result = await store.listObjects(b, options);
          lastKey = result.isTruncated ? result.objects.at(-1)?.key : undefined;
          return { ...result, isTruncated: false };
        },
      },
    }) as typeof store;
    try {
      await getBucket(ctx);
    } finally {
      delete (ctx as { store?: unknown }).store;
    }
    const out = (ctx.body as { ListBucketResult?: Record<string, unknown> } | undefined)?.ListBucketResult;
    if (!out) return;
    if (token) {
      out.StartAfter = undefined;
      out.ContinuationToken = token;
    }
    if (lastKey !== undefined) {
      out.IsTruncated = true;
      out.NextContinuationToken = Buffer.from(`${TOKEN_TAG}${bucket}/${lastKey}`, 'utf8').toString('base64');
    }
  };
  patched[PAGINATION_FIXED] = true;
}
