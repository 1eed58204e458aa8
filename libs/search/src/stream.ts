import { Bm25TermStats, bm25Query, bm25SegmentSearch, type Bm25Params, type Bm25Query, type Bm25Stats } from './bm25';
import { denseSegmentSearchSteps, mebertSegmentSearchSteps } from './dense';
import { exhaustiveSegmentSearchSteps } from './exhaustive';
import { mergeIntoHits } from './merge';
import type { SegmentIndex } from './segment-index';
import type { Steps } from './steps';
import type { DocMask, Hit, SearchSegment, SegmentHits } from './types';
import { xtrSegmentSearchSteps, type XtrProbe } from './xtr';
import { XtrWorkspace } from './xtr-aggregate';
import type { XtrMerged } from './xtr-merge';
import { XtrRunningMerge } from './xtr-running-merge';

/**
 * Segment-major search (issue 10, ARCHITECTURE "Serving"): the caller visits a generation's
 * segments one at a time, in either order, opens each (its rows or vectors and its index), hands
 * it to every query's pass and lets it go before the next, so a search holds a bounded window of
 * segments, never the collection. What a pass keeps between segments is bounded by the request:
 * the top-n hits so far (`mergeIntoHits`), XTR's n x k' global lists (`XtrRunningMerge`), BM25's
 * counts of the query's own terms (`Bm25TermStats`). The hits are those of the `*SearchSteps`
 * functions over the same segments, bit for bit (stream.spec.ts).
 *
 * A pass whose `needsStats` is true (BM25 and its hybrids) must see every segment's index through
 * `count` before the first `visit`: the caller makes a first pass over the indexes alone.
 */
export interface SegmentPass {
  readonly needsStats: boolean;
  /** false: the pass only counts indexes (a shard's statistics round); when no pass visits, no segment is opened. Default true. */
  readonly visits?: boolean;
  /** One segment's index for the statistics; `live` its live documents (undefined: all), counted alone. */
  count(index: SegmentIndex, live?: DocMask): void;
  /** Segment `s` (its index in the caller's list): each segment once, in any order (the hits are ordered by global keys, not by visits). */
  visit(s: number, part: PassSegment): Steps<void>;
  /** The hits (`segment` = the caller's index), after the last visit. */
  finish(segments: number): Steps<Hit[]>;
}

/** A segment as one pass reads it. */
export interface PassSegment {
  segment: SearchSegment;
  index: SegmentIndex;
  mask?: DocMask;
}

/** Every pass whose segments are independent: each segment's top-n, folded into a running top-n. */
class TopNPass implements SegmentPass {
  readonly needsStats: boolean = false;
  private hits: Hit[] = [];

  constructor(
    private readonly topN: number,
    private readonly search: (p: PassSegment) => Steps<SegmentHits>,
  ) {}

  count(): void {}

  *visit(s: number, p: PassSegment): Steps<void> {
    const hits = yield* this.search(p);
    this.hits = mergeIntoHits(this.hits, hits, s, this.topN);
  }

  *finish(): Steps<Hit[]> {
    return this.hits;
  }
}

/** Dense: the pooled vectors' inner products (`denseSearchSteps`). */
export function densePass(qVec: Float32Array, topN: number): SegmentPass {
  return new TopNPass(topN, (p) => denseSegmentSearchSteps(p.segment, qVec, topN, { mask: p.mask }));
}

/** ME-BERT: the pooled query against each document's first m vectors (`mebertSearchSteps`). */
export function mebertPass(qVec: Float32Array, mVecs: number, topN: number, opts: { explain?: boolean } = {}): SegmentPass {
  return new TopNPass(topN, (p) => mebertSegmentSearchSteps(p.segment, qVec, mVecs, topN, { mask: p.mask, explain: opts.explain }));
}

/** Exact MaxSim over every token row (`exhaustiveSearchSteps`). */
export function exhaustivePass(q: Float32Array, n: number, topN: number, opts: { explain?: boolean; normalize?: boolean } = {}): SegmentPass {
  return new TopNPass(topN, (p) => exhaustiveSegmentSearchSteps(p.segment, q, n, topN, { ...opts, mask: p.mask }));
}

/**
 * BM25 (`bm25SearchSteps`): the query's global statistics first, counted segment by segment, or
 * given (a shard's round 2: the statistics summed over every shard).
 */
class Bm25Pass implements SegmentPass {
  readonly needsStats: boolean;
  private readonly counter: Bm25TermStats;
  private query: Bm25Query | null = null;
  private hits: Hit[] = [];

  constructor(
    private readonly terms: ArrayLike<number>,
    private readonly topN: number,
    private readonly params: Bm25Params,
    private readonly skip: ((tokenId: number) => boolean) | undefined,
    stats: Bm25Stats | undefined,
  ) {
    this.counter = new Bm25TermStats(terms);
    this.needsStats = !stats;
    if (stats) this.query = bm25Query(terms, stats, params, skip);
  }

  count(index: SegmentIndex, live?: DocMask): void {
    if (this.query) throw new Error('bm25Pass: count after the first visit');
    this.counter.add(index, live);
  }

  *visit(s: number, p: PassSegment): Steps<void> {
    this.query ??= bm25Query(this.terms, this.counter.stats(), this.params, this.skip);
    this.hits = mergeIntoHits(this.hits, bm25SegmentSearch(p.segment, p.index, this.query, this.topN, { mask: p.mask }), s, this.topN);
  }

  *finish(): Steps<Hit[]> {
    return this.hits;
  }
}

export function bm25Pass(queryTermIds: ArrayLike<number>, topN: number, params: Bm25Params = {}, skip?: (tokenId: number) => boolean, stats?: Bm25Stats): SegmentPass {
  return new Bm25Pass(queryTermIds, topN, params, skip, stats);
}

/** BM25's statistics of some terms over the segments' indexes, and nothing else (a shard's round 1). */
export class Bm25StatsPass implements SegmentPass {
  readonly needsStats: boolean = true;
  readonly visits: boolean = false;
  private readonly counter: Bm25TermStats;

  constructor(termIds: ArrayLike<number>) {
    this.counter = new Bm25TermStats(termIds);
  }

  count(index: SegmentIndex, live?: DocMask): void {
    this.counter.add(index, live);
  }

  *visit(): Steps<void> {}

  *finish(): Steps<Hit[]> {
    return [];
  }

  stats(): Bm25Stats {
    return this.counter.stats();
  }
}

/**
 * XTR (`xtrSearchSteps` with a given probe): each segment's lists folded into the global lists,
 * aggregated at the end. A shard uses the same pass: `lists` are its round-1 answer (the merge of
 * its segments' lists), `finishCut` its round-2 hits under the cut over every shard.
 */
export class XtrPass implements SegmentPass {
  readonly needsStats: boolean = false;
  private readonly merge: XtrRunningMerge;

  constructor(
    private readonly q: Float32Array,
    private readonly n: number,
    private readonly probe: XtrProbe,
    private readonly opts: { kPrime: number; topN: number; explain?: boolean; normalize?: boolean },
  ) {
    this.merge = new XtrRunningMerge(n, opts.kPrime);
  }

  count(): void {}

  *visit(s: number, p: PassSegment): Steps<void> {
    this.merge.add(yield* xtrSegmentSearchSteps(p.segment, p.index, this.q, this.n, this.probe, { kPrime: this.opts.kPrime, mask: p.mask }), s);
  }

  *finish(segments: number): Steps<Hit[]> {
    return yield* this.finishCut(segments);
  }

  /** The merge of the segments' lists so far (xtrMerge over them). */
  lists(segments: number): XtrMerged {
    return this.merge.merged(segments);
  }

  /** The hits under a cut made elsewhere (XtrRunningMerge.aggregateSteps); none: this merge's own. */
  *finishCut(segments: number, cut?: { imputed: ArrayLike<number>; survivors: ArrayLike<number> }): Steps<Hit[]> {
    return yield* this.merge.aggregateSteps(segments, { topN: this.opts.topN, normalize: this.opts.normalize, explain: this.opts.explain, workspace: new XtrWorkspace() }, cut);
  }
}

export function xtrPass(q: Float32Array, n: number, probe: XtrProbe, opts: { kPrime: number; topN: number; explain?: boolean; normalize?: boolean }): XtrPass {
  if (probe.n !== n) throw new RangeError(`xtrPass: the probe is for ${probe.n} query tokens, the query has ${n}`);
  return new XtrPass(q, n, probe, opts);
}

/** Two passes over the same segments, their hits combined at the end (hybrid: a dense or token mode and BM25). */
class PairPass implements SegmentPass {
  readonly needsStats: boolean;

  constructor(
    private readonly a: SegmentPass,
    private readonly b: SegmentPass,
    private readonly combine: (a: Hit[], b: Hit[]) => Hit[],
  ) {
    this.needsStats = a.needsStats || b.needsStats;
  }

  count(index: SegmentIndex, live?: DocMask): void {
    if (this.a.needsStats) this.a.count(index, live);
    if (this.b.needsStats) this.b.count(index, live);
  }

  *visit(s: number, p: PassSegment): Steps<void> {
    yield* this.a.visit(s, p);
    yield* this.b.visit(s, p);
  }

  *finish(segments: number): Steps<Hit[]> {
    const a = yield* this.a.finish(segments);
    const b = yield* this.b.finish(segments);
    return this.combine(a, b);
  }
}

export function pairPass(a: SegmentPass, b: SegmentPass, combine: (a: Hit[], b: Hit[]) => Hit[]): SegmentPass {
  return new PairPass(a, b, combine);
}
