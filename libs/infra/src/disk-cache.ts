import { createHash } from 'node:crypto';
import { mkdir, open, readFile, readdir, rename, stat, unlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { ObjectStore } from './object-store';

export interface DiskCacheStats {
  hits: number;
  misses: number;
  /** Bytes of the files this process knows in the cache folder. */
  bytes: number;
  maxBytes: number;
  files: number;
  evictions: number;
}

/**
 * A local disk cache of immutable S3 objects (segments and their indexes: their keys carry the
 * batch and codec version, so an object under a key never changes). Files are named by the
 * SHA-256 of the key, written to a temporary name and renamed (a reader never sees half a file),
 * and the least recently used are removed once the folder holds more than `maxBytes`. At start
 * the files already there are taken back, oldest modification first. `maxBytes` 0 turns it off.
 *
 * Several processes may share a folder: each evicts from what it knows; a file removed by
 * another is a miss (read from S3 again), never an error. Content is verified by its reader
 * (segments and indexes are checksummed): a corrupt file is dropped with `invalidate`.
 */
export class DiskObjectCache {
  /** file name -> bytes, least recently used first. */
  private readonly index = new Map<string, number>();
  private held = 0;
  private ready: Promise<void> | null = null;
  private tmpCounter = 0;
  private readonly counters = { hits: 0, misses: 0, evictions: 0 };

  constructor(
    private readonly store: Pick<ObjectStore, 'get'>,
    private readonly dir: string,
    private readonly maxBytes: number,
    /** Distinguishes object stores sharing a folder (endpoint and bucket): part of every file name. */
    private readonly namespace = '',
  ) {}

  get enabled(): boolean {
    return this.maxBytes > 0;
  }

  async get(key: string): Promise<Uint8Array | null> {
    if (!this.enabled) return this.store.get(key);
    await this.init();
    const name = fileName(this.namespace, key);
    if (this.index.has(name)) {
      try {
        const b = await readFile(path.join(this.dir, name));
        this.touch(name);
        this.counters.hits++;
        return new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
      } catch {
        this.forget(name); // removed by another process sharing the folder
      }
    }
    return this.fetch(name, key);
  }

  /** A miss: the object from S3, checked by `check` when given (a throw keeps no copy), then written to the folder. */
  private async fetch(name: string, key: string, check?: (bytes: Uint8Array) => Promise<void>): Promise<Uint8Array | null> {
    this.counters.misses++;
    const bytes = await this.store.get(key);
    if (bytes && check) await check(bytes);
    if (bytes && bytes.byteLength <= this.maxBytes) await this.write(name, bytes);
    return bytes;
  }

  /**
   * Byte ranges [offset, offset + length) of an object, by positioned reads of its local copy
   * (fetched from S3 and written first when it is not there): the object is not read whole into
   * memory, and the OS page cache keeps its hot pages. An object fetched from S3 by this call is
   * given whole to `check` before its copy is written (a throw propagates and keeps no copy), so
   * a copy evicted and fetched again is checked as the first one was; a copy already in the
   * folder is trusted (its reader checked it when it was first read whole). null when the cache is
   * off, the object is missing, or its copy vanished twice; an object too large for the cache is
   * answered from one read of S3. A range outside the object throws.
   */
  async readRanges(key: string, ranges: readonly (readonly [number, number])[], check?: (bytes: Uint8Array) => Promise<void>): Promise<Uint8Array[] | null> {
    if (!this.enabled) return null;
    await this.init();
    const name = fileName(this.namespace, key);
    // At most: fetch and write the copy, find it removed by another process, fetch it again.
    for (let attempt = 0; attempt < 4; attempt++) {
      if (!this.index.has(name)) {
        const bytes = await this.fetch(name, key, check);
        if (!bytes) return null;
        if (!this.index.has(name)) return ranges.map(([o, n]) => sliceRange(bytes, key, o, n));
        continue;
      }
      const size = this.index.get(name)!;
      let fh: Awaited<ReturnType<typeof open>>;
      try {
        fh = await open(path.join(this.dir, name), 'r');
      } catch {
        this.forget(name); // removed by another process sharing the folder: fetched again
        continue;
      }
      try {
        const out = await Promise.all(
          ranges.map(async ([offset, length]) => {
            if (!(Number.isInteger(offset) && Number.isInteger(length) && offset >= 0 && length >= 0 && offset + length <= size)) throw new RangeError(`${key}: range [${offset}, ${offset + length}) is outside the ${size}-byte object`);
            const b = new Uint8Array(length);
            let got = 0;
            while (got < length) {
              const { bytesRead } = await fh.read(b, got, length - got, offset + got);
              if (bytesRead === 0) throw new RangeError(`${key}: local copy ended at ${offset + got} (expected ${size} bytes)`);
              got += bytesRead;
            }
            return b;
          }),
        );
        if (this.index.has(name)) this.touch(name);
        this.counters.hits++;
        return out;
      } finally {
        await fh.close();
      }
    }
    return null;
  }

  /**
   * An object derived locally and kept with `putLocal` (a segment's head), or null when this
   * folder has none (never read from S3): an optimisation only, its reader checks it and makes it
   * again when it is absent or wrong.
   */
  async getLocal(key: string): Promise<Uint8Array | null> {
    if (!this.enabled) return null;
    await this.init();
    const name = fileName(this.namespace, key);
    if (!this.index.has(name)) return null;
    try {
      const b = await readFile(path.join(this.dir, name));
      this.touch(name);
      return new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
    } catch {
      this.forget(name); // removed by another process sharing the folder
      return null;
    }
  }

  /** Keeps a locally derived object under `key` (counted in the bound, evicted like the copies); a full disk is not an error. */
  async putLocal(key: string, bytes: Uint8Array): Promise<void> {
    if (!this.enabled || bytes.byteLength > this.maxBytes) return;
    await this.init();
    await this.write(fileName(this.namespace, key), bytes);
  }

  /** Drops a cached object (e.g. its reader found it corrupt); the next get reads S3. */
  async invalidate(key: string): Promise<void> {
    if (!this.enabled) return;
    const name = fileName(this.namespace, key);
    this.forget(name);
    await unlink(path.join(this.dir, name)).catch(() => undefined);
  }

  stats(): DiskCacheStats {
    return { ...this.counters, bytes: this.held, maxBytes: this.maxBytes, files: this.index.size };
  }

  private init(): Promise<void> {
    this.ready ??= (async () => {
      await mkdir(this.dir, { recursive: true });
      const names = (await readdir(this.dir)).filter((n) => n.endsWith('.obj'));
      const found = await Promise.all(names.map(async (n) => ({ n, s: await stat(path.join(this.dir, n)).catch(() => null) })));
      found
        .filter((f): f is { n: string; s: NonNullable<typeof f.s> } => f.s !== null)
        .sort((a, b) => a.s.mtimeMs - b.s.mtimeMs)
        .forEach((f) => {
          this.index.set(f.n, f.s.size);
          this.held += f.s.size;
        });
      await this.evict();
    })();
    return this.ready;
  }

  private async write(name: string, bytes: Uint8Array): Promise<void> {
    const tmp = path.join(this.dir, `.${name}.${process.pid}.${this.tmpCounter++}.tmp`);
    try {
      await writeFile(tmp, bytes);
      await rename(tmp, path.join(this.dir, name));
    } catch {
      await unlink(tmp).catch(() => undefined);
      return; // a full or read-only disk makes the cache a pass-through, not a failure
    }
    this.forget(name);
    this.index.set(name, bytes.byteLength);
    this.held += bytes.byteLength;
    await this.evict();
  }

  private touch(name: string): void {
    const size = this.index.get(name)!;
    this.index.delete(name);
    this.index.set(name, size);
  }

  private forget(name: string): void {
    const size = this.index.get(name);
    if (size === undefined) return;
    this.index.delete(name);
    this.held -= size;
  }

  private async evict(): Promise<void> {
    while (this.held > this.maxBytes && this.index.size > 0) {
      const oldest = this.index.keys().next().value as string;
      this.forget(oldest);
      this.counters.evictions++;
      await unlink(path.join(this.dir, oldest)).catch(() => undefined);
    }
  }
}

function fileName(namespace: string, key: string): string {
  return `${createHash('sha256').update(namespace).update('\0').update(key).digest('hex')}.obj`;
}

function sliceRange(bytes: Uint8Array, key: string, offset: number, length: number): Uint8Array {
  if (!(Number.isInteger(offset) && Number.isInteger(length) && offset >= 0 && length >= 0 && offset + length <= bytes.byteLength)) throw new RangeError(`${key}: range [${offset}, ${offset + length}) is outside the ${bytes.byteLength}-byte object`);
  return bytes.slice(offset, offset + length);
}
