import { CodecSettingsSchema, type CodecSettings } from '@lateral/shared';
import { makeArtifact, type ArtifactFields, type CodecArtifact } from './artifact';
import { columnMeans, fitLinear, fitPca, kmeans, nearestRow } from './linalg';
import { LinearStage } from './linear-stage';
import { SplitMix64 } from './prng';

export interface FitCodecOptions {
  /** Collection seed: k-means++ seeding and the default segment seed (EDEN signs). */
  seed: bigint | number;
  /** sideInfo: n x staticDims static embeddings of the sample's tokens. */
  staticEmbeddings?: Float32Array;
  staticDims?: number;
  /** residual: number of k-means centroids (default min(256, 2^floor(log2(16 sqrt n))), PLAID's rule capped). */
  centroids?: number;
  /** residual: Lloyd iterations after k-means++ (default 8). */
  kmeansIterations?: number;
}

export const DEFAULT_BITS = { eden: 6, residual: 2 } as const;

/**
 * Fits a codec on a sample of raw token vectors. Shape: sample n x dims (+ static n x s).
 * Steps: side-information predictor by ridge least squares (sideInfo), mean of what remains,
 * PCA to settings.dims (when smaller than dims), then for `residual` k-means centroids and
 * residual buckets. fp32 / fp16 / int8 need no fitting and get an artifact with no arrays.
 */
export function fitCodec(settings: CodecSettings, sample: Float32Array, dims: number, opts: FitCodecOptions): CodecArtifact {
  const s = CodecSettingsSchema.parse(settings);
  if (!Number.isInteger(dims) || dims < 1 || sample.length % dims !== 0) throw new RangeError(`sample of ${sample.length} values is not n x ${dims}`);
  const n = sample.length / dims;
  const seed = BigInt.asUintN(64, BigInt(opts.seed));
  const fields: { -readonly [K in keyof ArtifactFields]: ArtifactFields[K] } = {
    settings: s,
    inputDims: dims,
    codedDims: dims,
    seed,
    mean: null,
    components: null,
    variances: null,
    sideDims: 0,
    predictor: null,
    centroids: null,
    cutoffs: null,
    weights: null,
  };
  if (s.kind !== 'eden' && s.kind !== 'residual') return makeArtifact(fields);
  if (n < 2) throw new RangeError(`fitting needs at least 2 sample vectors, got ${n}`);

  let base: Float32Array = sample;
  if (s.sideInfo) {
    const sd = opts.staticDims ?? 0;
    const u = opts.staticEmbeddings;
    if (!u || sd < 1 || u.length !== n * sd) throw new RangeError(`sideInfo needs opts.staticEmbeddings of n x staticDims = ${n} x ${sd} values`);
    const w = fitLinear(u, sd, sample, dims, n);
    fields.sideDims = sd;
    fields.predictor = Float32Array.from(w);
    // What the codes must carry: the part the static embedding does not predict.
    base = Float32Array.from(new LinearStage({ ...fields, version: 0, checksum: 0 }).forward(sample, dims, u));
  }
  if (s.dims !== undefined && s.dims < dims) {
    const pca = fitPca(base, n, dims, s.dims);
    fields.mean = Float32Array.from(pca.mean);
    fields.components = Float32Array.from(pca.components);
    fields.variances = Float32Array.from(pca.variances);
    fields.codedDims = s.dims;
  } else {
    fields.mean = Float32Array.from(columnMeans(base, n, dims));
  }

  if (s.kind === 'residual') {
    const bits = s.bits ?? DEFAULT_BITS.residual;
    const stage = new LinearStage({ ...fields, version: 0, checksum: 0 });
    const z = stage.forward(sample, dims, opts.staticEmbeddings);
    const c = fields.codedDims;
    const k = Math.max(1, Math.min(opts.centroids ?? Math.min(256, 2 ** Math.floor(Math.log2(16 * Math.sqrt(n)))), n));
    // k-means on at most 64 k points (a seeded subsample), as PLAID fits on a sample too.
    const fitN = Math.min(n, 64 * k);
    let fitZ = z;
    if (fitN < n) {
      const g = new SplitMix64(seed ^ 0x5a5a5a5an);
      const idx = Array.from({ length: n }, (_, i) => i);
      for (let i = 0; i < fitN; i++) {
        const j = i + Math.floor(g.nextDouble() * (n - i));
        [idx[i], idx[j]] = [idx[j], idx[i]];
      }
      fitZ = new Float64Array(fitN * c);
      for (let i = 0; i < fitN; i++) fitZ.set(z.subarray(idx[i] * c, (idx[i] + 1) * c), i * c);
    }
    const cent = kmeans(fitZ, fitN, c, k, seed, opts.kmeansIterations ?? 8);
    const kk = cent.length / c;
    const residuals = new Float64Array(n * c);
    for (let t = 0; t < n; t++) {
      const id = nearestRow(z, t, cent, kk, c);
      for (let j = 0; j < c; j++) residuals[t * c + j] = z[t * c + j] - cent[id * c + j];
    }
    residuals.sort();
    const levels = 1 << bits;
    const cutoffs = new Float32Array(levels - 1);
    for (let b = 1; b < levels; b++) cutoffs[b - 1] = residuals[Math.min(residuals.length - 1, Math.floor((b / levels) * residuals.length))];
    // Bucket representative = mean of the residual values falling in it (one Lloyd step).
    const weights = new Float32Array(levels);
    let start = 0;
    for (let b = 0; b < levels; b++) {
      let end = start;
      while (end < residuals.length && (b === levels - 1 || residuals[end] <= cutoffs[b])) end++;
      let sum = 0;
      for (let i = start; i < end; i++) sum += residuals[i];
      weights[b] = end > start ? sum / (end - start) : b === 0 ? cutoffs[0] : cutoffs[b - 1];
      start = end;
    }
    fields.centroids = Float32Array.from(cent);
    fields.cutoffs = cutoffs;
    fields.weights = weights;
  }
  return makeArtifact(fields);
}
