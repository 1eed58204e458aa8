import { SegmentCorruptError, crc32c } from '@lateral/codec';
import { lowerBound, type Bm25Postings, type SegmentIndex } from './segment-index';
import { mergeHits } from './merge';
import { TopK } from './select';
import { runSteps, type Steps } from './steps';
import { assertMask, assertTopN, type DocMask, type Hit, type SearchSegment, type SegmentHits } from './types';

/**
 * BM25 over token ids (SPEC 3.4), per segment with global statistics, then merged.
 *
 * score(D, Q) = sum over distinct query terms t of
 *   idf(t) * tf(t, D) * (k1 + 1) / (tf(t, D) + k1 * (1 - b + b * |D| / avgdl))
 * idf(t) = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))   (Lucene's non-negative idf)
 * N, avgdl = total length / N and df are **global**: sums of the per-segment statistics, so a
 * document scores the same whichever segment holds it. Defaults k1 = 0.9, b = 0.4 (Anserini).
 * The (k1 + 1) factor, which Lucene >= 8 drops, changes no ranking; document lengths are exact
 * (Lucene quantises them to a byte). Query terms are deduplicated (a repeated term counts once).
 * Terms are summed in ascending term-id order, so the float result does not depend on how
 * documents are cut into segments.
 */
export const BM25_K1 = 0.9;
export const BM25_B = 0.4;

export interface Bm25Params {
  k1?: number;
  b?: number;
}

/** Collection statistics; per segment from its index, global as their sum. */
export interface Bm25Stats {
  documents: number;
  totalLength: number;
  /** distinct terms, strictly increasing */
  terms: Int32Array;
  /** document frequency of each term */
  df: Uint32Array;
}

/** A segment's BM25 statistics (df per term from its postings). */
export function segmentBm25Stats(index: SegmentIndex | { documents: number; bm25: Bm25Postings }): Bm25Stats {
  const { terms, postingOffsets, totalLength } = index.bm25;
  const df = new Uint32Array(terms.length);
  for (let u = 0; u < terms.length; u++) df[u] = postingOffsets[u + 1] - postingOffsets[u];
  return { documents: index.documents, totalLength, terms, df };
}

/** Global statistics: N, total length and df summed over segments. O(total terms log total terms). */
export function sumBm25Stats(stats: readonly Bm25Stats[]): Bm25Stats {
  let documents = 0;
  let totalLength = 0;
  let all = 0;
  for (const s of stats) {
    documents += s.documents;
    totalLength += s.totalLength;
    all += s.terms.length;
  }
  const sorted = new Int32Array(all);
  let o = 0;
  for (const s of stats) {
    sorted.set(s.terms, o);
    o += s.terms.length;
  }
  sorted.sort();
  let U = 0;
  for (let i = 0; i < all; i++) if (i === 0 || sorted[i] !== sorted[i - 1]) sorted[U++] = sorted[i];
  const terms = sorted.slice(0, U);
  const df = new Uint32Array(U);
  for (const s of stats) {
    // both sorted: one forward walk per segment
    let u = 0;
    for (let j = 0; j < s.terms.length; j++) {
      while (u < U && terms[u] !== s.terms[j]) u++;
      if (u === U) throw new RangeError('sumBm25Stats: every segment\'s terms must be strictly increasing');
      df[u] += s.df[j];
    }
  }
  return { documents, totalLength, terms, df };
}

/**
 * The global statistics of a few terms (a request's query terms), summed one segment index at a
 * time: `bm25Query` given `stats()` returns what it returns given `sumBm25Stats` over the same
 * segments, while nothing proportional to the segments' vocabularies is held (issue 10: a search
 * visits segments one at a time). Terms are sorted and deduplicated here.
 */
export class Bm25TermStats {
  private readonly terms: Int32Array;
  private readonly df: Uint32Array;
  private documents = 0;
  private totalLength = 0;

  constructor(termIds: ArrayLike<number>) {
    this.terms = Int32Array.from(new Set(Array.from(termIds))).sort();
    this.df = new Uint32Array(this.terms.length);
  }

  /**
   * Counts one segment (its index's postings); with `live`, only its live documents (mask 0:
   * deleted or superseded), as the generation statistics count them.
   */
  add(index: SegmentIndex | { documents: number; bm25: Bm25Postings }, live?: DocMask): void {
    const { terms, postingOffsets, postingDocs, docLengths, totalLength } = index.bm25;
    if (live) assertMask('Bm25TermStats.add', live, index.documents);
    if (!live) {
      this.documents += index.documents;
      this.totalLength += totalLength;
    } else {
      for (let d = 0; d < index.documents; d++) {
        if (live[d] === 0) continue;
        this.documents++;
        this.totalLength += docLengths[d];
      }
    }
    for (let u = 0; u < this.terms.length; u++) {
      const at = lowerBound(terms, this.terms[u]);
      if (at >= terms.length || terms[at] !== this.terms[u]) continue;
      if (!live) this.df[u] += postingOffsets[at + 1] - postingOffsets[at];
      else for (let p = postingOffsets[at]; p < postingOffsets[at + 1]; p++) if (live[postingDocs[p]] !== 0) this.df[u]++;
    }
  }

  stats(): Bm25Stats {
    return { documents: this.documents, totalLength: this.totalLength, terms: this.terms.slice(), df: this.df.slice() };
  }
}

/** df of one term (0 when absent). */
export function documentFrequency(stats: Bm25Stats, term: number): number {
  const u = lowerBound(stats.terms, term);
  return u < stats.terms.length && stats.terms[u] === term ? stats.df[u] : 0;
}

/** A query ready for every segment: distinct terms (ascending) and their global idf. */
export interface Bm25Query {
  terms: Int32Array;
  idf: Float64Array;
  avgdl: number;
  k1: number;
  b: number;
}

/**
 * Prepares a query: deduplicates and sorts the term ids, looks up the global df, computes idf.
 * Terms no document contains are dropped (they cannot score). `skip` must be the build's bm25Skip.
 */
export function bm25Query(queryTermIds: ArrayLike<number>, stats: Bm25Stats, params: Bm25Params = {}, skip?: (tokenId: number) => boolean): Bm25Query {
  const k1 = params.k1 ?? BM25_K1;
  const b = params.b ?? BM25_B;
  if (!(Number.isFinite(k1) && k1 >= 0)) throw new RangeError(`bm25: k1 must be a finite number >= 0, got ${k1}`);
  if (!(Number.isFinite(b) && b >= 0 && b <= 1)) throw new RangeError(`bm25: b must be in [0, 1], got ${b}`);
  const distinct = Int32Array.from(new Set(Array.from(queryTermIds).filter((t) => !(skip && skip(t))))).sort();
  const N = stats.documents;
  const terms: number[] = [];
  const idf: number[] = [];
  for (const t of distinct) {
    const df = documentFrequency(stats, t);
    if (df === 0) continue;
    terms.push(t);
    idf.push(Math.log(1 + (N - df + 0.5) / (df + 0.5)));
  }
  const avgdl = N > 0 ? stats.totalLength / N : 0;
  return { terms: Int32Array.from(terms), idf: Float64Array.from(idf), avgdl, k1, b };
}

export interface SegmentSearchOptions {
  /** documents with mask[doc] === 0 never score (filters, tombstones) */
  mask?: DocMask;
}

/**
 * One segment's BM25 top-n (score descending, local doc ascending). A direct-addressed float64
 * accumulator over the segment's documents; only documents containing a query term score.
 */
export function bm25SegmentSearch(seg: SearchSegment, index: SegmentIndex, query: Bm25Query, topN: number, opts: SegmentSearchOptions = {}): SegmentHits {
  assertTopN('bm25SegmentSearch', 'topN', topN);
  const D = index.documents;
  if (D !== seg.documents) throw new RangeError(`bm25SegmentSearch: index has ${D} documents, segment "${seg.name}" has ${seg.documents}`);
  assertMask('bm25SegmentSearch', opts.mask, D);
  const { terms, postingOffsets, postingDocs, postingTfs, docLengths } = index.bm25;
  const mask = opts.mask;
  const { k1, b, avgdl } = query;
  const acc = new Float64Array(D);
  const hit = new Uint8Array(D);
  const touched: number[] = [];
  for (let q = 0; q < query.terms.length; q++) {
    const u = lowerBound(terms, query.terms[q]);
    if (u >= terms.length || terms[u] !== query.terms[q]) continue;
    const idf = query.idf[q];
    for (let p = postingOffsets[u]; p < postingOffsets[u + 1]; p++) {
      const doc = postingDocs[p];
      if (mask && mask[doc] === 0) continue;
      const tf = postingTfs[p];
      const norm = avgdl > 0 ? k1 * (1 - b + (b * docLengths[doc]) / avgdl) : k1;
      acc[doc] += (idf * tf * (k1 + 1)) / (tf + norm);
      if (!hit[doc]) {
        hit[doc] = 1;
        touched.push(doc);
      }
    }
  }
  const top = new TopK(topN, touched.length);
  for (const doc of touched) top.push(acc[doc], doc);
  const { scores, ids } = top.drain();
  return { docBase: seg.docBase, docs: ids, scores };
}

/** BM25 over many segments: global statistics, per-segment top-n, exact merge. */
export function bm25Search(
  parts: readonly { segment: SearchSegment; index: SegmentIndex; mask?: DocMask }[],
  queryTermIds: ArrayLike<number>,
  topN: number,
  params: Bm25Params = {},
  skip?: (tokenId: number) => boolean,
): Hit[] {
  return runSteps(bm25SearchSteps(parts, queryTermIds, topN, params, skip));
}

/** bm25Search in steps (the statistics, then each segment): the same result. */
export function* bm25SearchSteps(
  parts: readonly { segment: SearchSegment; index: SegmentIndex; mask?: DocMask }[],
  queryTermIds: ArrayLike<number>,
  topN: number,
  params: Bm25Params = {},
  skip?: (tokenId: number) => boolean,
): Steps<Hit[]> {
  const stats = sumBm25Stats(parts.map((p) => segmentBm25Stats(p.index)));
  const query = bm25Query(queryTermIds, stats, params, skip);
  yield;
  const perSegment: SegmentHits[] = [];
  for (const p of parts) {
    perSegment.push(bm25SegmentSearch(p.segment, p.index, query, topN, { mask: p.mask }));
    yield;
  }
  return mergeHits(perSegment, topN);
}

/**
 * # Generation statistics (LB25 v1)
 *
 * A collection's BM25 statistics at one generation (SPEC 3.6: N, total length and df are sums
 * that can be kept per generation instead of recomputed per query), over its **live** documents:
 * written after each commit, delete, merge or re-compression (carried forward from the previous
 * generation's and corrected by the documents added and removed), so a BM25 query reads only its
 * own terms' postings. All integers little-endian:
 *
 * | offset | size | field |
 * |---|---|---|
 * | 0 | 4 | magic `LB25` |
 * | 4 | 2 | version, 1 |
 * | 6 | 2 | 0 |
 * | 8 | 4 | generation |
 * | 12 | 4 | documents N |
 * | 16 | 8 | total length (float64, an integer) |
 * | 24 | 4 | distinct terms U |
 * | 28 | 4 U | terms (i32, strictly increasing) |
 * | 28 + 4 U | 4 U | df (u32, each >= 1 and <= N) |
 * | 28 + 8 U | 4 | CRC32C of every byte before it |
 */
export const BM25_STATS_MAGIC = 'LB25';
export const BM25_STATS_VERSION = 1;

/** Serialises a generation's statistics (LB25 v1). */
export function serializeBm25Stats(stats: Bm25Stats, generation: number): Uint8Array {
  const U = stats.terms.length;
  const out = new Uint8Array(32 + 8 * U);
  const view = new DataView(out.buffer);
  for (let i = 0; i < 4; i++) out[i] = BM25_STATS_MAGIC.charCodeAt(i);
  view.setUint16(4, BM25_STATS_VERSION, true);
  view.setUint32(8, generation, true);
  view.setUint32(12, stats.documents, true);
  view.setFloat64(16, stats.totalLength, true);
  view.setUint32(24, U, true);
  for (let u = 0; u < U; u++) {
    view.setInt32(28 + 4 * u, stats.terms[u], true);
    view.setUint32(28 + 4 * U + 4 * u, stats.df[u], true);
  }
  view.setUint32(28 + 8 * U, crc32c(out.subarray(0, 28 + 8 * U)), true);
  return out;
}

/** Reads LB25 v1, checking its CRC and contents; a problem throws SegmentCorruptError naming `name`. */
export function deserializeBm25Stats(bytes: Uint8Array, name: string): { generation: number; stats: Bm25Stats } {
  const fail = (detail: string): never => {
    throw new SegmentCorruptError(name, 'bm25 statistics', detail);
  };
  if (bytes.length < 32) fail(`${bytes.length} bytes is shorter than the 32-byte minimum (truncated)`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (String.fromCharCode(bytes[0], bytes[1], bytes[2], bytes[3]) !== BM25_STATS_MAGIC) fail(`bad magic, expected ${BM25_STATS_MAGIC}`);
  const U = view.getUint32(24, true);
  if (bytes.length !== 32 + 8 * U) fail(`${bytes.length} bytes, ${U} terms need ${32 + 8 * U} (truncated)`);
  if (crc32c(bytes.subarray(0, 28 + 8 * U)) !== view.getUint32(28 + 8 * U, true)) fail('checksum mismatch (corrupted)');
  const version = view.getUint16(4, true);
  if (version !== BM25_STATS_VERSION) fail(`unsupported version ${version}`);
  const documents = view.getUint32(12, true);
  const totalLength = view.getFloat64(16, true);
  if (!Number.isInteger(totalLength) || totalLength < 0) fail(`total length ${totalLength} is not a non-negative integer`);
  const terms = new Int32Array(U);
  const df = new Uint32Array(U);
  for (let u = 0; u < U; u++) {
    terms[u] = view.getInt32(28 + 4 * u, true);
    df[u] = view.getUint32(28 + 4 * U + 4 * u, true);
    if (u > 0 && terms[u] <= terms[u - 1]) fail(`terms not strictly increasing at ${u}`);
    if (df[u] < 1 || df[u] > documents) fail(`df ${df[u]} of term ${terms[u]} is outside 1..${documents}`);
  }
  return { generation: view.getUint32(8, true), stats: { documents, totalLength, terms, df } };
}

/**
 * The statistics of some documents of one segment (`docs`: local indices, each once): their count,
 * summed lengths, and df per term from the segment's postings. O(postings) of the segment.
 */
export function documentsBm25Stats(index: { documents: number; bm25: Bm25Postings }, docs: ArrayLike<number>): Bm25Stats {
  const { terms, postingOffsets, postingDocs, docLengths } = index.bm25;
  const pick = new Uint8Array(index.documents);
  let totalLength = 0;
  let documents = 0;
  for (let i = 0; i < docs.length; i++) {
    const d = docs[i];
    if (d < 0 || d >= index.documents) throw new RangeError(`documentsBm25Stats: document ${d} is outside the segment's ${index.documents}`);
    if (pick[d]) continue;
    pick[d] = 1;
    documents++;
    totalLength += docLengths[d];
  }
  const keptTerms: number[] = [];
  const keptDf: number[] = [];
  for (let u = 0; u < terms.length; u++) {
    let n = 0;
    for (let p = postingOffsets[u]; p < postingOffsets[u + 1]; p++) n += pick[postingDocs[p]];
    if (n > 0) {
      keptTerms.push(terms[u]);
      keptDf.push(n);
    }
  }
  return { documents, totalLength, terms: Int32Array.from(keptTerms), df: Uint32Array.from(keptDf) };
}

/**
 * `base` plus the `add` statistics minus the `remove` ones (a generation's statistics carried to the
 * next). Throws RangeError when a count would go negative (the base does not hold what is removed).
 */
export function adjustBm25Stats(base: Bm25Stats, add: readonly Bm25Stats[], remove: readonly Bm25Stats[]): Bm25Stats {
  const df = new Map<number, number>();
  for (let u = 0; u < base.terms.length; u++) df.set(base.terms[u], base.df[u]);
  let documents = base.documents;
  let totalLength = base.totalLength;
  for (const [list, sign] of [[add, 1], [remove, -1]] as const) {
    for (const s of list) {
      documents += sign * s.documents;
      totalLength += sign * s.totalLength;
      for (let u = 0; u < s.terms.length; u++) df.set(s.terms[u], (df.get(s.terms[u]) ?? 0) + sign * s.df[u]);
    }
  }
  if (documents < 0 || totalLength < 0) throw new RangeError(`adjustBm25Stats: ${documents} documents and total length ${totalLength} after the removals`);
  const terms = Int32Array.from([...df.entries()].filter(([t, n]) => {
    if (n < 0) throw new RangeError(`adjustBm25Stats: term ${t} would have df ${n}`);
    return n > 0;
  }).map(([t]) => t)).sort();
  return { documents, totalLength, terms, df: Uint32Array.from(terms, (t) => df.get(t)!) };
}
