import { Readable } from 'node:stream';
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  UploadPartCommand,
  type CompletedPart,
} from '@aws-sdk/client-s3';
import { wrapError } from '@lateral/shared';
import type { ObjectStore } from './object-store';
import { recordS3 } from './metrics';

/** Smallest multipart part S3 accepts (all but the last part). */
export const MIN_PART_BYTES = 5 * 1024 * 1024;

/**
 * A streamed write to S3: bytes are buffered up to one part (`partBytes`, >= 5 MiB) and sent as a
 * multipart upload part, so an object of any size is written holding one part in memory. An
 * object smaller than one part is written with a single PUT. `abort()` discards what was sent.
 */
export class S3Upload {
  private uploadId: string | null = null;
  private readonly parts: CompletedPart[] = [];
  private buffered: Buffer[] = [];
  private bufferedBytes = 0;
  private inFlight: Promise<void> = Promise.resolve();
  bytes = 0;

  constructor(
    private readonly store: ObjectStore,
    readonly key: string,
    private readonly contentType = 'application/octet-stream',
    private readonly partBytes = 8 * 1024 * 1024,
  ) {
    if (partBytes < MIN_PART_BYTES) throw new RangeError(`partBytes must be at least ${MIN_PART_BYTES}`);
  }

  /** Appends bytes; resolves once the data is buffered or its part has been sent (back-pressure). */
  async write(chunk: Uint8Array | string): Promise<void> {
    const b = typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    if (b.byteLength === 0) return;
    this.buffered.push(b);
    this.bufferedBytes += b.byteLength;
    this.bytes += b.byteLength;
    if (this.bufferedBytes >= this.partBytes) await this.flushPart();
  }

  private async flushPart(): Promise<void> {
    const body = Buffer.concat(this.buffered);
    this.buffered = [];
    this.bufferedBytes = 0;
    await this.inFlight;
    const client = this.store.s3;
    const Bucket = this.store.bucket;
    try {
      if (!this.uploadId) {
        const created = await client.send(new CreateMultipartUploadCommand({ Bucket, Key: this.key, ContentType: this.contentType }));
        this.uploadId = created.UploadId ?? null;
        if (!this.uploadId) throw new Error('no UploadId in the CreateMultipartUpload answer');
      }
      const PartNumber = this.parts.length + 1;
      const out = await client.send(new UploadPartCommand({ Bucket, Key: this.key, UploadId: this.uploadId, PartNumber, Body: body }));
      this.parts.push({ ETag: out.ETag, PartNumber });
      recordS3('put', 'ok', body.byteLength);
    } catch (err) {
      throw wrapError(`writing s3://${Bucket}/${this.key} (multipart)`, err);
    }
  }

  /** Writes what is buffered and completes the object. */
  async finish(): Promise<void> {
    if (!this.uploadId) {
      await this.store.put(this.key, Buffer.concat(this.buffered), this.contentType);
      this.buffered = [];
      return;
    }
    if (this.bufferedBytes > 0) await this.flushPart();
    try {
      await this.store.s3.send(
        new CompleteMultipartUploadCommand({ Bucket: this.store.bucket, Key: this.key, UploadId: this.uploadId, MultipartUpload: { Parts: this.parts } }),
      );
    } catch (err) {
      throw wrapError(`writing s3://${this.store.bucket}/${this.key} (completing multipart)`, err);
    }
  }

  async abort(): Promise<void> {
    this.buffered = [];
    if (!this.uploadId) return;
    await this.store.s3.send(new AbortMultipartUploadCommand({ Bucket: this.store.bucket, Key: this.key, UploadId: this.uploadId })).catch(() => undefined);
    this.uploadId = null;
  }
}

/** The object's bytes as a stream (null when it does not exist): reads never hold a whole object. */
export async function getObjectStream(store: Pick<ObjectStore, 's3' | 'bucket'>, key: string): Promise<Readable | null> {
  try {
    const out = await store.s3.send(new GetObjectCommand({ Bucket: store.bucket, Key: key }));
    recordS3('get', 'ok', out.ContentLength ?? 0); // the object's size: what the caller will read
    if (!out.Body) return Readable.from([]);
    return out.Body as Readable;
  } catch (err) {
    const status = (err as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
    if ((err as Error).name === 'NoSuchKey' || status === 404) return null;
    throw wrapError(`reading s3://${store.bucket}/${key}`, err);
  }
}

/** Size in bytes and last-modified time of an object, or null when it does not exist. */
export async function objectHead(store: Pick<ObjectStore, 's3' | 'bucket'>, key: string): Promise<{ size: number; lastModified: Date | null } | null> {
  try {
    const out = await store.s3.send(new HeadObjectCommand({ Bucket: store.bucket, Key: key }));
    return { size: out.ContentLength ?? 0, lastModified: out.LastModified ?? null };
  } catch (err) {
    const status = (err as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
    if (status === 404 || (err as Error).name === 'NotFound' || (err as Error).name === 'NoSuchKey') return null;
    throw wrapError(`checking s3://${store.bucket}/${key}`, err);
  }
}

/**
 * Cuts UTF-8 text handed to it piece by piece into lines, without their line breaks ('\r\n' or
 * '\n'): `push` returns the lines a piece completed, `end` the last one when the text does not end
 * with a line break. A piece may end inside a line or inside a character.
 */
export class LineSplitter {
  private rest = '';
  private readonly decoder = new TextDecoder('utf-8');

  push(piece: Uint8Array | string): string[] {
    this.rest += typeof piece === 'string' ? piece : this.decoder.decode(piece, { stream: true });
    const lines: string[] = [];
    let start = 0;
    let nl: number;
    while ((nl = this.rest.indexOf('\n', start)) >= 0) {
      const line = this.rest.slice(start, nl);
      start = nl + 1;
      lines.push(line.endsWith('\r') ? line.slice(0, -1) : line);
    }
    this.rest = this.rest.slice(start);
    return lines;
  }

  end(): string[] {
    const rest = this.rest + this.decoder.decode();
    this.rest = '';
    return rest.length > 0 ? [rest.endsWith('\r') ? rest.slice(0, -1) : rest] : [];
  }
}

/**
 * LineSplitter's lines as bytes, not decoded (decodeLine gives the text LineSplitter gives: a
 * batch upload decodes only what it cannot read from the bytes, RepeatedCandidates). The same
 * lines: cut at '\n' bytes (never inside a UTF-8 character), a '\r' before it dropped, a leading
 * byte order mark dropped as TextDecoder drops it. A line is a view of the piece it lies in (valid
 * while the caller keeps the piece unchanged); a line spanning pieces is a copy.
 */
export class ByteLineSplitter {
  private rest: Buffer[] = [];
  private restBytes = 0;
  /** Bytes of the stream seen so far, while fewer than a byte order mark's 3 (it is dropped only there). */
  private start: Buffer | null = Buffer.alloc(0);

  push(piece: Uint8Array): Uint8Array[] {
    let buf = Buffer.from(piece.buffer, piece.byteOffset, piece.byteLength);
    if (this.start) {
      buf = Buffer.concat([this.start, buf]);
      if (buf.byteLength < 3) {
        this.start = buf;
        return [];
      }
      this.start = null;
      if (buf[0] === 0xef && buf[1] === 0xbb && buf[2] === 0xbf) buf = buf.subarray(3);
    }
    return this.split(buf);
  }

  end(): Uint8Array[] {
    // A stream of fewer than 3 bytes: no byte order mark to drop.
    const lines = this.start ? this.split(this.start) : [];
    this.start = null;
    const rest = Buffer.concat(this.rest);
    this.rest = [];
    this.restBytes = 0;
    if (rest.byteLength > 0) lines.push(rest[rest.byteLength - 1] === 13 ? rest.subarray(0, -1) : rest);
    return lines;
  }

  private split(buf: Buffer): Uint8Array[] {
    const lines: Uint8Array[] = [];
    let from = 0;
    for (let nl = buf.indexOf(10); nl >= 0; nl = buf.indexOf(10, from)) {
      let line: Buffer = buf.subarray(from, nl);
      if (this.restBytes > 0) {
        line = Buffer.concat([...this.rest, line]);
        this.rest = [];
        this.restBytes = 0;
      }
      lines.push(line.byteLength > 0 && line[line.byteLength - 1] === 13 ? line.subarray(0, -1) : line);
      from = nl + 1;
    }
    if (from < buf.byteLength) {
      // A copy (Buffer.from of a Buffer copies byte by byte: allocUnsafe + copy is one memcpy): the caller may reuse its piece once push returns.
      const tail = Buffer.allocUnsafe(buf.byteLength - from);
      buf.copy(tail, 0, from);
      this.rest.push(tail);
      this.restBytes += buf.byteLength - from;
    }
    return lines;
  }
}

/** Lines of a stream of UTF-8 text as bytes (ByteLineSplitter), one at a time. */
export async function* readByteLines(stream: AsyncIterable<Uint8Array | string>): AsyncGenerator<Uint8Array> {
  const lines = new ByteLineSplitter();
  for await (const chunk of stream) yield* lines.push(typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : chunk);
  yield* lines.end();
}

/** Lines of a stream of UTF-8 text, without their line breaks ('\r\n' or '\n'), one at a time. */
export async function* readLines(stream: AsyncIterable<Uint8Array | string>): AsyncGenerator<string> {
  const lines = new LineSplitter();
  for await (const chunk of stream) yield* lines.push(chunk);
  yield* lines.end();
}

/** Every object under a prefix with its last-modified time, page by page. */
export async function* listWithDates(store: Pick<ObjectStore, 's3' | 'bucket'>, prefix: string): AsyncGenerator<{ key: string; size: number; lastModified: Date | null }> {
  let token: string | undefined;
  do {
    let page;
    try {
      page = await store.s3.send(new ListObjectsV2Command({ Bucket: store.bucket, Prefix: prefix, ContinuationToken: token }));
    } catch (err) {
      throw wrapError(`listing s3://${store.bucket}/${prefix}`, err);
    }
    for (const o of page.Contents ?? []) if (o.Key) yield { key: o.Key, size: o.Size ?? 0, lastModified: o.LastModified ?? null };
    token = page.IsTruncated ? page.NextContinuationToken : undefined;
  } while (token);
}
