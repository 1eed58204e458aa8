import { assertDim, assertMatrix, assertOffsets, ShapeError } from './shapes';

/** One query token's retrieved document tokens, best first: owning document index and score. */
export interface XtrRetrieved {
  docs: Uint32Array | Int32Array | number[];
  scores: Float32Array | Float64Array | number[];
}

export interface XtrScores {
  /** candidate document indices, in order of first retrieval (query token 0's list first) */
  docs: Uint32Array;
  /** their XTR scores */
  scores: Float64Array;
  /** m_i, the imputed similarity of each query token (n) */
  imputed: Float64Array;
}

/**
 * XTR inference scoring from retrieved tokens only (XTR section 3.2, SPEC 3.2).
 * retrieved: n lists, list i = query token i's top-k' document tokens in descending score order
 * (document indices must be integers in [0, 2^32 - 1)).
 * m_i = the last (k'-th, or last if fewer) score of list i; an empty list imputes m_i = 0.
 * score(D) = (sum_i m_i + sum_{i in R(D)} (s_iD - m_i)) / n, s_iD = the first (best) hit of D in list i.
 * O(n k') updates of an open-addressing hash table on typed arrays (no per-entry allocation);
 * never touches a document's full token set.
 * Throws on a list that is not in non-increasing order or whose arrays differ in length.
 */
export function xtrAggregate(retrieved: XtrRetrieved[]): XtrScores {
  const n = retrieved.length;
  const imputed = new Float64Array(n);
  let base = 0;
  let total = 0;
  for (let i = 0; i < n; i++) {
    const { docs, scores } = retrieved[i];
    if (docs.length !== scores.length) {
      throw new ShapeError(`xtrAggregate: query token ${i} has ${docs.length} docs but ${scores.length} scores; both must have k' entries`);
    }
    imputed[i] = scores.length > 0 ? scores[scores.length - 1] : 0;
    base += imputed[i];
    total += docs.length;
  }
  let cap = 16;
  while (cap < 2 * total) cap *= 2;
  const mask = cap - 1;
  const shift = 32 - Math.log2(cap);
  // keys hold document + 1, so 0 marks an empty slot and the fresh (lazily zeroed) buffer needs
  // no fill. Sized once for sum k' (load <= 1/2, no rehashing): growing from 2 k' measured 1.8x
  // slower, and packing key + data into one float64 slot (one cache line per probe) was slower
  // still, from the doubled table size.
  const keys = new Uint32Array(cap);
  const slotOf = new Uint32Array(cap); // table position -> candidate number
  const order = new Uint32Array(total); // candidate number -> document index
  const delta = new Float64Array(total);
  const lastSeen = new Uint32Array(total); // i + 1 of the last list that contributed
  let count = 0;
  for (let i = 0; i < n; i++) {
    const { docs, scores } = retrieved[i];
    const mi = imputed[i];
    const tag = i + 1;
    let prev = Infinity;
    for (let r = 0; r < docs.length; r++) {
      const s = scores[r];
      if (s > prev) {
        throw new ShapeError(`xtrAggregate: query token ${i}'s list must be in descending score order, but scores[${r - 1}] = ${prev} < scores[${r}] = ${s}`);
      }
      prev = s;
      const doc = docs[r];
      if (!(doc >= 0 && doc < 0xffffffff && doc === Math.floor(doc))) {
        throw new ShapeError(`xtrAggregate: query token ${i}: docs[${r}] = ${doc} is not an integer in [0, 2^32 - 1)`);
      }
      const key = doc + 1;
      let h = Math.imul(doc, 0x9e3779b1) >>> shift;
      while (keys[h] !== 0 && keys[h] !== key) h = (h + 1) & mask;
      let c: number;
      if (keys[h] === 0) {
        keys[h] = key;
        c = count++;
        slotOf[h] = c;
        order[c] = doc;
      } else c = slotOf[h];
      if (lastSeen[c] !== tag) {
        lastSeen[c] = tag;
        delta[c] += s - mi;
      }
    }
  }
  const outScores = new Float64Array(count);
  for (let c = 0; c < count; c++) outScores[c] = n === 0 ? 0 : (base + delta[c]) / n;
  return { docs: order.slice(0, count), scores: outScores, imputed };
}

/**
 * XTR over a candidate set (SPEC 3.2): each query token retrieves its top-k' tokens among all
 * candidate tokens (exhaustively, by dot product); candidates are scored from those hits only
 * (`xtrAggregate`), missing similarities imputed by the k'-th score. Candidates no query token
 * retrieved score sum_i m_i / n. q: n x d; docs: T x d (CSR, offsets C + 1). Returns C scores.
 */
export function xtrScores(q: Float32Array, n: number, docs: Float32Array, offsets: Uint32Array, d: number, kPrime: number): Float32Array {
  assertDim('xtrScores', 'd', d, 1);
  assertDim('xtrScores', 'n', n);
  assertDim('xtrScores', 'kPrime', kPrime);
  assertMatrix('xtrScores', 'q', q, n, d, 'n', 'd');
  if (docs.length % d !== 0) throw new ShapeError(`xtrScores: docs has length ${docs.length}, expected T x d with d = ${d}`);
  assertOffsets('xtrScores', offsets, docs.length / d);
  const C = offsets.length - 1;
  const T = offsets[C];
  const owner = new Uint32Array(T);
  for (let c = 0; c < C; c++) owner.fill(c, offsets[c], offsets[c + 1]);
  const sims = new Float32Array(T);
  const retrieved: XtrRetrieved[] = [];
  for (let i = 0; i < n; i++) {
    const qi = q.subarray(i * d, (i + 1) * d);
    for (let t = 0; t < T; t++) {
      let s = 0;
      const b = t * d;
      for (let k = 0; k < d; k++) s += qi[k] * docs[b + k];
      sims[t] = s;
    }
    const k = Math.min(kPrime, T);
    const threshold = k === 0 ? Infinity : Float32Array.from(sims).sort()[T - k];
    const idx: number[] = [];
    for (let t = 0; t < T && idx.length < T; t++) if (sims[t] >= threshold) idx.push(t);
    idx.sort((a, b) => sims[b] - sims[a] || a - b);
    idx.length = Math.min(idx.length, k);
    retrieved.push({ docs: Uint32Array.from(idx, (t) => owner[t]), scores: Float32Array.from(idx, (t) => sims[t]) });
  }
  const agg = xtrAggregate(retrieved);
  const out = new Float32Array(C);
  const base = n ? agg.imputed.reduce((s, m) => s + m, 0) / n : 0;
  out.fill(base);
  agg.docs.forEach((c, j) => (out[c] = agg.scores[j]));
  return out;
}
