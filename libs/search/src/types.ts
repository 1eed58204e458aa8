import type { SegmentReader } from '@lateral/codec';

/**
 * What search reads from one segment. `searchSegment(reader, docBase)` builds it from
 * `@lateral/codec`'s `readSegment`; tests and other callers may build it by hand.
 *
 * Documents are addressed by their local index `doc` in [0, documents); token rows by their
 * index `row` in [0, T) (doc `i` owns rows tokenOffsets[i] .. tokenOffsets[i+1]-1).
 *
 * `docBase` makes the **global document key** `docBase + doc`, the tie-break of every merge
 * (score descending, then key ascending). The caller sets it to the number of documents in the
 * segments before this one in the generation's manifest order; then the same documents give
 * the same keys, hence the same order, however they are cut into segments.
 */
export interface SearchSegment {
  readonly name: string;
  readonly documents: number;
  readonly dims: number;
  readonly docBase: number;
  readonly docIds: readonly string[];
  /** documents + 1 offsets into the token rows. */
  readonly tokenOffsets: Uint32Array;
  /** T token ids (BM25 terms, explain). */
  readonly tokenIds: Int32Array;
  /**
   * T x dims decoded token vectors, row-major (decoded on first use, then kept). The whole
   * segment at once: building an index needs it; searches read `docTokens` ranges instead.
   */
  readonly tokens: Float32Array;
  /**
   * The decoded token vectors of documents [from, to): rows tokenOffsets[from] ..
   * tokenOffsets[to] - 1, row-major (row r at (r - tokenOffsets[from]) x dims). Searches read a
   * segment in such ranges, so a large segment is never decoded whole at once (issue 10: a
   * merged segment of 256 MiB of codes is over 1.5 GB of fp32); the result may be a view of the
   * kept whole decode and must not be written.
   */
  docTokens(from: number, to: number): Float32Array;
  /**
   * The first min(m, tokens_i) token vectors of each document i in [from, to), concatenated in
   * document order (ME-BERT reads only these): a segment whose codec codes tokens on their own
   * decodes only them.
   */
  docPrefixTokens(from: number, to: number, m: number): Float32Array;
  /**
   * Scores token rows straight from their codes (<q_i, decoded row r>, up to rounding), when the
   * segment's codec can (EDEN token layout): XTR then decodes nothing. null: read vectors.
   */
  rowScorer(q: Float32Array, n: number): RowScorer | null;
  /** T: the local document owning each token row (built on first use). */
  readonly tokenDoc: Uint32Array;
  /** documents x dims pooled, normalised vectors (`dense`), or null when the segment has none. */
  readonly docVectors: Float32Array | null;
  /** ME-BERT's prefix section (PrefixScan), or null when the segment has none (written before it, or its codec has none) or the source did not read it. */
  readonly prefixScan: PrefixScan | null;
  metadata(i: number): Record<string, unknown> | null;
}

/**
 * A segment's prefix section (docs/segment-format.md, `PFXV`; @lateral/codec's prefix-section.ts):
 * each document's first min(rows, tokens_i) token rows in the segment's own codes, the bytes its
 * code sections hold for them. ME-BERT with m <= rows scans it instead of the code sections and
 * scores or decodes the same bytes: the same answers, bit for bit.
 */
export interface PrefixScan {
  /** rows stored per document at most (the segment's prefixRows) */
  readonly rows: number;
  /** documents + 1: document i's rows are section rows [start[i], start[i + 1]) */
  readonly start: Uint32Array;
  /** Scores section rows (indexed by their place in the section) from their codes, as SearchSegment.rowScorer scores the same rows; null: decodePrefixes. */
  rowScorer(q: Float32Array, n: number): RowScorer | null;
  /** Documents [from, to): the first min(m, their stored rows) rows of each decoded, concatenated in document order (as docPrefixTokens). */
  decodePrefixes(from: number, to: number, m: number): Float32Array;
  /**
   * Optional: a PrefixScan over documents docs[0 .. count) of this one (ascending local ids; its
   * document k is docs[k]): their rows' bytes copied together, scored and decoded as here, so the
   * same values bit for bit. ME-BERT's IVF (mebert-ivf.ts) rescores its candidates through it.
   */
  gather?(docs: Uint32Array, count: number): PrefixScan;
  /**
   * Optional: a PrefixScan whose document k (k < count) holds this one's section rows
   * rows[start[k] .. start[k + 1]) (any rows of document docs[k], in that order): their bytes copied
   * together, for rowScorer (scores of the same bits). ME-BERT's IVF scores probed rows through it.
   */
  gatherRows?(docs: Uint32Array, start: Uint32Array, rows: Uint32Array, count: number): PrefixScan;
}

/** Query token i against token row r of one segment (SearchSegment.rowScorer). */
export interface RowScorer {
  score(i: number, row: number): number;
  /**
   * Optional, the same values as score: per document k in [from, to) with rows [start[k],
   * start[k + 1]), best[k - from] = max over its first min(m, rows) rows of score(i, r), the first
   * on ties (-Infinity without rows), arg[k - from] = that row's place in the document (0 when
   * none exceeds -Infinity). ME-BERT's prefix scan, a block of documents per call.
   */
  maxRows?(i: number, start: Uint32Array, from: number, to: number, m: number, best: Float64Array, arg: Int32Array): void;
}

/** Per document of a segment: non-zero = searchable. Filters and tombstones both end up here. */
export type DocMask = Uint8Array;

/** Per hit, per query token: the matched document token row (-1: none, e.g. XTR imputation) and its similarity. */
export interface HitExplain {
  rows: Int32Array;
  similarities: Float64Array;
}

/** One segment's best documents, ordered by score descending then local doc ascending. */
export interface SegmentHits {
  docBase: number;
  docs: Uint32Array;
  scores: Float64Array;
  /** aligned with docs when explain was asked for */
  explain?: HitExplain[];
}

/** A merged hit: `segment` is the position of its segment in the caller's list. */
export interface Hit {
  segment: number;
  doc: number;
  /** global document key, docBase + doc */
  key: number;
  score: number;
  explain?: HitExplain;
}

/**
 * The part of a SegmentReader that search needs, and optionally a range decode (documents
 * [from, to) -> their rows x dims): without one, ranges are views of `decodeAll()`, kept.
 */
export type SegmentSource = Pick<SegmentReader, 'name' | 'documents' | 'dims' | 'docIds' | 'tokenOffsets' | 'tokenIds' | 'docVectors' | 'metadata' | 'decodeAll'> &
  {
  /** ME-BERT's prefix section (SearchSegment.prefixScan); absent or null: none. */
  prefixScan?: PrefixScan | null;
  decodeDocs?(from: number, to: number): Float32Array;
  /** Documents [from, to), the first min(m, tokens_i) rows of each, concatenated (docPrefixTokens). */
  decodeDocPrefixes?(from: number, to: number, m: number): Float32Array;
  /** Scores rows from their codes (SearchSegment.rowScorer); absent or null: vectors are read. */
  rowScorer?(q: Float32Array, n: number): RowScorer | null;
};

/**
 * A SearchSegment over a segment reader. Token vectors are decoded once, on first use (BM25 and
 * filters never decode); `docBase` is the global key of local document 0 (see SearchSegment).
 */
export function searchSegment(source: SegmentSource, docBase = 0): SearchSegment {
  if (!Number.isSafeInteger(docBase) || docBase < 0) throw new RangeError(`docBase must be a non-negative safe integer, got ${docBase}`);
  let tokens: Float32Array | null = null;
  let tokenDoc: Uint32Array | null = null;
  return {
    name: source.name,
    documents: source.documents,
    dims: source.dims,
    docBase,
    docIds: source.docIds,
    tokenOffsets: source.tokenOffsets,
    // Read through: a source opened for a search that reads no token ids (BM25, dense) may not hold them.
    get tokenIds() {
      return source.tokenIds;
    },
    get tokens() {
      if (!tokens) {
        tokens = source.decodeAll();
        if (tokens.length !== source.tokenIds.length * source.dims) {
          throw new RangeError(`segment "${source.name}": decodeAll() gave ${tokens.length} values, expected T x dims = ${source.tokenIds.length * source.dims}`);
        }
      }
      return tokens;
    },
    docTokens(from: number, to: number): Float32Array {
      const off = source.tokenOffsets;
      if (!(Number.isInteger(from) && Number.isInteger(to) && 0 <= from && from <= to && to <= source.documents)) {
        throw new RangeError(`segment "${source.name}": documents [${from}, ${to}) are out of range (it has ${source.documents})`);
      }
      if (tokens || !source.decodeDocs) return this.tokens.subarray(off[from] * source.dims, off[to] * source.dims);
      const out = source.decodeDocs(from, to);
      if (out.length !== (off[to] - off[from]) * source.dims) {
        throw new RangeError(`segment "${source.name}": decodeDocs(${from}, ${to}) gave ${out.length} values, expected ${(off[to] - off[from]) * source.dims}`);
      }
      return out;
    },
    docPrefixTokens(from: number, to: number, m: number): Float32Array {
      const off = source.tokenOffsets;
      const d = source.dims;
      if (!(Number.isInteger(from) && Number.isInteger(to) && 0 <= from && from <= to && to <= source.documents)) {
        throw new RangeError(`segment "${source.name}": documents [${from}, ${to}) are out of range (it has ${source.documents})`);
      }
      if (!Number.isInteger(m) || m < 1) throw new RangeError(`segment "${source.name}": prefix length must be an integer >= 1, got ${m}`);
      let rows = 0;
      for (let i = from; i < to; i++) rows += Math.min(m, off[i + 1] - off[i]);
      if (!tokens && source.decodeDocPrefixes) {
        const out = source.decodeDocPrefixes(from, to, m);
        if (out.length !== rows * d) throw new RangeError(`segment "${source.name}": decodeDocPrefixes(${from}, ${to}, ${m}) gave ${out.length} values, expected ${rows * d}`);
        return out;
      }
      return docPrefixesOf(this.tokens, 0, off, d, from, to, m);
    },
    rowScorer: (q: Float32Array, n: number) => source.rowScorer?.(q, n) ?? null,
    get tokenDoc() {
      if (!tokenDoc) {
        // Kept per offsets array (a cached segment's, read by every search over it): the owners of
        // its T rows are not made again at each search's wrapper.
        tokenDoc = ownersOf.get(source.tokenOffsets) ?? tokenOwners(source.tokenOffsets);
        ownersOf.set(source.tokenOffsets, tokenDoc);
      }
      return tokenDoc;
    },
    docVectors: source.docVectors,
    prefixScan: source.prefixScan ?? null,
    metadata: (i: number) => source.metadata(i),
  };
}

/**
 * The first min(m, tokens_i) rows of each document in [from, to), concatenated, copied from
 * `rows`: decoded token rows (x dims) whose first is token row `rowBase` of the segment (0 for a
 * whole segment's decode, tokenOffsets[from] for a decode of the range alone).
 */
export function docPrefixesOf(rows: Float32Array, rowBase: number, tokenOffsets: Uint32Array, dims: number, from: number, to: number, m: number): Float32Array {
  return concatDocPrefixes(tokenOffsets, dims, from, to, m, (i, k) => {
    const start = (tokenOffsets[i] - rowBase) * dims;
    return rows.subarray(start, start + k * dims);
  });
}

/**
 * The first min(m, tokens_i) rows of each document in [from, to), concatenated: `prefix(i, k)`
 * gives document i's first k rows (k x dims values; not asked for when k is 0).
 */
export function concatDocPrefixes(tokenOffsets: Uint32Array, dims: number, from: number, to: number, m: number, prefix: (i: number, k: number) => Float32Array): Float32Array {
  let n = 0;
  for (let i = from; i < to; i++) n += Math.min(m, tokenOffsets[i + 1] - tokenOffsets[i]);
  const out = new Float32Array(n * dims);
  let at = 0;
  for (let i = from; i < to; i++) {
    const k = Math.min(m, tokenOffsets[i + 1] - tokenOffsets[i]);
    if (k === 0) continue;
    out.set(prefix(i, k), at * dims);
    at += k;
  }
  return out;
}

/** searchSegment's tokenDoc by its source's tokenOffsets (read only; gone with the offsets). */
const ownersOf = new WeakMap<Uint32Array, Uint32Array>();

/** tokenOffsets (documents + 1) -> T owners. */
export function tokenOwners(tokenOffsets: Uint32Array): Uint32Array {
  const docs = tokenOffsets.length - 1;
  const out = new Uint32Array(tokenOffsets[docs] ?? 0);
  for (let i = 0; i < docs; i++) out.fill(i, tokenOffsets[i], tokenOffsets[i + 1]);
  return out;
}

export function assertMask(fn: string, mask: DocMask | undefined, documents: number): void {
  if (mask && mask.length !== documents) throw new RangeError(`${fn}: mask has ${mask.length} entries, the segment has ${documents} documents`);
}

export function assertTopN(fn: string, name: string, n: number): void {
  if (!Number.isInteger(n) || n < 0) throw new RangeError(`${fn}: ${name} must be an integer >= 0, got ${n}`);
}

export function assertQuery(fn: string, q: Float32Array, n: number, d: number): void {
  if (!Number.isInteger(n) || n < 0) throw new RangeError(`${fn}: n must be an integer >= 0, got ${n}`);
  if (q.length !== n * d) throw new RangeError(`${fn}: q has length ${q.length}, expected n x d = ${n} x ${d} = ${n * d}`);
}
