import { crc32c } from '@lateral/codec';
import { s3Keys } from '@lateral/shared';
import type { WarpCodec } from '@lateral/search';
import type { ObjectStore } from './object-store';

const MAGIC = 'LWCD';
const HEADER = 16; // magic, version, dims, bits

/**
 * `LWCD` u32 version=1, u32 dims, u32 bits, dims x (2^bits - 1) f32 cutoffs, dims x 2^bits f32
 * weights (little-endian), u32 CRC32C of everything before it.
 */
export function serializeWarpCodec(c: WarpCodec): Uint8Array {
  const B = 1 << c.bits;
  const out = new Uint8Array(HEADER + 4 * c.dims * (2 * B - 1) + 4);
  const view = new DataView(out.buffer);
  for (let i = 0; i < 4; i++) out[i] = MAGIC.charCodeAt(i);
  view.setUint32(4, 1, true);
  view.setUint32(8, c.dims, true);
  view.setUint32(12, c.bits, true);
  let at = HEADER;
  for (const x of [c.cutoffs, c.weights]) for (let i = 0; i < x.length; i++, at += 4) view.setFloat32(at, x[i], true);
  view.setUint32(out.length - 4, crc32c(out.subarray(0, out.length - 4)), true);
  return out;
}

export function deserializeWarpCodec(bytes: Uint8Array, name: string): WarpCodec {
  const fail = (why: string): never => {
    throw new Error(`WARP codec ${name}: ${why}`);
  };
  if (bytes.length < HEADER + 4) fail(`${bytes.length} bytes is too short`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (String.fromCharCode(...bytes.subarray(0, 4)) !== MAGIC) fail('bad magic');
  if (view.getUint32(4, true) !== 1) fail(`unsupported version ${view.getUint32(4, true)}`);
  const dims = view.getUint32(8, true);
  const bits = view.getUint32(12, true);
  if (bits !== 2 && bits !== 4) fail(`bits ${bits} is not 2 or 4`);
  const B = 1 << bits;
  if (bytes.length !== HEADER + 4 * dims * (2 * B - 1) + 4) fail(`${bytes.length} bytes for ${dims} dims at ${bits} bits (truncated?)`);
  if (crc32c(bytes.subarray(0, bytes.length - 4)) !== view.getUint32(bytes.length - 4, true)) fail('checksum mismatch');
  const cutoffs = new Float32Array(dims * (B - 1));
  const weights = new Float32Array(dims * B);
  let at = HEADER;
  for (const x of [cutoffs, weights]) for (let i = 0; i < x.length; i++, at += 4) x[i] = view.getFloat32(at, true);
  return { dims, bits: bits as 2 | 4, cutoffs, weights };
}

/**
 * WARP's residual codec of a collection at one codec version (`ivf/v{n}.warp-codec`, beside the
 * IVF centroids it was fitted against), fitted once by the first index job of that version of a
 * collection with `search.layout` 'warp' and written conditionally: the first object written is
 * the one every search layout of the version is built with. Immutable, so cached.
 */
export class WarpCodecRepository {
  private readonly cache = new Map<string, Promise<WarpCodec | null>>();

  constructor(private readonly store: Pick<ObjectStore, 'get' | 'putIfAbsent'>) {}

  get(tenantId: string, collectionId: string, v: number, epoch = 0): Promise<WarpCodec | null> {
    const key = s3Keys.warpCodec(tenantId, collectionId, v, epoch);
    let p = this.cache.get(key);
    if (!p) {
      p = this.store.get(key).then((b) => (b ? deserializeWarpCodec(b, key) : null));
      // only a found object is final; a missing one may be written later
      p.then((x) => x === null && this.cache.delete(key)).catch(() => this.cache.delete(key));
      this.cache.set(key, p);
    }
    return p;
  }

  /** The version's codec, fitted by `fit()` and written when none exists yet. */
  async ensure(tenantId: string, collectionId: string, v: number, fit: () => WarpCodec | Promise<WarpCodec>, epoch = 0): Promise<WarpCodec> {
    const existing = await this.get(tenantId, collectionId, v, epoch);
    if (existing) return existing;
    const key = s3Keys.warpCodec(tenantId, collectionId, v, epoch);
    await this.store.putIfAbsent(key, serializeWarpCodec(await fit()));
    this.cache.delete(key);
    const stored = await this.get(tenantId, collectionId, v, epoch);
    if (!stored) throw new Error(`WARP codec ${key} was written but cannot be read back`);
    return stored;
  }

  /** Forgets cached codecs of a collection (after a delete). */
  forget(tenantId: string, collectionId: string): void {
    const prefix = s3Keys.collectionPrefix(tenantId, collectionId);
    for (const k of [...this.cache.keys()]) if (k.startsWith(prefix)) this.cache.delete(k);
  }
}
