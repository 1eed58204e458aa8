import type { Steps } from '@lateral/search';

/**
 * A function to await between bounded chunks of work: it yields the event loop (BullMQ's lock
 * renewal and, all-in-one, the API) once more than `everyMs` passed since the last yield.
 * setImmediate, so timers and I/O due meanwhile run before the work goes on.
 */
export function eventLoopYielder(everyMs = 50): () => Promise<void> {
  let lastYield = Date.now();
  return async () => {
    if (Date.now() - lastYield > everyMs) {
      await new Promise((r) => setImmediate(r));
      lastYield = Date.now();
    }
  };
}

/**
 * Runs a search's steps (@lateral/search `*Steps`: the synchronous function's work in bounded
 * slices, in the same order) awaiting `yieldEvery` between them: the same result as the
 * synchronous function, without holding the event loop for the whole search.
 */
export async function runStepsYielding<T>(steps: Steps<T>, yieldEvery: () => Promise<void>): Promise<T> {
  for (;;) {
    const r = steps.next();
    if (r.done) return r.value;
    await yieldEvery();
  }
}
