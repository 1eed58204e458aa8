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

  constructor(private readonly store: Pick<ObjectStore, 'get' | 'putIfAbsent'>) {}

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
  }
}
