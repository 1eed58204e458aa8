import { crc32c } from '@lateral/codec';
import { s3Keys } from '@lateral/shared';
import type { ObjectStore } from './object-store';

export interface IvfCentroids {
  k: number;
  dims: number;
  /** k x dims, row-major, L2-normalised. */
  centroids: Float32Array;
}

const MAGIC = 'LIVF';
const HEADER = 16; // magic, version, k, dims

/** `LIVF` u32 version=1, u32 k, u32 dims, k x dims f32 (little-endian), u32 CRC32C of everything before it. */
export function serializeIvfCentroids(c: IvfCentroids): Uint8Array {
  const out = new Uint8Array(HEADER + c.centroids.byteLength + 4);
  const view = new DataView(out.buffer);
  for (let i = 0; i < 4; i++) out[i] = MAGIC.charCodeAt(i);
  view.setUint32(4, 1, true);
  view.setUint32(8, c.k, true);
  view.setUint32(12, c.dims, true);
  out.set(new Uint8Array(c.centroids.buffer, c.centroids.byteOffset, c.centroids.byteLength), HEADER);
  view.setUint32(out.length - 4, crc32c(out.subarray(0, out.length - 4)), true);
  return out;
}

export function deserializeIvfCentroids(bytes: Uint8Array, name: string): IvfCentroids {
  const fail = (why: string): never => {
    throw new Error(`IVF centroids ${name}: ${why}`);
  };
  if (bytes.length < HEADER + 4) fail(`${bytes.length} bytes is too short`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (String.fromCharCode(...bytes.subarray(0, 4)) !== MAGIC) fail('bad magic');
  if (view.getUint32(4, true) !== 1) fail(`unsupported version ${view.getUint32(4, true)}`);
  const k = view.getUint32(8, true);
  const dims = view.getUint32(12, true);
  if (bytes.length !== HEADER + k * dims * 4 + 4) fail(`${bytes.length} bytes for ${k} x ${dims} centroids (truncated?)`);
  if (crc32c(bytes.subarray(0, bytes.length - 4)) !== view.getUint32(bytes.length - 4, true)) fail('checksum mismatch');
  const centroids = new Float32Array(k * dims);
  new Uint8Array(centroids.buffer).set(bytes.subarray(HEADER, HEADER + k * dims * 4));
  return { k, dims, centroids };
}

/**
 * The token IVF centroids of a collection at one codec version (`ivf/v{n}.centroids`), fitted
 * once by the first index job of that version and written conditionally: the first object
 * written is the one every segment index of the version is built against. Immutable, so cached.
 */
export class IvfCentroidRepository {
  private readonly cache = new Map<string, Promise<IvfCentroids | null>>();
  /** Centroid counts read from headers alone (count()). */
  private readonly counts = new Map<string, number>();

  constructor(private readonly store: Pick<ObjectStore, 'get' | 'getRange' | 'putIfAbsent'>) {}

  /**
   * How many centroids the version and epoch has (null: none written yet), for a caller that needs
   * only that (is a refit due?): the centroids when this process holds them, else their object's
   * 16-byte header by a ranged read, so asking for every collection (the reconciler's passes)
   * neither fetches nor keeps k x dims floats of each. Kept once found: the object is immutable.
   */
  async count(tenantId: string, collectionId: string, v: number, epoch = 0): Promise<number | null> {
    const key = s3Keys.ivfCentroids(tenantId, collectionId, v, epoch);
    const known = this.counts.get(key);
    if (known !== undefined) return known;
    const held = this.cache.get(key);
    const k = held ? ((await held)?.k ?? null) : headerCount(await this.store.getRange(key, 0, HEADER), key);
    if (k !== null) this.counts.set(key, k);
    return k;
  }

  get(tenantId: string, collectionId: string, v: number, epoch = 0): Promise<IvfCentroids | null> {
    const key = s3Keys.ivfCentroids(tenantId, collectionId, v, epoch);
    let p = this.cache.get(key);
    if (!p) {
      p = this.store.get(key).then((b) => (b ? deserializeIvfCentroids(b, key) : null));
      // only a found object is final; a missing one may be written later
      p.then((x) => x === null && this.cache.delete(key)).catch(() => this.cache.delete(key));
      this.cache.set(key, p);
    }
    return p;
  }

  /** The version's centroids, fitted by `fit()` and written when none exist yet. */
  async ensure(tenantId: string, collectionId: string, v: number, fit: () => IvfCentroids | Promise<IvfCentroids>, epoch = 0): Promise<IvfCentroids> {
    const existing = await this.get(tenantId, collectionId, v, epoch);
    if (existing) return existing;
    const key = s3Keys.ivfCentroids(tenantId, collectionId, v, epoch);
    await this.store.putIfAbsent(key, serializeIvfCentroids(await fit()));
    this.cache.delete(key);
    const stored = await this.get(tenantId, collectionId, v, epoch);
    if (!stored) throw new Error(`IVF centroids ${key} were written but cannot be read back`);
    return stored;
  }

  /** Forgets cached centroids of a collection (after a delete). */
  forget(tenantId: string, collectionId: string): void {
    const prefix = s3Keys.collectionPrefix(tenantId, collectionId);
    for (const k of [...this.cache.keys()]) if (k.startsWith(prefix)) this.cache.delete(k);
    for (const k of [...this.counts.keys()]) if (k.startsWith(prefix)) this.counts.delete(k);
  }
}

/** k from a centroids object's header (magic and version checked), or null when there is no object. */
function headerCount(header: Uint8Array | null, name: string): number | null {
  if (!header) return null;
  if (header.length < HEADER || String.fromCharCode(...header.subarray(0, 4)) !== MAGIC) throw new Error(`IVF centroids ${name}: bad header`);
  const view = new DataView(header.buffer, header.byteOffset, header.byteLength);
  if (view.getUint32(4, true) !== 1) throw new Error(`IVF centroids ${name}: unsupported version ${view.getUint32(4, true)}`);
  return view.getUint32(8, true);
}
