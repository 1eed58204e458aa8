import zlib from 'node:zlib';
import type { Transform } from 'node:stream';
import type { NextFunction, Request, Response } from 'express';
import getRawBody from 'raw-body';

/**
 * Reads request bodies as text (raw-body reads them; body-parser's middleware is not used: it reads
 * a refused body to its end before answering, and takes no depth limit), with the checks a hostile
 * client needs:
 *
 * - by content type: every body endpoint takes JSON (`application/json`, `application/*+json`, or
 *   no Content-Type at all); document ingestion also takes NDJSON. Anything else (text/plain, XML,
 *   multipart, forms) is a 415 naming the accepted types; a charset other than UTF-8 is a 415 too.
 * - Content-Encoding gzip, deflate, br or identity; another coding, or data that does not
 *   decompress, is a 400 naming the header. The size limit (MAX_REQUEST_BYTES) applies to the bytes
 *   received and to the decompressed bytes (no decompression bombs).
 * - the text must be UTF-8 (400 otherwise) and nest at most MAX_JSON_DEPTH arrays / objects
 *   deep (400 naming the limit; deeper JSON overflowed the stack of the code that walks it).
 * - bounded memory: bodies over LARGE_BODY_BYTES (or of unknown length) are read, parsed and
 *   handled at most BODY_PARSE_CONCURRENCY at a time, per process; the others wait unread (TCP
 *   back-pressure keeps their bytes with the client) for up to BODY_SLOT_WAIT_MS, then get 503 with
 *   Retry-After. The slot is held until the response is sent, because the parsed body lives that long.
 *
 * The text is left in `req.body` (a string) for the controllers' own JSON / NDJSON parsing.
 */
export interface BodyReaderOptions {
  /** MAX_REQUEST_BYTES */
  maxBytes: number;
  /** MAX_JSON_DEPTH */
  maxDepth: number;
  /** BODY_PARSE_CONCURRENCY */
  concurrency: number;
  /** Bodies at least this large take a slot (default LARGE_BODY_BYTES). */
  largeBytes?: number;
  /** How long a large body waits for a slot before 503 (default BODY_SLOT_WAIT_MS). */
  slotWaitMs?: number;
}

export const LARGE_BODY_BYTES = 1 << 20;
export const BODY_SLOT_WAIT_MS = 10_000;

const JSON_TYPES = ['application/json'];
const NDJSON_TYPES = ['application/x-ndjson', 'application/ndjson', 'application/jsonl'];
const UPLOAD_PATH = /^\/v1\/uploads\/[^/]+\/?$/;
const BODYLESS = new Set(['GET', 'HEAD', 'DELETE', 'OPTIONS']);

/** The media types a route takes: NDJSON too for document ingestion, batches and judgments, JSON everywhere else. */
export function acceptedTypes(method: string, path: string): string[] {
  if (method === 'POST' && /^\/v1\/batches\/?$/.test(path)) return [...JSON_TYPES, ...NDJSON_TYPES];
  if (method === 'PUT' && UPLOAD_PATH.test(path)) return NDJSON_TYPES;
  if (method === 'POST' && /^\/v1\/collections\/[^/]+\/(documents|judgments)\/?$/.test(path)) return [...JSON_TYPES, ...NDJSON_TYPES];
  return JSON_TYPES;
}

class BodyError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly field: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

/** A counting semaphore whose waiters give up after a timeout. */
export class Slots {
  private used = 0;
  private readonly waiters: { grant: () => void; timer: NodeJS.Timeout }[] = [];

  constructor(readonly size: number) {}

  get inUse(): number {
    return this.used;
  }

  get waiting(): number {
    return this.waiters.length;
  }

  /** Resolves with a release function, or null when no slot came within `timeoutMs`. */
  acquire(timeoutMs: number): Promise<(() => void) | null> {
    const release = this.releaser();
    if (this.used < this.size) {
      this.used++;
      return Promise.resolve(release);
    }
    return new Promise((resolve) => {
      const waiter = {
        grant: () => resolve(release),
        timer: setTimeout(() => {
          const i = this.waiters.indexOf(waiter);
          if (i >= 0) this.waiters.splice(i, 1);
          resolve(null);
        }, timeoutMs),
      };
      this.waiters.push(waiter);
    });
  }

  private releaser(): () => void {
    let done = false;
    return () => {
      if (done) return;
      done = true;
      const next = this.waiters.shift();
      if (next) {
        clearTimeout(next.timer);
        next.grant(); // the slot passes to the next waiter
      } else {
        this.used--;
      }
    };
  }
}

/**
 * Where the text first nests deeper than `maxDepth` ({ offset } of the opening bracket), or null.
 * A linear scan that skips string contents (with escapes); it does not validate the JSON.
 */
export function excessiveDepth(text: string, maxDepth: number): { offset: number } | null {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 92 /* \ */) i++;
      else if (c === 34 /* " */) inString = false;
      continue;
    }
    if (c === 34) inString = true;
    else if (c === 91 /* [ */ || c === 123 /* { */) {
      if (++depth > maxDepth) return { offset: i };
    } else if ((c === 93 /* ] */ || c === 125) /* } */ && depth > 0) {
      depth--;
    }
  }
  return null;
}

function lineColumn(text: string, offset: number): string {
  let line = 1;
  let last = -1;
  for (let i = 0; i < offset; i++) {
    if (text.charCodeAt(i) === 10) {
      line++;
      last = i;
    }
  }
  return `line ${line}, column ${offset - last}`;
}

function decoder(encoding: string): Transform | null {
  switch (encoding) {
    case '':
    case 'identity':
      return null;
    case 'gzip':
    case 'x-gzip':
      return zlib.createGunzip();
    case 'deflate':
      return zlib.createInflate();
    case 'br':
      return zlib.createBrotliDecompress();
    default:
      throw new BodyError(400, 'bad_request', `Content-Encoding '${encoding.slice(0, 40)}' is not supported (accepted: gzip, deflate, br, identity)`, 'content-encoding');
  }
}

function mediaType(req: Request): { type: string; charset: string | undefined } {
  const raw = req.headers['content-type'];
  if (!raw) return { type: '', charset: undefined };
  const [type, ...params] = raw.split(';');
  const charset = params
    .map((p) => p.trim().toLowerCase())
    .find((p) => p.startsWith('charset='))
    ?.slice('charset='.length)
    .replace(/^"|"$/g, '');
  return { type: type.trim().toLowerCase(), charset };
}

function checkType(req: Request, path: string): void {
  const accepted = acceptedTypes(req.method, path);
  const { type, charset } = mediaType(req);
  const ok = type === '' || accepted.includes(type) || (accepted.includes('application/json') && /^application\/[a-z0-9.+-]+\+json$/.test(type));
  if (!ok) {
    throw new BodyError(415, 'unsupported_media_type', `Content-Type '${type.slice(0, 80)}' is not accepted by ${req.method} ${path}: send ${accepted.join(' or ')}`, 'content-type');
  }
  if (charset && charset !== 'utf-8' && charset !== 'utf8') {
    throw new BodyError(415, 'unsupported_media_type', `charset '${charset.slice(0, 40)}' is not accepted: bodies are UTF-8`, 'content-type');
  }
}

/** raw-body's errors as the answers this reader gives (BodyErrors pass through). */
function asBodyError(err: unknown, encoding: string, maxBytes: number): unknown {
  if (err instanceof BodyError) return err;
  const type = (err as { type?: string }).type;
  if (type === 'entity.too.large') {
    const decoded = encoding !== '' && encoding !== 'identity';
    return new BodyError(413, 'payload_too_large', `request body is over MAX_REQUEST_BYTES (${maxBytes} bytes)${decoded ? ' once decompressed' : ''}`, 'body', { Connection: 'close' });
  }
  if (type === 'request.aborted' || type === 'request.size.invalid') return new BodyError(400, 'bad_request', 'the request body was not received completely', 'body');
  // What else a read can meet: with a coding, the decompressor's error (the request's own errors
  // reach it as BodyErrors); without, the socket's.
  if (encoding !== '' && encoding !== 'identity') {
    return new BodyError(400, 'bad_request', `the body is not valid ${encoding} data (Content-Encoding: ${encoding})`, 'content-encoding');
  }
  return new BodyError(400, 'bad_request', 'the request body was not received completely', 'body');
}

/**
 * Reads the (decompressed) body up to `maxBytes` with raw-body (npm, expressjs; what body-parser
 * reads with): the bound holds for the bytes received and, through the decompressor, for the bytes
 * they expand to. On an error the request is unpiped and paused, not read to its end (the caller
 * resumes it to discard the rest), so a 413 is answered at once.
 */
async function readBody(req: Request, encoding: string, maxBytes: number): Promise<Buffer> {
  const inflate = decoder(encoding);
  if (!inflate) {
    const declared = req.headers['content-length'];
    return getRawBody(req, { limit: maxBytes, length: declared === undefined ? null : Number(declared) }).catch((err: unknown) => {
      throw asBodyError(err, encoding, maxBytes);
    });
  }
  // The compressed bytes count too, and a request that breaks off ends the decompressor with it.
  let received = 0;
  const tooLarge = () => new BodyError(413, 'payload_too_large', `request body is over MAX_REQUEST_BYTES (${maxBytes} bytes)`, 'body', { Connection: 'close' });
  const incomplete = () => inflate.destroy(new BodyError(400, 'bad_request', 'the request body was not received completely', 'body'));
  const onData = (chunk: Buffer) => {
    received += chunk.length;
    if (received > maxBytes) inflate.destroy(tooLarge());
  };
  req.on('data', onData);
  req.once('aborted', incomplete);
  req.once('error', incomplete);
  req.pipe(inflate);
  try {
    return await getRawBody(inflate, { limit: maxBytes });
  } catch (err) {
    req.unpipe(inflate);
    inflate.destroy();
    throw asBodyError(err, encoding, maxBytes);
  } finally {
    req.off('data', onData);
    req.off('aborted', incomplete);
    req.off('error', incomplete);
  }
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

function hasBody(req: Request): boolean {
  const len = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (len !== undefined && len !== '0');
}

/** The Express middleware; one `Slots` per process is shared by every request. */
export function bodyReader(opts: BodyReaderOptions) {
  const slots = new Slots(opts.concurrency);
  const largeBytes = opts.largeBytes ?? LARGE_BODY_BYTES;
  const slotWaitMs = opts.slotWaitMs ?? BODY_SLOT_WAIT_MS;

  const send = (res: Response, err: BodyError) => {
    if (res.headersSent) return;
    for (const [k, v] of Object.entries(err.headers)) res.setHeader(k, v);
    res.status(err.status).json({ error: err.code, message: err.message, details: [{ field: err.field, message: err.message }] });
  };

  const middleware = async (req: Request, res: Response, next: NextFunction) => {
    const path = (req.originalUrl ?? req.url).split('?')[0];
    if (BODYLESS.has(req.method) || !hasBody(req)) {
      if (hasBody(req)) req.resume(); // a body on GET / DELETE is ignored, not buffered
      if (!BODYLESS.has(req.method)) req.body = '';
      return next();
    }
    try {
      checkType(req, path);
      // A batch file (JSONL) is not read here: the batches controller streams it to S3 (BATCH_MAX_BYTES).
      if (req.method === 'POST' && /^\/v1\/batches\/?$/.test(path) && NDJSON_TYPES.includes(mediaType(req).type)) return next();
      // An upload (PUT /v1/uploads/{name}) likewise: streamed to S3 by the uploads controller.
      if (req.method === 'PUT' && UPLOAD_PATH.test(path)) return next();
      const encoding = String(req.headers['content-encoding'] ?? '').trim().toLowerCase();
      decoder(encoding)?.destroy(); // unsupported coding: 400 before reading anything
      const declared = Number(req.headers['content-length']);
      if (Number.isFinite(declared) && declared > opts.maxBytes) {
        throw new BodyError(413, 'payload_too_large', `request body is ${declared} bytes, over MAX_REQUEST_BYTES (${opts.maxBytes} bytes)`, 'body', { Connection: 'close' });
      }
      if (!Number.isFinite(declared) || declared >= largeBytes || (encoding !== '' && encoding !== 'identity')) {
        const release = await slots.acquire(slotWaitMs);
        if (!release) {
          throw new BodyError(
            503,
            'unavailable',
            `too many large request bodies in progress (BODY_PARSE_CONCURRENCY = ${opts.concurrency} at a time, over ${largeBytes} bytes each); retry later`,
            'body',
            { 'Retry-After': '2', Connection: 'close' },
          );
        }
        res.once('finish', release);
        res.once('close', release);
      }
      const bytes = await readBody(req, encoding, opts.maxBytes);
      let text: string;
      try {
        text = utf8.decode(bytes);
      } catch {
        throw new BodyError(400, 'bad_request', 'the request body is not valid UTF-8', 'body');
      }
      const deep = excessiveDepth(text, opts.maxDepth);
      if (deep) {
        throw new BodyError(400, 'bad_request', `the body nests arrays / objects more than MAX_JSON_DEPTH (${opts.maxDepth}) deep, at ${lineColumn(text, deep.offset)}`, 'body');
      }
      req.body = text;
      next();
    } catch (err) {
      if (!req.complete) req.resume(); // what was not read is discarded, not buffered
      if (err instanceof BodyError) return send(res, err);
      next(err);
    }
  };
  return Object.assign(middleware, { slots });
}
