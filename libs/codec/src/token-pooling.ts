/**
 * Token pooling at ingest (`codec.poolFactor`, as next-plaid's `pool_factor`): the m token
 * vectors of one document are clustered hierarchically into k = ceil(m / poolFactor) clusters and
 * each cluster is replaced by its mean, so a document stores k vectors instead of m.
 *
 * Linkage: Ward. Replacing a cluster by its mean loses exactly its within-cluster sum of squares,
 * and Ward merges, at every step, the two clusters whose union raises that loss the least, so the
 * cut at k clusters is a greedy minimiser of the very error pooling introduces. For unit-norm rows
 * (the models' vectors, `normalize: true`) ||x - y||^2 = 2 - 2 cos(x, y), so Ward works on the
 * cosine geometry MaxSim scores with; average linkage on cosine distance would also fit, but it
 * ignores cluster sizes and happily builds one large cluster whose mean is far from its members.
 *
 * Algorithm: nearest-neighbour chain over a full m x m matrix of Ward merge costs with
 * Lance-Williams updates (Ward is reducible, so the chain finds the same hierarchy as the greedy
 * algorithm), O(m^2 d) for the Gram matrix, O(m^2) for the chain, 8 m^2 bytes. The merges are
 * then sorted by cost (stable) and the m - k cheapest applied with a union-find. Documents longer
 * than POOL_WINDOW tokens are pooled in consecutive windows of about POOL_WINDOW tokens (a
 * multiple of poolFactor, so the total is still ceil(m / poolFactor)), which bounds memory at
 * 8 POOL_WINDOW^2 bytes.
 *
 * Deterministic: a pure function of the rows and their order (ties go to the chain's previous
 * element, else the lowest index). Output clusters are ordered by their first token.
 */

import { POOL_FACTOR_MAX } from '@lateral/shared';

/** Largest poolFactor a collection may ask for (`codec.poolFactor`; defined with the settings schema). */
export { POOL_FACTOR_MAX };

/** Tokens clustered together at most; longer documents are pooled window by window. */
export const POOL_WINDOW = 1024;

export interface PoolTokensOptions {
  /**
   * Re-normalise each mean to unit length: true, false, or 'auto' (default): when every input
   * row has unit norm (within 1e-2: fp16 raw vectors of unit rows are off by about 5e-4), as the models' vectors do, so pooled rows live on the same
   * sphere as queries are scored against (the mean of unit vectors is shorter than 1 and would
   * lose every MaxSim max to an unpooled token of equal direction).
   */
  normalize?: boolean | 'auto';
}

export interface PooledTokens {
  /** k x d means (re-normalised or not, see `normalized`). */
  vectors: Float32Array;
  /** k: ceil(m / poolFactor). */
  count: number;
  /** For each input token, its cluster (0..k-1). */
  assignment: Int32Array;
  /** For each cluster, the member closest to the mean (largest dot product; ties: first member). */
  representative: Int32Array;
  normalized: boolean;
}

/** Clusters of one document: k = ceil(m / poolFactor) (m = 0 gives 0). */
export function pooledCount(m: number, poolFactor: number): number {
  return Math.ceil(m / poolFactor);
}

function checkFactor(poolFactor: number): void {
  if (!Number.isInteger(poolFactor) || poolFactor < 1 || poolFactor > POOL_FACTOR_MAX) {
    throw new RangeError(`poolFactor must be an integer in 1..${POOL_FACTOR_MAX}, got ${poolFactor}`);
  }
}

/**
 * Ward clustering of `m` rows (x, m x d) into `k` clusters: the cluster of
 * each row, clusters numbered by their first row.
 */
export function wardClusters(x: Float32Array, m: number, d: number, k: number): Int32Array {
  if (k < 1 || k > m) {
    if (m === 0 && k === 0) return new Int32Array(0);
    throw new RangeError(`wardClusters: k = ${k} must be in 1..m = ${m}`);
  }
  const labels = new Int32Array(m);
  if (k === m) {
    for (let i = 0; i < m; i++) labels[i] = i;
    return labels;
  }
  // Ward merge cost of singletons i, j: 1/2 ||x_i - x_j||^2 (n_i n_j / (n_i + n_j) with n = 1).
  const sq = new Float64Array(m);
  for (let i = 0; i < m; i++) {
    let s = 0;
    for (let t = 0; t < d; t++) s += x[i * d + t] * x[i * d + t];
    sq[i] = s;
  }
  const D = new Float64Array(m * m);
  for (let i = 0; i < m; i++) {
    const io = i * d;
    for (let j = i + 1; j < m; j++) {
      const jo = j * d;
      let dot = 0;
      for (let t = 0; t < d; t++) dot += x[io + t] * x[jo + t];
      const c = Math.max(0, 0.5 * (sq[i] + sq[j] - 2 * dot));
      D[i * m + j] = c;
      D[j * m + i] = c;
    }
  }
  const size = new Float64Array(m).fill(1);
  const active = new Uint8Array(m).fill(1);
  const chain = new Int32Array(m);
  let top = 0;
  // merges: (a, b, cost) in the order the chain finds them; the merged cluster keeps slot min(a, b),
  // which always holds that original row, so (a, b) name rows for the union-find below.
  const ma = new Int32Array(m - 1);
  const mb = new Int32Array(m - 1);
  const mc = new Float64Array(m - 1);
  let firstActive = 0;
  for (let step = 0; step < m - 1; step++) {
    if (top === 0) {
      while (!active[firstActive]) firstActive++;
      chain[top++] = firstActive;
    }
    let a: number, b: number;
    for (;;) {
      a = chain[top - 1];
      const prev = top > 1 ? chain[top - 2] : -1;
      let best = prev >= 0 ? D[a * m + prev] : Infinity;
      b = prev;
      const row = a * m;
      for (let j = 0; j < m; j++) {
        if (j === a || !active[j]) continue;
        if (D[row + j] < best) {
          best = D[row + j];
          b = j;
        }
      }
      if (b === prev) break;
      chain[top++] = b;
    }
    top -= 2;
    const keep = Math.min(a, b);
    const gone = Math.max(a, b);
    const cost = D[a * m + b];
    ma[step] = keep;
    mb[step] = gone;
    mc[step] = cost;
    const na = size[keep];
    const nb = size[gone];
    active[gone] = 0;
    for (let j = 0; j < m; j++) {
      if (!active[j] || j === keep) continue;
      const nj = size[j];
      // Lance-Williams for Ward (valid for the merge cost, a constant multiple of the squared form)
      const v = ((na + nj) * D[keep * m + j] + (nb + nj) * D[gone * m + j] - nj * cost) / (na + nb + nj);
      D[keep * m + j] = v;
      D[j * m + keep] = v;
    }
    size[keep] = na + nb;
  }
  // The m - k cheapest merges (stable by discovery order on equal costs): Ward costs are monotone,
  // so they close over their own sub-merges and give the dendrogram's cut at k clusters.
  const order = Array.from({ length: m - 1 }, (_, i) => i).sort((p, q) => mc[p] - mc[q] || p - q);
  const parent = new Int32Array(m);
  for (let i = 0; i < m; i++) parent[i] = i;
  const find = (i: number): number => {
    while (parent[i] !== i) {
      parent[i] = parent[parent[i]];
      i = parent[i];
    }
    return i;
  };
  for (let s = 0; s < m - k; s++) {
    const ra = find(ma[order[s]]);
    const rb = find(mb[order[s]]);
    if (ra < rb) parent[rb] = ra;
    else parent[ra] = rb;
  }
  // The root of a set is its smallest row (unions keep the smaller root); number clusters by it.
  const id = new Int32Array(m).fill(-1);
  let next = 0;
  for (let i = 0; i < m; i++) {
    const r = find(i);
    if (id[r] < 0) id[r] = next++;
    labels[i] = id[r];
  }
  return labels;
}

/**
 * Pools one document's m token vectors (x: m x d) into ceil(m / poolFactor) cluster means.
 * poolFactor 1 returns the input rows unchanged (a copy), one cluster per token.
 */
export function poolTokens(x: Float32Array, m: number, d: number, poolFactor: number, opts: PoolTokensOptions = {}): PooledTokens {
  checkFactor(poolFactor);
  if (x.length < m * d) throw new RangeError(`poolTokens: ${x.length} values for m = ${m} rows of d = ${d}`);
  let unit = true;
  for (let i = 0; i < m && unit; i++) {
    let s = 0;
    for (let t = 0; t < d; t++) s += x[i * d + t] * x[i * d + t];
    if (Math.abs(Math.sqrt(s) - 1) > 1e-2) unit = false;
  }
  const normalize = opts.normalize === undefined || opts.normalize === 'auto' ? unit && m > 0 : opts.normalize;
  if (poolFactor === 1) {
    const idx = Int32Array.from({ length: m }, (_, i) => i);
    return { vectors: x.slice(0, m * d), count: m, assignment: idx, representative: idx.slice(), normalized: normalize };
  }
  const k = pooledCount(m, poolFactor);
  const assignment = new Int32Array(m);
  // windows of a multiple of poolFactor tokens: every window but the last gives exactly window / poolFactor clusters
  const window = Math.floor(POOL_WINDOW / poolFactor) * poolFactor;
  let base = 0;
  for (let a = 0; a < m; a += window) {
    const b = Math.min(m, a + window);
    const labels = wardClusters(x.subarray(a * d, b * d), b - a, d, pooledCount(b - a, poolFactor));
    let most = -1;
    for (let i = 0; i < b - a; i++) {
      assignment[a + i] = base + labels[i];
      if (labels[i] > most) most = labels[i];
    }
    base += most + 1;
  }
  if (base !== k) throw new Error(`poolTokens: ${base} clusters, expected ${k}`);
  const sums = new Float64Array(k * d);
  const counts = new Float64Array(k);
  for (let i = 0; i < m; i++) {
    const c = assignment[i];
    counts[c]++;
    for (let t = 0; t < d; t++) sums[c * d + t] += x[i * d + t];
  }
  const vectors = new Float32Array(k * d);
  for (let c = 0; c < k; c++) {
    let s = 0;
    for (let t = 0; t < d; t++) {
      const v = sums[c * d + t] / counts[c];
      sums[c * d + t] = v;
      s += v * v;
    }
    const scale = normalize && s > 0 ? 1 / Math.sqrt(s) : 1;
    for (let t = 0; t < d; t++) vectors[c * d + t] = sums[c * d + t] * scale;
  }
  const representative = new Int32Array(k).fill(-1);
  const bestDot = new Float64Array(k).fill(-Infinity);
  for (let i = 0; i < m; i++) {
    const c = assignment[i];
    let dot = 0;
    for (let t = 0; t < d; t++) dot += x[i * d + t] * sums[c * d + t];
    if (dot > bestDot[c]) {
      bestDot[c] = dot;
      representative[c] = i;
    }
  }
  return { vectors, count: k, assignment, representative, normalized: normalize };
}

/** A batch of documents (document-major, tokenOffsets: docs + 1) after pooling each document. */
export interface PooledBatch {
  tokenOffsets: Uint32Array;
  /** T' x d pooled rows. */
  vectors: Float32Array;
  /** For each pooled row, the token id of its representative member (search explanations). */
  tokenIds: Int32Array;
}

/** Pools every document of a batch (see `poolTokens`); poolFactor 1 returns the same arrays. */
export function poolBatch(tokenOffsets: Uint32Array, tokenIds: Int32Array, vectors: Float32Array, d: number, poolFactor: number, opts: PoolTokensOptions = {}): PooledBatch {
  checkFactor(poolFactor);
  if (poolFactor === 1) return { tokenOffsets, vectors, tokenIds };
  const n = tokenOffsets.length - 1;
  const offsets = new Uint32Array(n + 1);
  for (let i = 0; i < n; i++) offsets[i + 1] = offsets[i] + pooledCount(tokenOffsets[i + 1] - tokenOffsets[i], poolFactor);
  const T = offsets[n];
  const out = new Float32Array(T * d);
  const ids = new Int32Array(T);
  for (let i = 0; i < n; i++) {
    const a = tokenOffsets[i];
    const m = tokenOffsets[i + 1] - a;
    if (m === 0) continue;
    const p = poolTokens(vectors.subarray(a * d, (a + m) * d), m, d, poolFactor, opts);
    out.set(p.vectors, offsets[i] * d);
    for (let c = 0; c < p.count; c++) ids[offsets[i] + c] = tokenIds[a + p.representative[c]];
  }
  return { tokenOffsets: offsets, vectors: out, tokenIds: ids };
}
