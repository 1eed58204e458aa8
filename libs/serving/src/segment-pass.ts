import { andMasks, docMask, type DocPredicate, type Hit, type SearchSegment, type SegmentPass } from '@lateral/search';
import { runStepsYielding } from './event-loop';
import { SegmentUnavailableError, type LazySearchPart, type SearchPlan } from './search-plan';

/** What one segment-major pass over a plan did. */
export interface SegmentPassReport {
  /** Segments that could not be read, by manifest position (the search names them and answers from the rest). */
  failed: Map<number, SegmentUnavailableError>;
  /** Time spent waiting for segments to open (reads and decodes not hidden behind the search of the one before). */
  loadMs: number;
  /** Most segments open at once (opened and not yet let go). */
  openPeak: number;
}

export interface SegmentPassOptions {
  /** The request's filter: a segment's mask is its live documents and the documents the filter keeps. */
  predicate?: DocPredicate;
  yieldEvery: () => Promise<void>;
  /** After each segment searched: (done, total). */
  onSegment?: (done: number, total: number) => Promise<void> | void;
}

type Settled<T> = { ok: true; value: T } | { ok: false; error: unknown };

/**
 * Runs the passes (one per query, @lateral/search's segment passes) over the plan's segments,
 * each segment opened once and handed to every pass, then let go; a walk goes in the plan's
 * order or in reverse as `plan.reversed()` says (the hits do not depend on it): at most
 * `plan.openAhead` segments are open at once (the one searched and those read ahead of it, so
 * reads overlap the search). Passes that need BM25's global statistics get a first walk over the
 * indexes alone. A segment that cannot be read (SegmentUnavailableError) is recorded and skipped;
 * any other error ends the search.
 */
export async function searchSegments(plan: SearchPlan, passes: readonly SegmentPass[], opts: SegmentPassOptions): Promise<SegmentPassReport> {
  const report: SegmentPassReport = { failed: new Map(), loadMs: 0, openPeak: 0 };
  if (passes.length === 0) return report;
  const fail = (part: LazySearchPart, err: unknown) => {
    if (!(err instanceof SegmentUnavailableError)) throw err;
    report.failed.set(part.position, err);
  };
  const counting = passes.filter((p) => p.needsStats);
  if (counting.length > 0) {
    // Live documents alone (tombstones and superseded copies left out), as the generation statistics count them.
    await inOrder(walk(plan, plan.parts), (part) => part.index(), plan.openAhead, report, fail, async (part, index) => {
      for (const p of counting) p.count(index, part.live);
    });
  }
  if (passes.every((p) => p.visits === false)) {
    plan.keep();
    return report;
  }
  // Each readable part with its index in the plan (what the passes and the hits call its segment).
  const readable = walk(
    plan,
    plan.parts.map((part, s) => ({ part, s })).filter(({ part }) => !report.failed.has(part.position)),
  );
  let done = 0;
  await inOrder(readable, ({ part }) => part.open(), plan.openAhead, report, ({ part }, err) => fail(part, err), async ({ s }, opened) => {
    const mask = andMasks(opened.live, opts.predicate ? docMask(opened.segment, opts.predicate) : undefined);
    const view = { segment: opened.segment, index: opened.index, mask };
    for (const p of passes) await runStepsYielding(p.visit(s, view), opts.yieldEvery);
    await opts.onSegment?.(++done, readable.length);
  });
  plan.keep();
  return report;
}

/** The items of a walk: in order, or reversed when the plan says this walk goes the other way. */
function walk<T>(plan: SearchPlan, items: readonly T[]): readonly T[] {
  return plan.reversed() ? [...items].reverse() : items;
}

/**
 * Opens items in order, up to `ahead` at once, and hands each to `use` as soon as it and every
 * item before it were used: what is open is the window, never the list.
 */
async function inOrder<P, T>(
  items: readonly P[],
  open: (item: P) => Promise<T>,
  ahead: number,
  report: SegmentPassReport,
  fail: (item: P, err: unknown) => void,
  use: (item: P, value: T) => Promise<void>,
): Promise<void> {
  const queue: Promise<Settled<T>>[] = [];
  let next = 0;
  let openNow = 0;
  const start = (item: P): Promise<Settled<T>> => {
    openNow++;
    report.openPeak = Math.max(report.openPeak, openNow);
    return open(item).then(
      (value): Settled<T> => ({ ok: true, value }),
      (error: unknown): Settled<T> => ({ ok: false, error }),
    );
  };
  try {
    for (let i = 0; i < items.length; i++) {
      while (next < items.length && next < i + ahead) queue.push(start(items[next++]));
      const t = Date.now();
      const got = await queue.shift()!;
      report.loadMs += Date.now() - t;
      try {
        if (got.ok) await use(items[i], got.value);
        else fail(items[i], got.error);
      } finally {
        openNow--;
      }
    }
  } finally {
    // Reads already started are awaited (settled, never rejected) so none outlives the search unobserved.
    await Promise.all(queue);
  }
}

/**
 * The segments the hits name (by their index in the plan), with their ids, and their token ids
 * when explaining: read again after the pass let them go, a few segments (their heads where the
 * search reads heads).
 */
export async function hitSegments(plan: SearchPlan, hits: readonly Hit[], explain: boolean): Promise<{ segment: Pick<SearchSegment, 'docIds' | 'tokenIds'> }[]> {
  const out: { segment: Pick<SearchSegment, 'docIds' | 'tokenIds'> }[] = [];
  for (const s of new Set(hits.map((h) => h.segment))) {
    const part = plan.parts[s];
    out[s] = { segment: explain ? (await part.open()).segment : { docIds: await part.docIds(), tokenIds: new Int32Array(0) } };
  }
  return out;
}
