import { PermanentJobError, type SegmentRef, type UnavailableSegment } from '@lateral/shared';
import type { DocMask, SearchSegment, SegmentIndex } from '@lateral/search';

/*
 * What the segment cache hands a search and those who watch it: the plan of a generation's
 * segments (opened one at a time by segment-pass.ts), what a search reads of each, and the
 * segments that cannot be read (segment-health.ts records them).
 */

/** An unavailable segment of one generation, as the health listener hears of it. */
export interface UnavailableEvent extends UnavailableSegment {
  tenantId: string;
  collectionId: string;
  generation: number;
}

export interface SegmentHealthListener {
  /** An object of the generation failed its checksum or decoding, or is missing (once per detection). */
  unavailable(e: UnavailableEvent): void;
  /** An object that was unavailable read again. */
  recovered(e: { tenantId: string; collectionId: string; key: string; object: 'segment' | 'index' }): void;
}

/**
 * A segment or its search index that cannot be read: it failed its checksum or decoding, or is
 * missing from S3. Not transient (never retried as such); re-rank and search answer from the
 * other segments and name it, other users of the cache (training) fail with it.
 */
export class SegmentUnavailableError extends PermanentJobError {
  constructor(
    readonly key: string,
    readonly object: 'segment' | 'index',
    readonly segment: string,
    readonly reason: string,
  ) {
    super(reason);
  }
}

/**
 * What a search reads of each segment beyond its index, ids and token offsets. When re-ranks read
 * ranges (SegmentCache reads the segments' local copies), a search that needs no metadata and no
 * token ids is served without loading whole segments: with `rows: 'none'` (BM25, dense) from
 * heads and pooled vectors (BM25 alone: heads), with `rows: 'scores'` (XTR, ME-BERT) from heads and the code and norm
 * sections alone (two positioned reads, no ids, metadata or token ids parsed) where the segment
 * can be scored from its codes.
 */
export interface SearchNeeds {
  /** Token rows: none, their inner products with query vectors (from the codes where the segment can), or their vectors (exhaustive). */
  rows: 'none' | 'scores' | 'vectors';
  /** Token ids (explain names the matched tokens). */
  tokenIds: boolean;
  /** Metadata (filters). */
  metadata: boolean;
  /** With `rows: 'none'`: the pooled document vectors (dense); BM25 reads only heads and indexes. */
  pooled: boolean;
  /**
   * ME-BERT's m: a segment whose prefix section holds at least m rows per document is read as its
   * head and that section (not its code sections); others as `rows` says. Absent or 0: not read.
   */
  prefixRows?: number;
}

export const ALL_SEARCH_NEEDS: SearchNeeds = { rows: 'vectors', tokenIds: true, metadata: true, pooled: true };

/** The generation's searchable segments, and those that could not be read. */
export interface SearchGeneration {
  parts: SearchPart[];
  unavailable: UnavailableSegment[];
}

/**
 * A segment of a generation as a segment-major search meets it (SegmentCache.searchPlan): known
 * by its place, read only when opened.
 */
export interface LazySearchPart {
  /** Its index in the manifest's segments. */
  position: number;
  ref: SegmentRef;
  /** Live documents (undefined: all). */
  live: DocMask | undefined;
  /** Its search index alone (BM25's statistics pass). */
  index(): Promise<SegmentIndex>;
  /** Its source as the search's needs read it, and its index. */
  open(): Promise<SearchPart>;
  /** Its document ids in order (from its head where the search reads heads). */
  docIds(): Promise<readonly string[]>;
}

/** A generation's segments for a segment-major search, and how to name those that could not be read. */
export interface SearchPlan {
  parts: LazySearchPart[];
  /** How many segments a search keeps open at once (the one it searches and those read ahead): the load concurrency, at least 2. */
  openAhead: number;
  /** The unavailable segments: those the search failed to read ([manifest position, error]) and those whose ids are not known. */
  unavailable(failed: Iterable<[number, SegmentUnavailableError]>): UnavailableSegment[];
  /**
   * Whether the next walk over the parts goes in reverse (asked once per walk). A walk over more
   * segments than the cache holds leaves the last ones it read in the cache; an LRU walked the
   * same way again evicts each of them just before reaching it (no hit at all), walked the other
   * way it starts with them.
   */
  reversed(): boolean;
  /**
   * Keeps the generation's id table as the most recently used entry (put back if the walk evicted
   * it): a walk over more than the cache holds would otherwise leave it to be evicted, and the
   * next search or re-rank of the generation would build it again from every segment's ids.
   */
  keep(): void;
}

/** A segment of a generation, ready for search: its index, its place in the generation, its live documents. */
export interface SearchPart {
  ref: SegmentRef;
  segment: SearchSegment;
  index: SegmentIndex;
  /** Live documents (undefined: all): tombstones and superseded copies are 0. */
  live: DocMask | undefined;
}
