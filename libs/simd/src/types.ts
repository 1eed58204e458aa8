/** A query (n x d float32 rows) made ready for the MaxSim kernels; hold one per query, not per call. */
export interface PreparedQuery {
  readonly n: number;
  readonly d: number;
  /**
   * Per query token i, the running max over `rows` float32 rows of x from x[xo] (row-major, d):
   * best[i] and arg[i] = rowBase + j are replaced where row j's dot product is strictly greater
   * (ties keep the earlier row). best / arg must be initialised by the caller (e.g. -Infinity, -1).
   */
  maxima(x: Float32Array, xo: number, rows: number, best: Float64Array, arg: Int32Array | null, rowBase: number): void;
  /** out[i rows + j] = q_i . x_j for the `rows` rows of x from x[xo] (float32 out). */
  dots(x: Float32Array, xo: number, rows: number, out: Float32Array): void;
}

/** What WARP's table build reads (a query and a codec's decoded bucket values). */
export interface WarpTablesInput {
  /** n x dims */
  q: Float32Array;
  n: number;
  dims: number;
  bits: 2 | 4;
  /** dims x 2^bits */
  weights: Float32Array;
  /** ceil(dims bits / 8) */
  bytesPerToken: number;
}

/** One probed list of one segment as the resident WARP scan reads it (a WarpList of @lateral/search). */
export interface WarpResidentList {
  count: number;
  /** count local document ids, each < the segment's documents */
  docs: Uint16Array | Uint32Array;
  /** count x bpt packed codes */
  codes: Uint8Array;
}

/**
 * One segment's probed lists as the resident WARP scan reads them (a WarpListSource of
 * @lateral/search): for as long as the source lives, list(c) holds the same entries for the same
 * centroid (a layout reader keeps its views; a query's ranged reads are fixed for that query), so
 * the scan keeps, per source and centroid, where the list sits in the module.
 */
export interface WarpResidentSource {
  list(centroid: number): WarpResidentList;
  /**
   * What names the lists' content when it outlives this source (e.g. a segment layout's directory:
   * its lists are immutable, and each query's ranged reads make a new source over them): sources of
   * the same identity hold the same entries for every centroid, so the scan keeps where a list sits
   * per identity, and a list another source of it copied in is found without a list() call. Absent:
   * the source itself.
   */
  readonly identity?: object;
}

/**
 * WARP's per-query-token work (token maxima per document, their fold into the document sums) run
 * in the WebAssembly module over lists kept in its memory: a list's codes and ids are copied in
 * once, the first time a query probes it, not once per query (up to a fixed budget; over it the
 * kept lists are dropped and copied in again as probed). The documents' maxima, sums and candidates
 * of every segment live in the module for the whole scan. One scan holds that state at a time.
 */
export interface WarpResidentScan {
  /**
   * Query token i over its np probed centroids probes[po .. po + np) (scores cs[po ..], best
   * first) in every segment of the scan, in segment order then probe order (empty lists
   * skipped), its lookup tables built in the module from the scan's query rows (the warpTables
   * kernel's values for token i); mi: the token's imputed value; scored[s] += the entries of
   * segment s's probed lists. The same float64 operations, in the same order, as the engine's
   * JavaScript path. A list with fewer ids or code bytes than its count, or naming a document
   * past its segment's, throws a RangeError. false: the scan's state was lost (another user of
   * the module's memory since the last call); the caller starts over without it.
   */
  token(i: number, probes: ArrayLike<number>, cs: ArrayLike<number>, po: number, np: number, mi: number, scored: number[]): boolean;
  /**
   * Segment s's top k after the last token, in the module (jsWarpTop over its candidates, in the
   * order first reached, and their sums: the same pairs in the same order): each candidate scores (base + acc[doc]) / divide;
   * best first, ties to the lower document. Copies of k pairs at most; `candidates`: the segment's
   * candidate count. null: the scan's state was lost (as token()).
   */
  top(s: number, base: number, divide: number, k: number): { scores: Float64Array; ids: Uint32Array; candidates: number } | null;
  /** Releases the module's scan state (always call, also after an error). */
  end(): void;
}

/**
 * One document's rows for exactMaxsim (rows x w values): float32 values, IEEE binary16 bits (2
 * bytes a value, little-endian), or b-bit codes (a little-endian bit stream, row r from bit r w b)
 * standing for levels[code], each row's dot products multiplied by its scale.
 */
export type ExactRows =
  | { kind: 'f32'; rows: number; values: Float32Array }
  | { kind: 'f16'; rows: number; bytes: Uint8Array }
  | { kind: 'codes'; rows: number; codes: Uint8Array; scales: Float32Array };

/** The code values of ExactRows of kind 'codes' (one table for a call). */
export interface ExactLevels {
  bits: number;
  /** 2^bits float32 values */
  levels: Float32Array;
}

/**
 * What rowMaxima reads: one query token's EDEN table over 4-bit codes scored byte-wise (a code
 * byte's two coordinates at once) and the rows of a prefix section (ME-BERT's first rows).
 */
export interface RowMaximaInput {
  /** the query token's table: bpt x 256 float64 entries from table[to] (entry (b, v) at to + 256 b + v); never changed once made */
  table: Float64Array;
  to: number;
  /** code bytes of a row */
  bpt: number;
  /** the query token's <q, mean> */
  offset: number;
  /** 1 / sqrt(p) */
  inv: number;
  /** row r's code bytes at codes[r bpt ..] */
  codes: Uint8Array;
  /** row r's norm: float32 at norms[4 r ..] or IEEE binary16 bits at norms[2 r ..] (little-endian) */
  norms: Uint8Array;
  half: boolean;
  /** per document k, its rows [start[k], start[k + 1]) */
  start: Uint32Array;
}

/**
 * The numeric kernels of search and scoring. Every implementation computes the same float64
 * operations in the same order, so their results are equal bit for bit (libs/simd/src/kernels.spec.ts).
 */
export interface Kernels {
  /** 'wasm': the WebAssembly SIMD module; 'js': the JavaScript reference */
  readonly kind: 'wasm' | 'js';
  prepare(q: Float32Array, n: number, d: number): PreparedQuery;
  /** out[p - lo] = q[qo .. qo + d) . tokens[(list[p] - base) d ..] for p in [lo, hi) (float64) */
  scoreRows(q: Float32Array, qo: number, tokens: Float32Array, base: number, d: number, list: Uint32Array, lo: number, hi: number, out: Float64Array): void;
  /** WARP's n x bytesPerToken x 256 lookup tables into out */
  warpTables(t: WarpTablesInput, out: Float32Array): void;
  /**
   * out[e] = cs + the table sum of token e (e < count; bpt code bytes each, from byte co of codes)
   * against the tables from tables[to] (bpt x 256). words: the same bytes as u32 words, or null.
   */
  lookupSums(tables: Float32Array, to: number, codes: Uint8Array, words: Uint32Array | null, co: number, count: number, bpt: number, cs: number, out: Float64Array): void;
  /**
   * lookupSums over several code arrays in one call (each a whole number of bpt-byte entries),
   * their entries' sums written to out one after the other from out[0], with cs = -0 (so each
   * is exactly the table sum s0 + s1 + (s2 + s3), and cs + out[k] afterwards is lookupSums with
   * that cs, bit for bit). One call for many short lists (a query token's probed lists over every
   * segment), instead of one call per list.
   */
  lookupSumsMany(tables: Float32Array, to: number, parts: readonly Uint8Array[], bpt: number, out: Float64Array): void;
  /**
   * ME-BERT's scan of a prefix section from its codes: per document k in [from, to), its first
   * min(m, start[k + 1] - start[k]) rows r scored s_r = offset + norm_r inv S_r, S_r the float64
   * sum over code bytes b, in byte order, of table[to + 256 b + codes[r bpt + b]] (offset alone
   * for a zero or non-finite norm): EdenRowScorer.score's operations in its order. best[k - from]
   * = the largest s_r, the first on ties (-Infinity without rows), arg[k - from] = its place among
   * the document's rows (0 when no score exceeds -Infinity).
   */
  rowMaxima(t: RowMaximaInput, from: number, to: number, m: number, best: Float64Array, arg: Int32Array): void;
  /**
   * A resident WARP scan over segments of these sizes, masks and lists, for the query whose
   * tables `tables` describes (WebAssembly only; the query's rows and the codec's weights are
   * copied into the module once, each token's tables built there as it is scored), or null where
   * it does not apply (JavaScript kernels, another scan holds the state): the caller then runs the
   * engine's JavaScript path, with the same results.
   */
  warpResident?(documents: readonly number[], masks: readonly (Uint8Array | undefined)[], sources: readonly WarpResidentSource[], tables: WarpTablesInput): WarpResidentScan | null;
  /**
   * Exact MaxSim of one query (q: n x w float32) against each of `docs`, decoded and scored in the
   * WebAssembly module a block of rows at a time (WebAssembly only): out[k] = the float64 sum over
   * query tokens i, in order, of max over doc k's rows r of scale_r (q_i . x_r) (float32 dot
   * products, 4 lanes over the dimensions); -Infinity for a document without rows. Equal to MaxSim
   * over the decoded rows within float32 rounding (WARP's exact final stage).
   */
  exactMaxsim?(q: Float32Array, n: number, w: number, docs: readonly ExactRows[], out: Float64Array, codes?: ExactLevels): void;
}
