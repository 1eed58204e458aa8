import { ShapeError } from './shapes';

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
/** Packing base for (document, last query token) in one float64 slot; bounds n. */
const TAGS = 2 ** 21;

export function xtrAggregate(retrieved: XtrRetrieved[]): XtrScores {
  const n = retrieved.length;
  const imputed = new Float64Array(n);
  let base = 0;
  for (let i = 0; i < n; i++) {
    const { docs, scores } = retrieved[i];
    if (docs.length !== scores.length) {
      throw new ShapeError(`xtrAggregate: query token ${i} has ${docs.length} docs but ${scores.length} scores; both must have k' entries`);
    }
    imputed[i] = scores.length > 0 ? scores[scores.length - 1] : 0;
    base += imputed[i];
  }
  // Open addressing, linear probing, one 16-byte slot per document so a probe touches one cache
  // line: table[2h] = (document + 1) * TAGS + (i + 1 of the last list that contributed), exact in
  // float64 for documents < 2^32 and n < TAGS (0 = empty, so a fresh zeroed buffer needs no fill);
  // table[2h + 1] = sum over contributing lists of (s_iD - m_i); order[c] = h of candidate c.
  // Starts at twice the longest list and doubles at load 1/2: sizing for sum k' up front costs
  // more in page faults than the aggregation itself (measured: 43 ms at n = 32, k' = 40,000).
  if (n >= TAGS) throw new ShapeError(`xtrAggregate: at most ${TAGS - 1} query tokens, got n = ${n}`);
  let maxLen = 0;
  for (const l of retrieved) maxLen = Math.max(maxLen, l.docs.length);
  let cap = 16;
  while (cap < 2 * maxLen) cap *= 2;
  let shift = 32 - Math.log2(cap);
  let table = new Float64Array(2 * cap);
  let order = new Uint32Array(cap >> 1);
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
      const lo = (doc + 1) * TAGS;
      const hi = lo + TAGS;
      let h = Math.imul(doc, 0x9e3779b1) >>> shift;
      let slot = table[2 * h];
      while (slot !== 0 && (slot < lo || slot >= hi)) {
        h = (h + 1) & (cap - 1);
        slot = table[2 * h];
      }
      if (slot === 0) {
        if (count + 1 > cap >> 1) {
          // grow inline (a closure would turn table / cap into context slots in the hot loop)
          const old = table;
          cap *= 2;
          shift--;
          table = new Float64Array(2 * cap);
          const newOrder = new Uint32Array(cap >> 1);
          for (let c = 0; c < count; c++) {
            const oh = order[c];
            const packed = old[2 * oh];
            const key = Math.floor(packed / TAGS) - 1;
            let nh = Math.imul(key, 0x9e3779b1) >>> shift;
            while (table[2 * nh] !== 0) nh = (nh + 1) & (cap - 1);
            table[2 * nh] = packed;
            table[2 * nh + 1] = old[2 * oh + 1];
            newOrder[c] = nh;
          }
          order = newOrder;
          h = Math.imul(doc, 0x9e3779b1) >>> shift;
          while (table[2 * h] !== 0) h = (h + 1) & (cap - 1);
        }
        order[count++] = h;
        table[2 * h] = lo + tag;
        table[2 * h + 1] = s - mi;
      } else if (slot - lo !== tag) {
        table[2 * h] = lo + tag;
        table[2 * h + 1] += s - mi;
      }
    }
  }
  const outDocs = new Uint32Array(count);
  const outScores = new Float64Array(count);
  for (let c = 0; c < count; c++) {
    const h = order[c];
    outDocs[c] = Math.floor(table[2 * h] / TAGS) - 1;
    outScores[c] = n === 0 ? 0 : (base + table[2 * h + 1]) / n;
  }
  return { docs: outDocs, scores: outScores, imputed };
}
