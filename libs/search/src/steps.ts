/**
 * Search over many segments as a sequence of bounded steps (issue 10: serving at scale). A
 * `*Steps` function is a generator that does the same work as its synchronous counterpart, in
 * the same order, and yields between slices of it (after each segment, and within a segment
 * after a bounded slice of documents or query tokens); its return value is the result. The
 * library stays pure and synchronous: `runSteps` runs a generator to its end (what the
 * synchronous functions do), and a caller that must keep its event loop responsive (a worker
 * whose job lock is renewed on a timer) awaits between steps instead. Either way the result is
 * the same, bit for bit.
 */
export type Steps<T> = Generator<void, T, undefined>;

/** Runs the steps to their end, synchronously: the result. */
export function runSteps<T>(steps: Steps<T>): T {
  for (;;) {
    const r = steps.next();
    if (r.done) return r.value;
  }
}

/** Documents scored per step by the exhaustive and ME-BERT scans (a multiple of 4). */
export const DOC_SLICE = 256;
/** Documents scored per step by the dense scan (a multiple of 4; one inner product each). */
export const DENSE_DOC_SLICE = 8192;
/**
 * Token rows XTR reads from a segment at a time (a range of whole documents, so at least one
 * document's rows): its decoded vectors are the search's working memory, 32 MiB at d = 128,
 * however large the segment.
 */
export const XTR_CHUNK_ROWS = 65_536;
