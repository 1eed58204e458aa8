import { assignNearest, normalizeRows } from '../kmeans';
import { makeCorpus, rng, type Corpus } from '../test-utils';
import { decodeWarpResiduals, encodeWarpResiduals, fitWarpCodec, warpResiduals, type WarpBits, type WarpCodec } from './codec';

/** A seeded collection with its IVF (K centroids: distinct token rows, normalised) and fitted codec. */
export interface WarpFixture {
  corpus: Corpus;
  T: number;
  K: number;
  centroids: Float32Array;
  /** T centroid of each token row */
  assignment: Uint32Array;
  codec: WarpCodec;
  /** T x dims: centroid + decoded residual of each token row (what the packed codes stand for) */
  reconstructed: Float32Array;
  tokenOffsets: Uint32Array;
}

export function warpFixture(seed: number, opts: { documents: number; dims: number; K: number; bits: WarpBits; maxLen?: number }): WarpFixture {
  const corpus = makeCorpus(seed, { documents: opts.documents, dims: opts.dims, maxLen: opts.maxLen ?? 12, clusters: Math.max(2, opts.K >> 1) });
  const d = opts.dims;
  const T = corpus.tokenIds.length;
  const r = rng(seed + 1);
  const picks = new Set<number>();
  while (picks.size < Math.min(opts.K, T)) picks.add(Math.floor(r() * T));
  const K = picks.size;
  const raw = new Float32Array(K * d);
  [...picks].forEach((t, c) => raw.set(corpus.vectors.subarray(t * d, (t + 1) * d), c * d));
  const centroids = normalizeRows(raw, K, d);
  const assignment = assignNearest(corpus.vectors, T, centroids, K, d).index;
  const residuals = warpResiduals(corpus.vectors, T, d, centroids, assignment);
  const codec = fitWarpCodec(residuals, T, d, opts.bits);
  const decoded = decodeWarpResiduals(codec, encodeWarpResiduals(codec, residuals, T), T);
  const reconstructed = new Float32Array(T * d);
  for (let t = 0; t < T; t++) for (let j = 0; j < d; j++) reconstructed[t * d + j] = centroids[assignment[t] * d + j] + decoded[t * d + j];
  const tokenOffsets = new Uint32Array(corpus.lengths.length + 1);
  corpus.lengths.forEach((m, i) => (tokenOffsets[i + 1] = tokenOffsets[i] + m));
  return { corpus, T, K, centroids, assignment, codec, reconstructed, tokenOffsets };
}

/** Documents [a, b) of a fixture as one segment's inputs (local token offsets, rows, assignment). */
export function fixtureSlice(f: WarpFixture, a: number, b: number): { vectors: Float32Array; tokenOffsets: Uint32Array; assignment: Uint32Array } {
  const d = f.corpus.dims;
  const lo = f.tokenOffsets[a], hi = f.tokenOffsets[b];
  const tokenOffsets = new Uint32Array(b - a + 1);
  for (let i = a; i <= b; i++) tokenOffsets[i - a] = f.tokenOffsets[i] - lo;
  return { vectors: f.corpus.vectors.slice(lo * d, hi * d), tokenOffsets, assignment: f.assignment.slice(lo, hi) };
}

/** n random query rows, unit. */
export function randomQuery(seed: number, n: number, d: number): Float32Array {
  const r = rng(seed);
  const q = new Float32Array(n * d);
  for (let i = 0; i < q.length; i++) q[i] = r() * 2 - 1;
  return normalizeRows(q, n, d);
}
