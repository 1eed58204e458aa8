import { createHash } from 'node:crypto';
import { closeSync, constants, openSync, readSync } from 'node:fs';
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
  /** Ranged GETs sent to the store (getRanges: search layouts' lists), and the bytes they fetched. */
  rangeGets: number;
  rangeBytes: number;
  /** Ranges getRanges answered from the local copies (whole or sparse) without a GET. */
  rangeHits: number;
}

/**
 * readRanges of a local copy, and getRanges answered from the local copies (a warm WARP query's
 * probed lists of one segment: ~200 ranges, ~1.4 MB at 1,000,000 documents), read ranges summing
 * to at most this many bytes synchronously (one pread each from the page cache, a few
 * microseconds) rather than through libuv's thread pool: a short block of the event loop instead
 * of a trip through the pool per range. Larger reads (a re-rank's thousand documents) stay
 * asynchronous.
 */
export const SYNC_RANGE_READ_BYTES = 4 << 20;

/** Ranged GETs in flight at once per cache, by default (DiskObjectCache options). */
export const RANGE_GETS_IN_FLIGHT = 64;

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
 *
 * Objects read by ranges (`getRanges`: WARP search layouts, whose lists are checksummed one by one)
 * are never fetched whole: each range missing locally is one ranged GET, and the bytes fetched that
 * were not present yet are appended, in one write per call, to a local file of this process's
 * (`<sha256>.<pid>.<n>.part`) whose map of
 * object intervals to file positions this process keeps in memory (ByteExtents; a restart deletes
 * those files); the bound counts the bytes of that file.
 */
export class DiskObjectCache {
  /** file name -> bytes, least recently used first. */
  private readonly index = new Map<string, number>();
  private held = 0;
  private ready: Promise<void> | null = null;
  private tmpCounter = 0;
  private readonly counters = { hits: 0, misses: 0, evictions: 0, rangeGets: 0, rangeBytes: 0, rangeHits: 0 };
  /** Sparse local copies (`.part` file name -> which object bytes it holds, and where). */
  private readonly sparse = new Map<string, ByteExtents>();
  private readonly gets: Gate;

  constructor(
    private readonly store: Pick<ObjectStore, 'get'> & Partial<Pick<ObjectStore, 'getRange'>>,
    private readonly dir: string,
    private readonly maxBytes: number,
    /** Distinguishes object stores sharing a folder (endpoint and bucket): part of every file name. */
    private readonly namespace = '',
    opts: { rangeGetsInFlight?: number } = {},
  ) {
    this.gets = new Gate(opts.rangeGetsInFlight ?? RANGE_GETS_IN_FLIGHT);
  }

  /** Whether `getRanges` can answer (the store sends ranged GETs). */
  get ranged(): boolean {
    return typeof this.store.getRange === 'function';
  }

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
  async readRanges(key: string, ranges: readonly (readonly [number, number])[], check?: (bytes: Uint8Array) => Promise<void>, into?: (bytes: number) => Uint8Array): Promise<Uint8Array[] | null> {
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
      const out = rangeBytes(ranges) <= SYNC_RANGE_READ_BYTES ? this.readLocalSync(name, key, size, ranges, into) : await this.readLocal(name, key, size, ranges);
      if (!out) continue; // removed by another process sharing the folder: fetched again
      if (this.index.has(name)) this.touch(name);
      this.counters.hits++;
      return out;
    }
    return null;
  }

  /**
   * readRanges of a few small ranges of a local copy: synchronous positioned reads (pread from the
   * page cache, microseconds each) instead of one trip through libuv's thread pool per range plus
   * the open and close (WARP's exact final stage reads ~32 documents' rows a query: in a CPU
   * profile of the search worker over 90 full-Vaswani queries at load ~14, readRanges took 290 ms
   * through the pool and 81 ms this way; docs/benchmarks.md, "WARP's per-query overheads"). One
   * buffer for every range of the call (`into`'s, or a new one; each range a view of it starting
   * on a multiple of 8 bytes, as a buffer of its own would, so typed-array views of it stay
   * valid): one allocation, not one per range. null: the copy is gone (forgotten here).
   */
  private readLocalSync(name: string, key: string, size: number, ranges: readonly (readonly [number, number])[], into?: (bytes: number) => Uint8Array): Uint8Array[] | null {
    let fd: number;
    try {
      fd = openSync(path.join(this.dir, name), 'r');
    } catch {
      this.forget(name);
      return null;
    }
    try {
      return rangeReads(key, size, ranges, into ?? ((n) => new Uint8Array(n)), (b, at, length, position) => readSync(fd, b, at, length, position));
    } finally {
      closeSync(fd);
    }
  }

  /**
   * readRanges of ranges summing to more than SYNC_RANGE_READ_BYTES (a re-rank's thousand
   * documents): every range's reads through libuv's thread pool at once, each into a buffer of its
   * own. null: the copy is gone (forgotten here).
   */
  private async readLocal(name: string, key: string, size: number, ranges: readonly (readonly [number, number])[]): Promise<Uint8Array[] | null> {
    let fh: Awaited<ReturnType<typeof open>>;
    try {
      fh = await open(path.join(this.dir, name), 'r');
    } catch {
      this.forget(name);
      return null;
    }
    try {
      return await Promise.all(rangeReads(key, size, ranges, null, async (b, at, length, position) => (await fh.read(b, at, length, position)).bytesRead));
    } finally {
      await fh.close();
    }
  }

  /**
   * Byte ranges [offset, offset + length) of an object without fetching it whole: from its whole
   * local copy when one is there (positioned reads), else each range from the sparse local copy
   * when all its bytes are present, else by one ranged GET (at most `rangeGetsInFlight` at once),
   * the fetched bytes not present yet then appended to the sparse copy in one write (writeSparse).
   * Nothing is verified here: the
   * caller checks each range (a WARP list's CRC-32) and calls `invalidate` on a mismatch, which
   * drops both copies. null when the store sends no ranged GETs or the object is missing; a range
   * outside the object throws a RangeError. With the cache off, every range is a GET.
   */
  async getRanges(key: string, ranges: readonly (readonly [number, number])[]): Promise<Uint8Array[] | null> {
    const getRange = this.store.getRange?.bind(this.store);
    if (!getRange) return null;
    for (const [o, n] of ranges) if (!(Number.isInteger(o) && Number.isInteger(n) && o >= 0 && n >= 1)) throw new RangeError(`${key}: range [${o}, ${o + n}) is not a non-empty range of whole bytes`);
    const fetchOne = async (o: number, n: number): Promise<Uint8Array | null> => {
      const b = await this.gets.run(() => getRange(key, o, n));
      if (b) {
        this.counters.rangeGets++;
        this.counters.rangeBytes += b.byteLength;
      }
      return b;
    };
    if (!this.enabled) {
      const got = await Promise.all(ranges.map(([o, n]) => fetchOne(o, n)));
      return got.some((b) => b === null) ? null : (got as Uint8Array[]);
    }
    await this.init();
    const name = fileName(this.namespace, key);
    if (this.index.has(name)) {
      // A whole copy (read whole earlier): positioned reads of it; gone meanwhile: by ranges below.
      const size = this.index.get(name)!;
      for (const [o, n] of ranges) if (o + n > size) throw new RangeError(`${key}: range [${o}, ${o + n}) is outside the ${size}-byte object`);
      try {
        let whole: Uint8Array[];
        if (rangeBytes(ranges) <= SYNC_RANGE_READ_BYTES) {
          const fd = openSync(path.join(this.dir, name), 'r');
          try {
            whole = ranges.map(([o, n]) => readFullySync(fd, key, new Uint8Array(n), 0, o, n));
          } finally {
            closeSync(fd);
          }
        } else {
          const fh = await open(path.join(this.dir, name), 'r');
          try {
            whole = [];
            for (const [o, n] of ranges) whole.push(await readFully(fh, key, o, n));
          } finally {
            await fh.close();
          }
        }
        this.touch(name);
        this.counters.rangeHits += ranges.length;
        return whole;
      } catch {
        this.forget(name);
      }
    }
    const part = partName(name);
    const out: (Uint8Array | null)[] = ranges.map(() => null);
    const have = this.sparse.get(part);
    const local = have ? ranges.map((r, i) => i).filter((i) => have.covers(ranges[i][0], ranges[i][0] + ranges[i][1])) : [];
    if (have && local.length > 0) {
      try {
        let bytes = 0;
        for (const i of local) bytes += ranges[i][1];
        if (bytes <= SYNC_RANGE_READ_BYTES) {
          // A warm query's lists (~1.4 MB a segment at 1,000,000 documents, ~200 ranges): synchronous
          // positioned reads from the page cache, each piece straight into its range's buffer,
          // instead of a trip through libuv's pool and a copy per piece.
          const fd = openSync(path.join(this.dir, have.file), 'r');
          try {
            for (const i of local) {
              const [o, n] = ranges[i];
              const b = new Uint8Array(n);
              let at = 0;
              for (const [pos, len] of have.pieces(o, o + n)!) {
                readFullySync(fd, key, b, at, pos, len);
                at += len;
              }
              out[i] = b;
            }
          } finally {
            closeSync(fd);
          }
        } else {
          const fh = await open(path.join(this.dir, have.file), 'r');
          try {
            for (const i of local) {
              const [o, n] = ranges[i];
              const b = new Uint8Array(n);
              let at = 0;
              for (const [pos, len] of have.pieces(o, o + n)!) {
                b.set(await readFully(fh, key, pos, len), at);
                at += len;
              }
              out[i] = b;
            }
          } finally {
            await fh.close();
          }
        }
        this.counters.rangeHits += local.length;
        if (this.index.has(part)) this.touch(part);
      } catch (err) {
        if (err instanceof RangeError) throw err;
        this.forget(part); // removed (another process, an eviction): fetched again below
        for (const i of local) out[i] = null;
      }
    }
    const missing = ranges.map((_, i) => i).filter((i) => out[i] === null);
    const fetched = await Promise.all(missing.map((i) => fetchOne(ranges[i][0], ranges[i][1])));
    if (fetched.some((b) => b === null)) return null;
    missing.forEach((i, k) => (out[i] = fetched[k]));
    if (missing.length > 0) await this.writeSparse(part, missing.map((i, k) => [ranges[i][0], fetched[k]!] as const));
    return out as Uint8Array[];
  }

  /**
   * Keeps fetched ranges in the sparse local copy: the bytes not present yet are appended to its
   * file in one positioned write (not one write per range: a cold WARP query's ~840 ranges per
   * segment each written apart took ~0.9 s of a 7.4 s first query at 1,000,000 documents in a CPU
   * profile; docs/segment-format.md) and their file positions recorded. Best effort: a failed
   * write records nothing.
   */
  private async writeSparse(part: string, pieces: readonly (readonly [number, Uint8Array])[]): Promise<void> {
    // A file of this process's own for each copy (pid and a counter in its name): the copies of
    // processes sharing the folder, and a copy dropped while a write to it was in flight, never
    // share a file, so no append lands in another copy's bytes.
    const copy = this.sparse.get(part) ?? new ByteExtents(`${part.slice(0, -'.part'.length)}.${process.pid}.${sparseCopies++}.part`);
    this.sparse.set(part, copy);
    const news: [number, Uint8Array][] = [];
    let total = 0;
    for (const [offset, bytes] of pieces)
      for (const [a, b] of copy.missing(offset, offset + bytes.byteLength)) {
        news.push([a, bytes.subarray(a - offset, b - offset)]);
        total += b - a;
      }
    if (total === 0) return;
    // the file's bytes [at, at + total) are this call's (reserved now: concurrent calls append after them)
    const at = copy.reserve(total);
    try {
      const fh = await open(path.join(this.dir, copy.file), constants.O_RDWR | constants.O_CREAT, 0o644);
      try {
        // one gathered write of the pieces as they are (not copied into one buffer first: fresh
        // memory is the dearer part of a copy here, and the fetched ranges are already in memory)
        let done = (await fh.writev(news.map(([, b]) => b), at)).bytesWritten;
        if (done < total) {
          // a short gathered write: the rest piece by piece
          let skip = done;
          for (const [, b] of news) {
            if (skip >= b.byteLength) {
              skip -= b.byteLength;
              continue;
            }
            for (let w = skip; w < b.byteLength; ) w += (await fh.write(b, w, b.byteLength - w, at + done + (w - skip))).bytesWritten;
            done += b.byteLength - skip;
            skip = 0;
          }
        }
      } finally {
        await fh.close();
      }
    } catch {
      return; // a full or read-only disk: the ranges are answered, not kept
    }
    if (this.sparse.get(part) !== copy) {
      await unlink(path.join(this.dir, copy.file)).catch(() => undefined); // dropped meanwhile (invalidate, eviction): its file goes too
      return;
    }
    let k = at;
    for (const [a, bytes] of news) {
      copy.add(a, a + bytes.byteLength, k);
      k += bytes.byteLength;
    }
    const size = (this.index.get(part) ?? 0) + total;
    this.index.delete(part);
    this.index.set(part, size);
    this.held += total;
    await this.evict();
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
    const part = this.sparse.get(partName(name));
    this.forget(name);
    this.forget(partName(name));
    await unlink(path.join(this.dir, name)).catch(() => undefined);
    if (part) await unlink(path.join(this.dir, part.file)).catch(() => undefined);
  }

  stats(): DiskCacheStats {
    return { ...this.counters, bytes: this.held, maxBytes: this.maxBytes, files: this.index.size };
  }

  private init(): Promise<void> {
    this.ready ??= (async () => {
      await mkdir(this.dir, { recursive: true });
      const all = await readdir(this.dir);
      // Sparse copies of a process that is gone: which of their bytes are present is not known, so
      // they go. A live process's copies (this one's other caches, a sibling sharing the folder)
      // stay: deleting them made the sibling read holes, fail a checksum and fetch again.
      await Promise.all(all.filter((n) => n.endsWith('.part') && !partOfLiveProcess(n)).map((n) => unlink(path.join(this.dir, n)).catch(() => undefined)));
      const names = all.filter((n) => n.endsWith('.obj'));
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
    this.sparse.delete(name);
    const size = this.index.get(name);
    if (size === undefined) return;
    this.index.delete(name);
    this.held -= size;
  }

  private async evict(): Promise<void> {
    while (this.held > this.maxBytes && this.index.size > 0) {
      const oldest = this.index.keys().next().value as string;
      const file = this.sparse.get(oldest)?.file ?? oldest;
      this.forget(oldest);
      this.counters.evictions++;
      await unlink(path.join(this.dir, file)).catch(() => undefined);
    }
  }
}

/** Sparse copies made by this process (every cache): numbers their files apart. */
let sparseCopies = 0;

const align8 = (n: number) => (n + 7) & ~7;

/** A positioned read of a local copy: up to `length` bytes at file `position` into b[at ..]; the bytes read (0 at its end). */
type ReadAt<R> = (b: Uint8Array, at: number, length: number, position: number) => R;

/**
 * readRanges over a local copy of `size` bytes, whatever reads it: every range checked first (a
 * range outside the object throws before any read), then each range's buffer filled by `read`, in
 * the ranges' order: a view of one buffer for the call when `one` gives it (asked for the ranges'
 * total, each range starting on a multiple of 8 bytes), else a buffer of its own. Synchronous
 * reads give the bytes; asynchronous ones their promises (each range's reads in turn, the ranges
 * at once).
 */
function rangeReads(key: string, size: number, ranges: readonly (readonly [number, number])[], one: ((bytes: number) => Uint8Array) | null, read: ReadAt<number>): Uint8Array[];
function rangeReads(key: string, size: number, ranges: readonly (readonly [number, number])[], one: ((bytes: number) => Uint8Array) | null, read: ReadAt<Promise<number>>): Promise<Uint8Array>[];
function rangeReads(key: string, size: number, ranges: readonly (readonly [number, number])[], one: ((bytes: number) => Uint8Array) | null, read: ReadAt<number | Promise<number>>): (Uint8Array | Promise<Uint8Array>)[] {
  let total = 0;
  for (const [offset, length] of ranges) {
    if (!(Number.isInteger(offset) && Number.isInteger(length) && offset >= 0 && length >= 0 && offset + length <= size)) throw new RangeError(`${key}: range [${offset}, ${offset + length}) is outside the ${size}-byte object`);
    total += align8(length);
  }
  const all = one?.(total);
  if (all && (all.length < total || all.byteOffset % 8 !== 0)) throw new RangeError(`readRanges: the buffer given for ${total} bytes has ${all.length} at offset ${all.byteOffset}`);
  let at = 0;
  return ranges.map(([offset, length]) => {
    const b = all ? all.subarray(at, at + length) : new Uint8Array(length);
    at += align8(length);
    return fill(key, size, b, offset, read, 0);
  });
}

/**
 * b[got ..] filled with a local copy's bytes from `position + got` by as many reads as it takes;
 * b. The one loop of the synchronous and the asynchronous reads: a read that answers a promise
 * ends it, and the loop goes on from where it was once the promise settles (so synchronous reads
 * stay synchronous, without a promise or a generator per range).
 */
function fill(key: string, size: number, b: Uint8Array, position: number, read: ReadAt<number | Promise<number>>, got: number): Uint8Array | Promise<Uint8Array> {
  while (got < b.length) {
    const n = read(b, got, b.length - got, position + got);
    if (typeof n !== 'number') return n.then((m) => fill(key, size, b, position, read, got + bytesRead(key, size, position + got, m)));
    got += bytesRead(key, size, position + got, n);
  }
  return b;
}

/** A read's byte count; 0 (the copy ended before the object's size) throws. */
function bytesRead(key: string, size: number, position: number, n: number): number {
  if (n === 0) throw new RangeError(`${key}: local copy ended at ${position} (expected ${size} bytes)`);
  return n;
}

/** File names of recent keys (a SHA-256 per read was measurable on WARP's exact stage: a few reads per search). */
const names = new Map<string, string>();
const NAMES_KEPT = 4096;

function fileName(namespace: string, key: string): string {
  const k = `${namespace}\0${key}`;
  let name = names.get(k);
  if (name === undefined) {
    name = `${createHash('sha256').update(namespace).update('\0').update(key).digest('hex')}.obj`;
    if (names.size >= NAMES_KEPT) names.delete(names.keys().next().value!);
    names.set(k, name);
  }
  return name;
}

function sliceRange(bytes: Uint8Array, key: string, offset: number, length: number): Uint8Array {
  if (!(Number.isInteger(offset) && Number.isInteger(length) && offset >= 0 && length >= 0 && offset + length <= bytes.byteLength)) throw new RangeError(`${key}: range [${offset}, ${offset + length}) is outside the ${bytes.byteLength}-byte object`);
  return bytes.slice(offset, offset + length);
}

const partName = (objName: string) => objName.replace(/\.obj$/, '.part');

/**
 * Whether a sparse copy's file (`<sha256>.<pid>.<n>.part`) belongs to a process running on this
 * host (this one included); a file of the older `<sha256>.part` form, or of a pid that is gone,
 * does not. Pids are per host (per PID namespace): processes sharing a folder across hosts or
 * containers are told apart by this only when they share the namespace.
 */
export function partOfLiveProcess(file: string): boolean {
  const m = /^[0-9a-f]{64}\.(\d+)\.\d+\.part$/.exec(file);
  if (!m) return false;
  const pid = Number(m[1]);
  if (pid === process.pid) return true;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM'; // alive, owned by another user
  }
}

/** The bytes the ranges name. */
function rangeBytes(ranges: readonly (readonly [number, number])[]): number {
  let n = 0;
  for (const [, length] of ranges) n += length;
  return n;
}

/** length bytes at offset of the file read into b[at ..] (synchronous positioned reads); b. */
function readFullySync(fd: number, key: string, b: Uint8Array, at: number, offset: number, length: number): Uint8Array {
  let got = 0;
  while (got < length) {
    const n = readSync(fd, b, at + got, length - got, offset + got);
    if (n === 0) throw new Error(`${key}: local copy ended at ${offset + got}`);
    got += n;
  }
  return b;
}

async function readFully(fh: Awaited<ReturnType<typeof open>>, key: string, offset: number, length: number): Promise<Uint8Array> {
  const b = new Uint8Array(length);
  let got = 0;
  while (got < length) {
    const { bytesRead } = await fh.read(b, got, length - got, offset + got);
    if (bytesRead === 0) throw new Error(`${key}: local sparse copy ended at ${offset + got}`);
    got += bytesRead;
  }
  return b;
}

/**
 * A sparse local copy of an object: which of its bytes are present (disjoint, sorted half-open
 * intervals) and where each lies in the local file, which is appended to (reserve) rather than
 * written at the object's offsets, so a call's fetched ranges are one write. The file
 * (`<sha256>.<pid>.<n>.part`) is this copy's alone.
 */
export class ByteExtents {
  /** @param file the local file's name in the cache folder ('' where there is none, e.g. in a spec) */
  constructor(readonly file = '') {}

  private starts: number[] = [];
  private ends: number[] = [];
  /** file position of each interval's first byte */
  private at: number[] = [];
  /** bytes of the file written or reserved */
  private size = 0;

  /** Reserves `n` bytes at the end of the file; returns where they start. */
  reserve(n: number): number {
    const at = this.size;
    this.size += n;
    return at;
  }

  /** Whether every byte of [from, to) is present (from < to). */
  covers(from: number, to: number): boolean {
    return this.pieces(from, to) !== null;
  }

  /** Where [from, to) lies in the file, as [position, length] pieces in object order; null when a byte of it is missing. */
  pieces(from: number, to: number): [number, number][] | null {
    let k = this.lastStartAtOrBefore(from);
    if (k < 0) return null;
    const out: [number, number][] = [];
    for (let x = from; x < to; k++) {
      if (k >= this.starts.length || this.starts[k] > x || this.ends[k] <= x) return null;
      const end = Math.min(to, this.ends[k]);
      out.push([this.at[k] + (x - this.starts[k]), end - x]);
      x = end;
    }
    return out;
  }

  /** The parts of [from, to) not present, as [start, end) in ascending order. */
  missing(from: number, to: number): [number, number][] {
    const out: [number, number][] = [];
    let k = this.lastStartAtOrBefore(from);
    if (k < 0) k = 0;
    let x = from;
    for (; k < this.starts.length && this.starts[k] < to && x < to; k++) {
      if (this.ends[k] <= x) continue;
      if (this.starts[k] > x) out.push([x, this.starts[k]]);
      x = Math.max(x, this.ends[k]);
    }
    if (x < to) out.push([x, to]);
    return out;
  }

  /**
   * Records that the object's bytes [from, to) lie in the file from position `at` (bytes of it
   * already present keep their recorded place); returns the bytes newly present.
   */
  add(from: number, to: number, at: number): number {
    let added = 0;
    for (const [a, b] of this.missing(from, to)) {
      added += b - a;
      const pos = at + (a - from);
      const k = this.lastStartAtOrBefore(a) + 1; // the interval inserted goes at k
      // joined with a neighbour when contiguous in the object and in the file
      const left = k > 0 && this.ends[k - 1] === a && this.at[k - 1] + (a - this.starts[k - 1]) === pos;
      const right = k < this.starts.length && this.starts[k] === b && this.at[k] === pos + (b - a);
      if (left && right) {
        this.ends[k - 1] = this.ends[k];
        this.starts.splice(k, 1);
        this.ends.splice(k, 1);
        this.at.splice(k, 1);
      } else if (left) this.ends[k - 1] = b;
      else if (right) {
        this.starts[k] = a;
        this.at[k] = pos;
      } else {
        this.starts.splice(k, 0, a);
        this.ends.splice(k, 0, b);
        this.at.splice(k, 0, pos);
      }
    }
    return added;
  }

  /** Object bytes present. */
  get bytes(): number {
    let n = 0;
    for (let i = 0; i < this.starts.length; i++) n += this.ends[i] - this.starts[i];
    return n;
  }

  /** Intervals recorded (after joining contiguous ones). */
  get extents(): number {
    return this.starts.length;
  }

  private lastStartAtOrBefore(x: number): number {
    let lo = 0, hi = this.starts.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.starts[mid] <= x) lo = mid + 1;
      else hi = mid;
    }
    return lo - 1;
  }
}

/**
 * At most `limit` calls in flight; the rest wait in order (a finishing call hands its slot on).
 * The waiting queue is read from a moving head, not shifted: a cold WARP query queues ~10,000
 * ranged GETs at once, and Array.shift of that queue per finished GET was O(n) each (259 ms of a
 * 7.4 s first query in a CPU profile at 1,000,000 documents; docs/segment-format.md).
 */
export class Gate {
  private active = 0;
  private waiting: (() => void)[] = [];
  private head = 0;
  constructor(private readonly limit: number) {}
  async run<T>(fn: () => Promise<T>): Promise<T> {
    if (this.active >= this.limit) await new Promise<void>((r) => this.waiting.push(r));
    else this.active++;
    try {
      return await fn();
    } finally {
      const next = this.head < this.waiting.length ? this.waiting[this.head++] : undefined;
      if (this.head === this.waiting.length) {
        this.waiting = [];
        this.head = 0;
      } else if (this.head >= 1024 && this.head * 2 >= this.waiting.length) {
        this.waiting = this.waiting.slice(this.head);
        this.head = 0;
      }
      if (next) next();
      else this.active--;
    }
  }

  /** Calls waiting for a slot. */
  get queued(): number {
    return this.waiting.length - this.head;
  }
}
