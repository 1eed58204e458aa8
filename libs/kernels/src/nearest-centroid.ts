import { GraphBuilder, int64Tensor, makeModel, makeValueInfo } from './onnx-graph';
import { createScorerSession, ort } from './session';

/** Rows per GEMM: S = rows x K floats stays bounded (64 MiB at K = 2,048). */
const CHUNK_FLOATS = 1 << 24;

/**
 * Nearest centroid by inner product, as ONNX Runtime GEMMs: for x [n, d] and centroids [K, d]
 * (unit rows), S = x C^T, then ArgMax and ReduceMax over K. The token IVF's assignment (every
 * token of every segment against up to 65,536 centroids) is GEMM-shaped work: in JavaScript it
 * takes minutes per segment at d = 384 and blocks the event loop; here it runs in ORT's pool.
 * Ties go to the lowest centroid index (ArgMax select_last_index = 0), as assignNearest in
 * @lateral/search.
 */
export class OnnxNearestCentroid {
  /** MatMul + TopK, made on first use by assignGrouped. */
  private top: ort.InferenceSession | undefined;

  private constructor(
    private readonly session: ort.InferenceSession,
    private readonly threads: number,
  ) {}

  static async create(threads = 0): Promise<OnnxNearestCentroid> {
    const g = new GraphBuilder();
    const s = g.op('MatMul', ['x', 'centroids_t']);
    g.op('ArgMax', [s], { axis: 1, keepdims: 0 }, 'nearest');
    g.op('ReduceMax', [s, g.constant(int64Tensor('k_axis', [1], [1]))], { keepdims: 0 }, 'similarity');
    const model = makeModel(
      g.build(
        'nearest_centroid',
        [makeValueInfo('x', 'FLOAT', ['n', 'd']), makeValueInfo('centroids_t', 'FLOAT', ['d', 'k'])],
        [makeValueInfo('nearest', 'INT64', ['n']), makeValueInfo('similarity', 'FLOAT', ['n'])],
      ),
      { opset: 18 },
    );
    return new OnnxNearestCentroid(await createScorerSession(model, { intraOpThreads: threads }), threads);
  }

  /** x: n x d; centroids: k x d. Returns the nearest centroid of every row and its inner product. */
  async assign(x: Float32Array, n: number, centroids: Float32Array, k: number, d: number): Promise<{ nearest: Uint32Array; similarity: Float32Array }> {
    if (x.length !== n * d || centroids.length !== k * d) throw new RangeError(`OnnxNearestCentroid: x is ${x.length} (expected ${n} x ${d}), centroids ${centroids.length} (expected ${k} x ${d})`);
    const ct = new Float32Array(d * k);
    for (let c = 0; c < k; c++) for (let j = 0; j < d; j++) ct[j * k + c] = centroids[c * d + j];
    const cTensor = new ort.Tensor('float32', ct, [d, k]);
    const nearest = new Uint32Array(n);
    const similarity = new Float32Array(n);
    const rows = Math.max(1, Math.floor(CHUNK_FLOATS / Math.max(1, k)));
    for (let r0 = 0; r0 < n; r0 += rows) {
      const r1 = Math.min(n, r0 + rows);
      const out = await this.session.run({ x: new ort.Tensor('float32', x.subarray(r0 * d, r1 * d), [r1 - r0, d]), centroids_t: cTensor });
      const idx = out.nearest.data as BigInt64Array;
      for (let i = 0; i < r1 - r0; i++) nearest[r0 + i] = Number(idx[i]);
      similarity.set(out.similarity.data as Float32Array, r0);
    }
    return { nearest, similarity };
  }

  /**
   * Nearest centroid looked for only in the `probes` groups whose coarse centroids are nearest
   * each row (groupCentroids): ~n x (k1 + probes x K / k1) inner products instead of n x K (14x
   * fewer at K = 16,384 with 8 probes; 3.1x less time there in `npm run bench -- refit`, the
   * gathers and the small GEMMs' calls costing the rest). Approximate: a row whose true nearest centroid lies in a
   * group it did not probe gets the best of the groups it did (with probes = k1 it is `assign`'s
   * answer, up to float ties between groups). Ties between groups go to the lower centroid id.
   */
  async assignGrouped(x: Float32Array, n: number, centroids: Float32Array, k: number, d: number, groups: CentroidGroups, probes: number): Promise<{ nearest: Uint32Array; similarity: Float32Array }> {
    if (x.length !== n * d || centroids.length !== k * d) throw new RangeError(`OnnxNearestCentroid: x is ${x.length} (expected ${n} x ${d}), centroids ${centroids.length} (expected ${k} x ${d})`);
    const k1 = groups.start.length - 1;
    if (groups.members.length !== k || groups.coarse.length !== k1 * d) throw new RangeError(`OnnxNearestCentroid: groups of ${groups.members.length} centroids in ${k1} groups do not fit ${k} centroids of ${d} dims`);
    const p = Math.max(1, Math.min(k1, probes));
    const top = await this.topGroups(x, n, groups.coarse, k1, d, p);
    // rows by probed group (a row is in p groups), counted first
    const count = new Uint32Array(k1 + 1);
    for (let i = 0; i < n * p; i++) count[top[i] + 1]++;
    for (let g = 0; g < k1; g++) count[g + 1] += count[g];
    const rowsOf = new Uint32Array(n * p);
    const fill = count.slice(0, k1);
    for (let i = 0; i < n * p; i++) rowsOf[fill[top[i]]++] = Math.floor(i / p);
    const nearest = new Uint32Array(n);
    const similarity = new Float32Array(n).fill(-Infinity);
    for (let g = 0; g < k1; g++) {
      const m = count[g + 1] - count[g];
      const size = groups.start[g + 1] - groups.start[g];
      if (m === 0 || size === 0) continue;
      const xg = new Float32Array(m * d);
      // row by row with the typed array's copy (a memcpy), not element by element
      for (let r = 0; r < m; r++) {
        const from = rowsOf[count[g] + r] * d;
        xg.set(x.subarray(from, from + d), r * d);
      }
      const cg = groupRows(groups, centroids, g, d);
      const got = await this.assign(xg, m, cg, size, d);
      for (let r = 0; r < m; r++) {
        const i = rowsOf[count[g] + r];
        const id = groups.members[groups.start[g] + got.nearest[r]];
        const s = got.similarity[r];
        if (s > similarity[i] || (s === similarity[i] && id < nearest[i])) {
          similarity[i] = s;
          nearest[i] = id;
        }
      }
    }
    return { nearest, similarity };
  }

  /** The p coarse groups nearest each row (n x p ids, best first): MatMul + TopK, rows chunked. */
  private async topGroups(x: Float32Array, n: number, coarse: Float32Array, k1: number, d: number, p: number): Promise<Uint32Array> {
    this.top ??= await createScorerSession(topModel(), { intraOpThreads: this.threads });
    const ct = new Float32Array(d * k1);
    for (let c = 0; c < k1; c++) for (let j = 0; j < d; j++) ct[j * k1 + c] = coarse[c * d + j];
    const cTensor = new ort.Tensor('float32', ct, [d, k1]);
    const kTensor = new ort.Tensor('int64', BigInt64Array.of(BigInt(p)), [1]);
    const out = new Uint32Array(n * p);
    const rows = Math.max(1, Math.floor(CHUNK_FLOATS / Math.max(1, k1)));
    for (let r0 = 0; r0 < n; r0 += rows) {
      const r1 = Math.min(n, r0 + rows);
      const r = await this.top.run({ x: new ort.Tensor('float32', x.subarray(r0 * d, r1 * d), [r1 - r0, d]), centroids_t: cTensor, k: kTensor });
      const ids = r.top_ids.data as BigInt64Array;
      for (let i = 0; i < ids.length; i++) out[r0 * p + i] = Number(ids[i]);
    }
    return out;
  }

  async release(): Promise<void> {
    await this.session.release();
    await this.top?.release();
  }
}

/** MatMul then TopK (largest, sorted) over the centroid axis: the coarse probe of assignGrouped. */
function topModel(): ReturnType<typeof makeModel> {
  const g = new GraphBuilder();
  const s = g.op('MatMul', ['x', 'centroids_t']);
  g.opOutputs('TopK', [s, 'k'], ['top_scores', 'top_ids'], { axis: 1, largest: 1, sorted: 1 });
  return makeModel(
    g.build(
      'coarse_top',
      [makeValueInfo('x', 'FLOAT', ['n', 'd']), makeValueInfo('centroids_t', 'FLOAT', ['d', 'k1']), makeValueInfo('k', 'INT64', [1])],
      [makeValueInfo('top_scores', 'FLOAT', ['n', 'p']), makeValueInfo('top_ids', 'INT64', ['n', 'p'])],
    ),
    { opset: 18 },
  );
}

/**
 * K centroids grouped under k1 coarse centroids, for assignGrouped: group g's centroid ids are
 * members[start[g]] .. members[start[g + 1] - 1] (ascending).
 */
export interface CentroidGroups {
  coarse: Float32Array;
  start: Uint32Array;
  members: Uint32Array;
}

const groupRowCache = new WeakMap<CentroidGroups, Float32Array[]>();
/** Group g's centroid rows, gathered once per groups object. */
function groupRows(groups: CentroidGroups, centroids: Float32Array, g: number, d: number): Float32Array {
  let rows = groupRowCache.get(groups);
  if (!rows) groupRowCache.set(groups, (rows = []));
  if (!rows[g]) {
    const size = groups.start[g + 1] - groups.start[g];
    const cg = new Float32Array(size * d);
    for (let r = 0; r < size; r++) {
      const id = groups.members[groups.start[g] + r];
      cg.set(centroids.subarray(id * d, id * d + d), r * d);
    }
    rows[g] = cg;
  }
  return rows[g];
}

/**
 * k centroids (unit rows) grouped under round(sqrt(k)) coarse centroids fitted on the centroids
 * themselves (spherical k-means, `iterations` steps, initial rows from `pick`): ~k x sqrt(k) x d x
 * (iterations + 1) multiply-adds, seconds at k = 65,536. Deterministic for a given `pick`.
 */
export async function groupCentroids(assigner: OnnxNearestCentroid, centroids: Float32Array, k: number, d: number, iterations: number, pick: (n: number, m: number) => Uint32Array): Promise<CentroidGroups> {
  const k1 = Math.max(1, Math.min(k, Math.round(Math.sqrt(k))));
  const coarse = await onnxSphericalKmeans(assigner, centroids, k, d, pick(k, k1), iterations);
  const { nearest } = await assigner.assign(centroids, k, coarse, k1, d);
  const start = new Uint32Array(k1 + 1);
  for (let i = 0; i < k; i++) start[nearest[i] + 1]++;
  for (let g = 0; g < k1; g++) start[g + 1] += start[g];
  const members = new Uint32Array(k);
  const fill = start.slice(0, k1);
  for (let i = 0; i < k; i++) members[fill[nearest[i]]++] = i;
  return { coarse, start, members };
}

/**
 * Spherical k-means with the assignment step in ONNX Runtime (the centroid update, O(n d), in
 * JavaScript): x [n, d] (rows L2-normalised by the caller), k centroids initialised from k
 * distinct rows chosen by `pick`, `iterations` Lloyd steps; an empty cluster keeps its previous
 * centroid. Returns k x d unit rows. Deterministic for a given initialisation.
 */
export async function onnxSphericalKmeans(assigner: OnnxNearestCentroid, x: Float32Array, n: number, d: number, init: Uint32Array, iterations: number): Promise<Float32Array> {
  const k = init.length;
  const c = new Float32Array(k * d);
  init.forEach((row, i) => c.set(x.subarray(row * d, row * d + d), i * d));
  for (let it = 0; it < iterations; it++) {
    const { nearest } = await assigner.assign(x, n, c, k, d);
    lloydUpdate(x, n, d, nearest, c, k);
  }
  return c;
}

/** A two-level fit: k unit centroids numbered coarse group by coarse group. */
export interface TwoLevelCentroids {
  /** k x d unit rows; coarse group g's centroids are rows groupStart[g] .. groupStart[g + 1] - 1. */
  centroids: Float32Array;
  /** k1 + 1 offsets into the centroid rows. */
  groupStart: Uint32Array;
  /** The k1 coarse centroids (k1 x d unit rows). */
  coarse: Float32Array;
}

/**
 * How many fine centroids each coarse group gets: k in proportion to the groups' row counts
 * (largest remainder), never more than a group's rows. Requires sum(rows) >= k.
 */
export function allotCentroids(rows: ArrayLike<number>, k: number): Uint32Array {
  const g = rows.length;
  let n = 0;
  for (let i = 0; i < g; i++) n += rows[i];
  if (n < k) throw new RangeError(`allotCentroids: ${n} rows for ${k} centroids`);
  const out = new Uint32Array(g);
  const rest = new Float64Array(g);
  let given = 0;
  for (let i = 0; i < g; i++) {
    const quota = (k * rows[i]) / n;
    out[i] = Math.min(rows[i], Math.floor(quota));
    rest[i] = quota - out[i];
    given += out[i];
  }
  // the remainder, one at a time, to the largest fractional quotas first (ties: lower group);
  // groups already full are passed over, and the loop goes round again while any is short
  const order = Array.from({ length: g }, (_, i) => i).sort((a, b) => rest[b] - rest[a] || a - b);
  while (given < k) {
    for (const i of order) {
      if (given === k) break;
      if (out[i] < rows[i]) {
        out[i]++;
        given++;
      }
    }
  }
  return out;
}

/**
 * Spherical k-means in two levels, for the large k of a WARP refit: k1 = round(sqrt(k)) coarse
 * centroids fitted on all of x, every row assigned to its coarse centroid, then each coarse
 * group's rows fitted with its share of the k fine centroids (allotCentroids), then
 * TWO_LEVEL_REFINE_STEPS Lloyd steps over all of x with assignGrouped, so a row fitted in one group
 * can move to a nearer centroid of a neighbouring group. The work is ~n x (iterations x 2 k1 +
 * refine steps x (k1 + 8 k / k1)) inner products instead of iterations x n x k: 5.0x less time at
 * k = 16,384 in `npm run bench -- refit`, within 0.001 of flat k-means's mean similarity. The numbering
 * keeps each group's centroids together, so centroids near each other in the space tend to be
 * near each other in number (a query token's probes fall in few runs of list ids). `pick(n, m)`:
 * m distinct rows of n for an initialisation (seeded by the caller). Deterministic for a given
 * `pick`.
 */
export async function onnxTwoLevelKmeans(
  assigner: OnnxNearestCentroid,
  x: Float32Array,
  n: number,
  d: number,
  k: number,
  iterations: number,
  pick: (n: number, m: number) => Uint32Array,
): Promise<TwoLevelCentroids> {
  if (k > n) throw new RangeError(`onnxTwoLevelKmeans: ${k} centroids from ${n} rows`);
  const k1 = Math.max(1, Math.min(k, Math.round(Math.sqrt(k))));
  const coarse = await onnxSphericalKmeans(assigner, x, n, d, pick(n, k1), iterations);
  const { nearest } = await assigner.assign(x, n, coarse, k1, d);
  const rows = new Uint32Array(k1);
  for (let i = 0; i < n; i++) rows[nearest[i]]++;
  const share = allotCentroids(rows, k);
  // rows grouped by coarse centroid (stable: row order kept within a group)
  const start = new Uint32Array(k1 + 1);
  for (let g = 0; g < k1; g++) start[g + 1] = start[g] + rows[g];
  const order = new Uint32Array(n);
  const fill = start.slice(0, k1);
  for (let i = 0; i < n; i++) order[fill[nearest[i]]++] = i;
  const centroids = new Float32Array(k * d);
  const groupStart = new Uint32Array(k1 + 1);
  for (let g = 0; g < k1; g++) {
    groupStart[g + 1] = groupStart[g] + share[g];
    if (share[g] === 0) continue;
    const m = rows[g];
    const xg = new Float32Array(m * d);
    for (let r = 0; r < m; r++) {
      const i = order[start[g] + r];
      xg.set(x.subarray(i * d, i * d + d), r * d);
    }
    const fine = await onnxSphericalKmeans(assigner, xg, m, d, pick(m, share[g]), iterations);
    centroids.set(fine, groupStart[g] * d);
  }
  // Lloyd steps over all of x with the grouped assignment: a row fitted in one group may be
  // nearer a centroid of a neighbouring group, and these steps let the groups' centroids share
  // the rows at their borders (each step ~n x (k1 + probes x k / k1) inner products)
  const groups: CentroidGroups = { coarse, start: groupStart, members: Uint32Array.from({ length: k }, (_, i) => i) };
  for (let it = 0; it < TWO_LEVEL_REFINE_STEPS; it++) {
    const { nearest: best } = await assigner.assignGrouped(x, n, centroids, k, d, groups, TWO_LEVEL_REFINE_PROBES);
    lloydUpdate(x, n, d, best, centroids, k);
  }
  return { centroids, groupStart, coarse };
}

/** Lloyd steps at the end of a two-level fit, and the coarse groups each row is looked for in. */
export const TWO_LEVEL_REFINE_STEPS = 2;
export const TWO_LEVEL_REFINE_PROBES = 8;

/** c[j] := the normalised mean of the rows assigned to j (an empty cluster keeps its centroid). */
function lloydUpdate(x: Float32Array, n: number, d: number, nearest: Uint32Array, c: Float32Array, k: number): void {
  const sums = new Float64Array(k * d);
  const counts = new Uint32Array(k);
  for (let i = 0; i < n; i++) {
    const j = nearest[i];
    counts[j]++;
    for (let t = 0; t < d; t++) sums[j * d + t] += x[i * d + t];
  }
  for (let j = 0; j < k; j++) {
    if (counts[j] === 0) continue;
    let norm = 0;
    for (let t = 0; t < d; t++) norm += sums[j * d + t] ** 2;
    const inv = norm > 0 ? 1 / Math.sqrt(norm) : 0;
    for (let t = 0; t < d; t++) c[j * d + t] = sums[j * d + t] * inv;
  }
}
