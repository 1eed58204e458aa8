import {
  CreateBucketCommand,
  DeleteObjectCommand,
  DeleteObjectsCommand,
  GetObjectCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  NoSuchKey,
  PutObjectCommand,
  S3Client,
} from '@aws-sdk/client-s3';
import { UnavailableError, wrapError, type Config } from '@lateral/shared';
import { recordS3 } from './metrics';
import type { Logger } from './logger';
import net from 'node:net';
import { checkObjectKey } from './object-keys';

const byteLength = (body: Uint8Array | string) => (typeof body === 'string' ? Buffer.byteLength(body, 'utf8') : body.byteLength);

/**
 * Extra tries of a read (get, getRange) whose answer had started and then went quiet for
 * S3_SOCKET_TIMEOUT_MS or was cut (reset, premature close) while its body streamed. The SDK's own
 * retries (maxAttempts 3) end when the answer's head arrives, so without these one slow body under
 * a busy CPU failed the whole job (issue 31). Bounded: a store that cuts every answer still fails
 * the read, after 1 + READ_BODY_RETRIES tries; a store that refuses connections or never answers
 * is left to the SDK's retries and fails as before.
 */
export const READ_BODY_RETRIES = 2;
/** Wait before the first extra try, doubled for the next. */
const READ_BODY_RETRY_DELAY_MS = 250;

/** Whether an error raised while an answer's body streamed is transient (inactivity timeout, reset, cut). */
export function transientBodyError(err: unknown): boolean {
  const e = err as { name?: string; code?: string; message?: string } | null;
  if (!e) return false;
  if (e.name === 'TimeoutError') return true;
  if (e.code === 'ECONNRESET' || e.code === 'EPIPE' || e.code === 'ERR_STREAM_PREMATURE_CLOSE' || e.code === 'ECONNABORTED') return true;
  return e.message === 'aborted' || /socket hang up|premature close/i.test(e.message ?? '');
}

/**
 * The one class that talks to S3. Everything lateral stores (accepted documents, raw vectors,
 * segments, manifests, codec artifacts, re-rank requests and results) goes through it.
 */
export class ObjectStore {
  private readonly client: S3Client;
  /** Where the store is reached (S3_ENDPOINT, or AWS's regional endpoint). */
  private readonly endpoint: string;
  /** Where a retried read is said (warn); none: not said. */
  private readonly logger: Pick<Logger, 'warn'> | undefined;

  /**
   * `connectTimeoutMs` (S3_CONNECT_TIMEOUT_MS): a connection not opened within it fails;
   * `socketTimeoutMs` (S3_SOCKET_TIMEOUT_MS): a connected request that carries no byte for that
   * long fails (a TimeoutError the API answers as overload). Both are retried by the SDK
   * (maxAttempts 3) until the answer's head arrives; a read whose body then goes quiet or is cut is
   * sent again by this class (READ_BODY_RETRIES, each said on `logger`). Unset: the schema's
   * defaults (5 s, 30 s).
   */
  constructor(
    readonly bucket: string,
    opts: { endpoint?: string; region: string; accessKeyId: string; secretAccessKey: string; forcePathStyle: boolean; connectTimeoutMs?: number; socketTimeoutMs?: number; logger?: Pick<Logger, 'warn'> },
  ) {
    this.logger = opts.logger;
    // The SDK prints a NodeVersionSupportWarning (its releases after January 2027 need Node 22) on
    // every start under Node 20, which this project supports: off through the SDK's own switch,
    // unless the environment sets it.
    process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
    this.endpoint = opts.endpoint ?? `https://s3.${opts.region}.amazonaws.com`;
    this.client = new S3Client({
      endpoint: opts.endpoint,
      region: opts.region,
      forcePathStyle: opts.forcePathStyle,
      credentials: { accessKeyId: opts.accessKeyId, secretAccessKey: opts.secretAccessKey },
      maxAttempts: 3,
      // Sockets per host: 128, not the SDK's 50, so a cold scorer's ranged GETs of search layouts (64 in flight, DiskObjectCache) never queue behind other traffic.
      requestHandler: {
        connectionTimeout: opts.connectTimeoutMs ?? 5000,
        socketTimeout: opts.socketTimeoutMs ?? 30_000,
        httpAgent: { keepAlive: true, maxSockets: 128 },
        httpsAgent: { keepAlive: true, maxSockets: 128 },
      },
      // s3rver and MinIO ignore these checksums; real S3 verifies them.
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
    });
    guardKeys(this.client);
  }

  /** The SDK client, for the streaming helpers in object-streams.ts (multipart uploads, streamed reads). */
  get s3(): S3Client {
    return this.client;
  }

  static fromConfig(config: Config, endpoint = config.S3_ENDPOINT, logger?: Pick<Logger, 'warn'>): ObjectStore {
    return new ObjectStore(config.S3_BUCKET, {
      endpoint,
      region: config.S3_REGION,
      accessKeyId: config.S3_ACCESS_KEY_ID,
      secretAccessKey: config.S3_SECRET_ACCESS_KEY,
      forcePathStyle: config.S3_FORCE_PATH_STYLE,
      connectTimeoutMs: config.S3_CONNECT_TIMEOUT_MS,
      socketTimeoutMs: config.S3_SOCKET_TIMEOUT_MS,
      logger,
    });
  }

  async ensureBucket(): Promise<void> {
    try {
      await this.client.send(new HeadBucketCommand({ Bucket: this.bucket }));
    } catch {
      try {
        await this.client.send(new CreateBucketCommand({ Bucket: this.bucket }));
      } catch (err) {
        throw wrapError(`creating bucket ${this.bucket}`, err);
      }
    }
  }

  async ping(): Promise<void> {
    try {
      await this.client.send(new HeadBucketCommand({ Bucket: this.bucket }));
    } catch (err) {
      // the SDK's error as the cause: health tells an outage from overload by it (overload.ts)
      throw Object.assign(new UnavailableError(`object store unavailable: ${(err as Error).name ?? ''} ${(err as Error).message}`.trim()), { cause: err });
    }
  }

  /**
   * Whether a TCP connection to the store's endpoint opens within `timeoutMs`: tells a store that
   * is there but slow (readiness: overloaded) from one that is not (down) when a check timed out.
   */
  accepts(timeoutMs: number): Promise<boolean> {
    const u = new URL(this.endpoint);
    const port = Number(u.port) || (u.protocol === 'https:' ? 443 : 80);
    return new Promise((resolve) => {
      const socket = net.connect({ host: u.hostname.replace(/^\[(.*)\]$/, '$1'), port });
      const done = (ok: boolean) => {
        clearTimeout(timer);
        socket.destroy();
        resolve(ok);
      };
      const timer = setTimeout(() => done(false), timeoutMs);
      socket.once('connect', () => done(true));
      socket.once('error', () => done(false));
    });
  }

  async put(key: string, body: Uint8Array | string, contentType = 'application/octet-stream'): Promise<void> {
    try {
      await this.client.send(new PutObjectCommand({ Bucket: this.bucket, Key: key, Body: body, ContentType: contentType }));
      recordS3('put', 'ok', byteLength(body));
    } catch (err) {
      recordS3('put', 'error');
      throw wrapError(`writing s3://${this.bucket}/${key}`, err);
    }
  }

  async putJson(key: string, value: unknown): Promise<void> {
    await this.put(key, JSON.stringify(value), 'application/json');
  }

  /**
   * Compare-and-swap create: writes the object only if the key holds none (`If-None-Match: *`).
   * Returns true when this call wrote it, false when the key already existed or a concurrent
   * conditional writer of the same key won (412 PreconditionFailed, or 409
   * ConditionalRequestConflict while another conditional write of the key is in flight). Of N
   * concurrent callers on a new key exactly one gets true. Any other failure throws as `put` does.
   *
   * The SDK retries transient failures (maxAttempts 3): when the first attempt was written but its
   * answer was lost, the retry gets 412 for our own object. So a 412 after more than one attempt
   * reads the object back and returns true when it holds exactly these bytes (a writer with
   * identical bytes is then indistinguishable from us, which for content such as a manifest is the
   * same outcome).
   */
  async putIfAbsent(key: string, body: Uint8Array | string, contentType = 'application/octet-stream'): Promise<boolean> {
    try {
      await this.client.send(new PutObjectCommand({ Bucket: this.bucket, Key: key, Body: body, ContentType: contentType, IfNoneMatch: '*' }));
      recordS3('put', 'ok', byteLength(body));
      return true;
    } catch (err) {
      const status = httpStatus(err);
      const name = (err as Error).name;
      if (status === 409 || name === 'ConditionalRequestConflict') return false;
      if (status === 412 || name === 'PreconditionFailed') {
        const attempts = (err as { $metadata?: { attempts?: number } }).$metadata?.attempts ?? 1;
        if (attempts <= 1) return false;
        const stored = await this.get(key);
        return stored !== null && Buffer.from(stored).equals(typeof body === 'string' ? Buffer.from(body, 'utf8') : Buffer.from(body.buffer, body.byteOffset, body.byteLength));
      }
      throw wrapError(`writing s3://${this.bucket}/${key} (if absent)`, err);
    }
  }

  /** `putIfAbsent` of a JSON document. */
  async putJsonIfAbsent(key: string, value: unknown): Promise<boolean> {
    return this.putIfAbsent(key, JSON.stringify(value), 'application/json');
  }

  /** Whether an object exists under the key (HeadObject). */
  async exists(key: string): Promise<boolean> {
    try {
      await this.client.send(new HeadObjectCommand({ Bucket: this.bucket, Key: key }));
      return true;
    } catch (err) {
      if (httpStatus(err) === 404 || (err as Error).name === 'NotFound' || (err as Error).name === 'NoSuchKey') return false;
      throw wrapError(`checking s3://${this.bucket}/${key}`, err);
    }
  }

  /**
   * The greatest key under the prefix in S3's order (UTF-8 bytes), or null when there is none. With
   * zero-padded names (manifests) that is the highest generation. S3 lists in ascending order, so
   * this is the last key of the last page; the maximum is taken over every page anyway, because
   * s3rver lists in its folder walk's order, which differs from S3's for keys of unequal length.
   * Reads every page: O(keys under the prefix), or only the keys after `startAfter` when a caller
   * knows a lower bound (generations only grow). `pageSize` sets MaxKeys (tests use a small one).
   */
  async latestKey(prefix: string, opts: { pageSize?: number; startAfter?: string } = {}): Promise<string | null> {
    let best: string | null = null;
    let bestBytes: Buffer | null = null;
    let token: string | undefined;
    try {
      do {
        const page = await this.client.send(
          new ListObjectsV2Command({ Bucket: this.bucket, Prefix: prefix, ContinuationToken: token, MaxKeys: opts.pageSize, StartAfter: token ? undefined : opts.startAfter }),
        );
        for (const o of page.Contents ?? []) {
          if (!o.Key) continue;
          const bytes = Buffer.from(o.Key, 'utf8');
          if (bestBytes === null || Buffer.compare(bytes, bestBytes) > 0) {
            best = o.Key;
            bestBytes = bytes;
          }
        }
        token = page.IsTruncated ? page.NextContinuationToken : undefined;
      } while (token);
    } catch (err) {
      throw wrapError(`listing s3://${this.bucket}/${prefix}`, err);
    }
    return best;
  }

  /** The "folders" directly under a prefix (CommonPrefixes with delimiter '/'), each ending in '/'. */
  async listPrefixes(prefix: string): Promise<string[]> {
    const out: string[] = [];
    let token: string | undefined;
    try {
      do {
        const page = await this.client.send(new ListObjectsV2Command({ Bucket: this.bucket, Prefix: prefix, Delimiter: '/', ContinuationToken: token }));
        for (const p of page.CommonPrefixes ?? []) if (p.Prefix) out.push(p.Prefix);
        token = page.IsTruncated ? page.NextContinuationToken : undefined;
      } while (token);
    } catch (err) {
      throw wrapError(`listing s3://${this.bucket}/${prefix}`, err);
    }
    return [...new Set(out)].sort();
  }

  async delete(key: string): Promise<void> {
    try {
      await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: key }));
    } catch (err) {
      throw wrapError(`deleting s3://${this.bucket}/${key}`, err);
    }
  }

  /** Returns the object's bytes, or null when it does not exist. */
  async get(key: string): Promise<Uint8Array | null> {
    try {
      const bytes = await this.readBody(`s3://${this.bucket}/${key}`, () => this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: key })));
      recordS3('get', 'ok', bytes.byteLength);
      return bytes;
    } catch (err) {
      if (err instanceof NoSuchKey || (err as Error).name === 'NoSuchKey' || (err as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode === 404) {
        recordS3('get', 'missing');
        return null;
      }
      recordS3('get', 'error');
      throw wrapError(`reading s3://${this.bucket}/${key}`, err);
    }
  }

  /**
   * Bytes [offset, offset + length) of an object (one GET with a `Range` header), or null when the
   * object does not exist. A range that starts at or past the object's end (416 InvalidRange) or
   * that the object ends inside (a short answer) throws a RangeError naming the key and the range:
   * a reader asked for bytes its directory said were there, so the object is truncated.
   */
  async getRange(key: string, offset: number, length: number): Promise<Uint8Array | null> {
    if (!(Number.isInteger(offset) && Number.isInteger(length) && offset >= 0 && length >= 1)) throw new RangeError(`getRange ${key}: offset must be >= 0 and length >= 1 (integers), got ${offset}, ${length}`);
    let bytes: Uint8Array;
    try {
      bytes = await this.readBody(`s3://${this.bucket}/${key} bytes ${offset}..${offset + length}`, () =>
        this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: key, Range: `bytes=${offset}-${offset + length - 1}` })),
      );
      recordS3('get', 'ok', bytes.byteLength);
    } catch (err) {
      if (err instanceof NoSuchKey || (err as Error).name === 'NoSuchKey' || httpStatus(err) === 404) {
        recordS3('get', 'missing');
        return null;
      }
      if (httpStatus(err) === 416 || (err as Error).name === 'InvalidRange') {
        recordS3('get', 'error');
        throw new RangeError(`s3://${this.bucket}/${key}: range [${offset}, ${offset + length}) starts past the object's end (truncated?)`);
      }
      recordS3('get', 'error');
      throw wrapError(`reading s3://${this.bucket}/${key} bytes ${offset}..${offset + length}`, err);
    }
    if (bytes.byteLength !== length) throw new RangeError(`s3://${this.bucket}/${key}: range [${offset}, ${offset + length}) answered ${bytes.byteLength} bytes (the object ends inside it: truncated?)`);
    return bytes;
  }

  /**
   * One GET and its body, sent again (READ_BODY_RETRIES, said on the logger) when the body stopped
   * or was cut after the answer began (transientBodyError); an error of the request itself (the
   * SDK already retried it) or of a last try is thrown as it came.
   */
  private async readBody(what: string, send: () => Promise<{ Body?: { transformToByteArray(): Promise<Uint8Array> } }>): Promise<Uint8Array> {
    for (let attempt = 0; ; attempt++) {
      const out = await send();
      try {
        return out.Body ? await out.Body.transformToByteArray() : new Uint8Array();
      } catch (err) {
        if (attempt >= READ_BODY_RETRIES || !transientBodyError(err)) throw err;
        const delay = READ_BODY_RETRY_DELAY_MS * 2 ** attempt;
        this.logger?.warn(`reading ${what}: the answer stopped while its body streamed (${(err as Error).name}: ${(err as Error).message}); reading it again in ${delay} ms (try ${attempt + 2} of ${READ_BODY_RETRIES + 1})`);
        await new Promise((r) => setTimeout(r, delay));
      }
    }
  }

  /**
   * A JSON object, or null when there is none. An object that does not parse is an UnavailableError
   * (503 + Retry-After at the API, a retry in a job): S3-compatible servers that write in place
   * (s3rver) can hand out an object half-written while a concurrent PUT of the same key runs.
   */
  async getJson<T>(key: string): Promise<T | null> {
    const bytes = await this.get(key);
    if (!bytes) return null;
    try {
      return JSON.parse(Buffer.from(bytes).toString('utf8')) as T;
    } catch {
      throw new UnavailableError(`the object store returned an incomplete or invalid JSON object (${bytes.length} bytes; being written?)`, 1);
    }
  }

  async list(prefix: string): Promise<{ key: string; size: number }[]> {
    const out: { key: string; size: number }[] = [];
    let token: string | undefined;
    do {
      const page = await this.client.send(new ListObjectsV2Command({ Bucket: this.bucket, Prefix: prefix, ContinuationToken: token }));
      for (const o of page.Contents ?? []) if (o.Key) out.push({ key: o.Key, size: o.Size ?? 0 });
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
    return out;
  }

  async deletePrefix(prefix: string): Promise<number> {
    const objects = await this.list(prefix);
    for (let i = 0; i < objects.length; i += 1000) {
      const chunk = objects.slice(i, i + 1000);
      await this.client.send(new DeleteObjectsCommand({ Bucket: this.bucket, Delete: { Objects: chunk.map((o) => ({ Key: o.key })), Quiet: true } }));
    }
    return objects.length;
  }

  destroy(): void {
    this.client.destroy();
  }
}

/**
 * Every command this client sends has its keys checked first (object-keys.ts): the object key, a
 * listing prefix, the keys of a batch delete. One check for every caller, this
 * class's methods and the streaming helpers (object-streams.ts) that use the client directly, and
 * for every store behind it: a key with a `..` segment or a NUL never leaves the process.
 */
function guardKeys(client: S3Client): void {
  client.middlewareStack.add(
    (next) => async (args) => {
      const input = args.input as { Key?: unknown; Prefix?: unknown; StartAfter?: unknown; Delete?: { Objects?: { Key?: unknown }[] } };
      if (input.Key !== undefined) checkObjectKey(input.Key as string);
      if (input.Prefix !== undefined) checkObjectKey(input.Prefix as string, { prefix: true });
      if (input.StartAfter !== undefined) checkObjectKey(input.StartAfter as string);
      for (const o of input.Delete?.Objects ?? []) checkObjectKey(o.Key as string);
      return next(args);
    },
    { step: 'initialize', name: 'lateralObjectKeyGuard', priority: 'high' },
  );
}

function httpStatus(err: unknown): number | undefined {
  return (err as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
}
