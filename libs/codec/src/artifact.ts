import { CodecSettingsSchema, type CodecSettings } from '@lateral/shared';
import { crc32c } from './crc32c';
import { aesiDecoderLength, aesiEncoderLength } from './aesi';

/**
 * A fitted codec, fitted once per collection and codec version (`fitCodec`) and stored beside
 * the segments (`serializeArtifact`). Segments record its version and checksum and refuse to
 * decode with a different one.
 *
 * The linear stage maps a raw vector x (inputDims) with static embedding u (sideDims) to the
 * coded vector z (codedDims):  z = P (x - pred(u) - mean),  pred(u) = W^T [u; 1];
 * and back:  x^ = P^T z^ + mean + pred(u).  Missing parts are identities / zeros.
 */
export interface CodecArtifact {
  /** Artifact format version. */
  readonly version: number;
  /** CRC32C of the serialised payload. */
  readonly checksum: number;
  readonly settings: CodecSettings;
  /** Dims of the raw vectors the codec was fitted on. */
  readonly inputDims: number;
  /** Dims actually coded (PCA output, or inputDims). */
  readonly codedDims: number;
  /** Seed used for fitting; the default segment seed. */
  readonly seed: bigint;
  /** inputDims. */
  readonly mean: Float32Array | null;
  /** codedDims x inputDims, orthonormal rows (PCA), or null = identity. */
  readonly components: Float32Array | null;
  /** Variance captured by each component: codedDims. */
  readonly variances: Float32Array | null;
  /** Width of the static embedding (sideInfo), 0 without. */
  readonly sideDims: number;
  /** (sideDims + 1) x inputDims least-squares predictor (last row = intercept). */
  readonly predictor: Float32Array | null;
  /** residual codec: K x codedDims k-means centroids. */
  readonly centroids: Float32Array | null;
  /** residual codec: 2^B - 1 ascending bucket cutoffs of the residual values. */
  readonly cutoffs: Float32Array | null;
  /** residual codec: 2^B bucket representatives. */
  readonly weights: Float32Array | null;
  /**
   * AESI (SDR's autoencoder with side information, ./aesi.ts): its intermediate width, absent or 0
   * without. With it the linear stage is replaced by the autoencoder: z = encoder([x; u]) with
   * codedDims = the code size, x^ = decoder([z^; u]); mean, components and predictor are null.
   */
  readonly aesiWidth?: number;
  /** AESI encoder, packed W1e | b1e | W2e | b2e (input-major, see ./aesi.ts). */
  readonly aesiEncoder?: Float32Array | null;
  /** AESI decoder, packed W1d | b1d | W2d | b2d. */
  readonly aesiDecoder?: Float32Array | null;
}

export const ARTIFACT_VERSION = 1;
const MAGIC = 'LCOD';
const ARRAYS = ['mean', 'components', 'variances', 'predictor', 'centroids', 'cutoffs', 'weights'] as const;
type ArrayName = (typeof ARRAYS)[number];
/** Written after ARRAYS, and named in the header, only by AESI artifacts (so other artifacts' bytes do not change). */
const AESI_ARRAYS = ['aesiEncoder', 'aesiDecoder'] as const;
type AesiArrayName = (typeof AESI_ARRAYS)[number];

/** The arrays an artifact carries, in byte order. */
function arrayNames(fields: ArtifactFields): readonly (ArrayName | AesiArrayName)[] {
  return (fields.aesiWidth ?? 0) > 0 ? [...ARRAYS, ...AESI_ARRAYS] : ARRAYS;
}

export type ArtifactFields = Omit<CodecArtifact, 'version' | 'checksum'>;

export class CodecArtifactCorruptError extends Error {
  constructor(detail: string) {
    super(`codec artifact is corrupt: ${detail}`);
    this.name = 'CodecArtifactCorruptError';
  }
}

/**
 * Bytes: "LCOD" | u16 version | u16 0 | u32 jsonLength | JSON header | f32 arrays in the order
 * of ARRAYS (lengths in the JSON) | u32 CRC32C of everything before it (= `checksum`).
 */
function encode(fields: ArtifactFields): Uint8Array {
  const names = arrayNames(fields);
  const header = {
    settings: fields.settings,
    inputDims: fields.inputDims,
    codedDims: fields.codedDims,
    seed: fields.seed.toString(),
    sideDims: fields.sideDims,
    ...((fields.aesiWidth ?? 0) > 0 ? { aesiWidth: fields.aesiWidth } : {}),
    arrays: Object.fromEntries(names.map((k) => [k, (fields[k] ?? null) === null ? null : fields[k]!.length])),
  };
  const json = new TextEncoder().encode(JSON.stringify(header));
  let floats = 0;
  for (const k of names) floats += fields[k]?.length ?? 0;
  const out = new Uint8Array(12 + json.length + 4 * floats + 4);
  const view = new DataView(out.buffer);
  out.set(new TextEncoder().encode(MAGIC), 0);
  view.setUint16(4, ARTIFACT_VERSION, true);
  view.setUint32(8, json.length, true);
  out.set(json, 12);
  let off = 12 + json.length;
  for (const k of names) {
    const a = fields[k];
    if (!a) continue;
    for (let i = 0; i < a.length; i++) view.setFloat32(off + 4 * i, a[i], true);
    off += 4 * a.length;
  }
  view.setUint32(off, crc32c(out.subarray(0, off)), true);
  return out;
}

/** Freezes fitted fields into an artifact, computing its checksum. */
export function makeArtifact(fields: ArtifactFields): CodecArtifact {
  const bytes = encode(fields);
  const checksum = new DataView(bytes.buffer).getUint32(bytes.length - 4, true);
  return { ...fields, version: ARTIFACT_VERSION, checksum };
}

export function serializeArtifact(a: CodecArtifact): Uint8Array {
  return encode(a);
}

/** Parses and validates (magic, version, checksum, shapes) an artifact; throws CodecArtifactCorruptError. */
export function deserializeArtifact(bytes: Uint8Array): CodecArtifact {
  if (bytes.length < 16) throw new CodecArtifactCorruptError(`${bytes.length} bytes is too short`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (String.fromCharCode(...bytes.subarray(0, 4)) !== MAGIC) throw new CodecArtifactCorruptError('bad magic');
  const crc = view.getUint32(bytes.length - 4, true);
  if (crc32c(bytes.subarray(0, bytes.length - 4)) !== crc) throw new CodecArtifactCorruptError('checksum mismatch');
  const version = view.getUint16(4, true);
  if (version !== ARTIFACT_VERSION) throw new CodecArtifactCorruptError(`unsupported version ${version}`);
  const jsonLength = view.getUint32(8, true);
  if (12 + jsonLength + 4 > bytes.length) throw new CodecArtifactCorruptError('header length out of range');
  let header: { settings: unknown; inputDims: number; codedDims: number; seed: string; sideDims: number; aesiWidth?: number; arrays: Record<ArrayName | AesiArrayName, number | null> };
  try {
    header = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes.subarray(12, 12 + jsonLength)));
  } catch (e) {
    throw new CodecArtifactCorruptError(`header is not JSON: ${(e as Error).message}`);
  }
  const settings = CodecSettingsSchema.safeParse(header.settings);
  if (!settings.success) throw new CodecArtifactCorruptError(`bad settings: ${settings.error.message}`);
  let off = 12 + jsonLength;
  const aesiWidth = header.aesiWidth ?? 0;
  if (!Number.isInteger(aesiWidth) || aesiWidth < 0) throw new CodecArtifactCorruptError(`bad aesiWidth ${String(aesiWidth)}`);
  const arrays = {} as Record<ArrayName | AesiArrayName, Float32Array | null>;
  for (const k of aesiWidth > 0 ? [...ARRAYS, ...AESI_ARRAYS] : ARRAYS) {
    const len = header.arrays?.[k];
    if (len === null || len === undefined) {
      arrays[k] = null;
      continue;
    }
    if (!Number.isInteger(len) || len < 0 || off + 4 * len > bytes.length - 4) throw new CodecArtifactCorruptError(`array ${k} out of range`);
    const a = new Float32Array(len);
    for (let i = 0; i < len; i++) a[i] = view.getFloat32(off + 4 * i, true);
    arrays[k] = a;
    off += 4 * len;
  }
  if (off !== bytes.length - 4) throw new CodecArtifactCorruptError('trailing bytes');
  if (aesiWidth > 0) {
    const shape = { inputDims: header.inputDims, sideDims: header.sideDims, codeDims: header.codedDims, width: aesiWidth };
    if (arrays.aesiEncoder?.length !== aesiEncoderLength(shape) || arrays.aesiDecoder?.length !== aesiDecoderLength(shape))
      throw new CodecArtifactCorruptError(`AESI weights do not match ${JSON.stringify(shape)}`);
  }
  const { aesiEncoder, aesiDecoder, ...linear } = arrays;
  return {
    version,
    checksum: crc,
    settings: settings.data,
    inputDims: header.inputDims,
    codedDims: header.codedDims,
    seed: BigInt(header.seed),
    sideDims: header.sideDims,
    ...linear,
    ...(aesiWidth > 0 ? { aesiWidth, aesiEncoder, aesiDecoder } : {}),
  };
}
