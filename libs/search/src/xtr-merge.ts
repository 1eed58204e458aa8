import { kWayMerge, type RankedList } from './merge';
import { runSteps, type Steps } from './steps';

/** XTR's per-segment lists (xtrSegmentSearch's output) and their exact global merge (steps 2-3 of xtr.ts). */

/** Most query tokens an XTR search takes (the accumulator's tags are 16-bit). */
export const XTR_MAX_QUERY_TOKENS = 65535;

/** One segment's per-query-token top-k' lists (CSR over query tokens), best first. */
export interface XtrSegmentLists {
  n: number;
  kPrime: number;
  documents: number;
  docBase: number;
  /** n + 1: list i is [offsets[i], offsets[i+1]) */
  offsets: Uint32Array;
  scores: Float64Array;
  /** local documents */
  docs: Uint32Array;
  /** token rows of the segment */
  rows: Uint32Array;
  /** token rows scored (work done) */
  scored: number;
}

/** The exact global per-query-token lists. */
export interface XtrMerged {
  n: number;
  kPrime: number;
  /** n + 1 */
  offsets: Uint32Array;
  scores: Float64Array;
  /** index of the segment (in the merged array) of each entry */
  segments: Uint32Array;
  docs: Uint32Array;
  rows: Uint32Array;
  /** global document keys, docBase + doc */
  keys: Float64Array;
  /** n: m_i, the last score of list i (0 when empty) */
  imputed: Float64Array;
  /** S x n: entries of segment s's list i inside the global list i (always a prefix) */
  survivors: Uint32Array;
}

/** Merges the segments' lists into the exact global top-k' lists and their imputation scores. */
export function xtrMerge(lists: readonly XtrSegmentLists[]): XtrMerged {
  return runSteps(xtrMergeSteps(lists));
}

/** xtrMerge in steps (each segment's keys, then query token by query token): the same merge. */
export function* xtrMergeSteps(lists: readonly XtrSegmentLists[]): Steps<XtrMerged> {
  const S = lists.length;
  const n = S > 0 ? lists[0].n : 0;
  const kPrime = S > 0 ? lists[0].kPrime : 0;
  for (let s = 1; s < S; s++) {
    if (lists[s].n !== n || lists[s].kPrime !== kPrime) throw new RangeError(`xtrMerge: segment ${s} has n = ${lists[s].n}, k' = ${lists[s].kPrime}; segment 0 has ${n}, ${kPrime}`);
  }
  const keys: Float64Array[] = [];
  for (const l of lists) {
    const k = new Float64Array(l.docs.length);
    for (let e = 0; e < k.length; e++) k[e] = l.docBase + l.docs[e];
    keys.push(k);
    if (keys.length % 64 === 0) yield;
  }
  const survivors = new Uint32Array(S * n);
  const imputed = new Float64Array(n);
  const parts: { list: Uint32Array; pos: Uint32Array }[] = [];
  const offsets = new Uint32Array(n + 1);
  for (let i = 0; i < n; i++) {
    yield;
    const ranked: RankedList[] = lists.map((l, s) => {
      const a = l.offsets[i], b = l.offsets[i + 1];
      return { scores: l.scores.subarray(a, b), keys: keys[s].subarray(a, b), sub: l.rows.subarray(a, b) };
    });
    const m = kWayMerge(ranked, kPrime);
    parts.push(m);
    offsets[i + 1] = offsets[i] + m.list.length;
    for (let o = 0; o < m.list.length; o++) survivors[m.list[o] * n + i]++;
  }
  const total = offsets[n];
  const scores = new Float64Array(total);
  const segments = new Uint32Array(total);
  const docs = new Uint32Array(total);
  const rows = new Uint32Array(total);
  const gkeys = new Float64Array(total);
  for (let i = 0; i < n; i++) {
    if (i % 8 === 0) yield;
    const { list, pos } = parts[i];
    for (let o = 0; o < list.length; o++) {
      const l = lists[list[o]];
      const e = l.offsets[i] + pos[o];
      const g = offsets[i] + o;
      scores[g] = l.scores[e];
      segments[g] = list[o];
      docs[g] = l.docs[e];
      rows[g] = l.rows[e];
      gkeys[g] = keys[list[o]][e];
    }
    imputed[i] = list.length > 0 ? scores[offsets[i + 1] - 1] : 0;
  }
  return { n, kPrime, offsets, scores, segments, docs, rows, keys: gkeys, imputed, survivors };
}
