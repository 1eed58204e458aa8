import { monitorEventLoopDelay } from 'node:perf_hooks';
import { describe, expect, it } from 'vitest';
import { LITE_SMALL, type LiteWeights } from '@lateral/scoring';
import { synthetic } from './synthetic';
import { trainHeadInThread } from './thread';
import { TooFewQueriesError, TrainingDivergedError, trainHead, type TokenSource, type TrainOptions } from './trainer';

/**
 * Training runs in a worker thread: while a LITE head trains (LITE small at 256 dims, 16 groups a
 * step, a MaxSim warm start and one ranking epoch: several seconds), this thread's event loop keeps
 * turning. On the main thread (trainHead called directly) one TF.js step holds it for its whole
 * length (hundreds of ms to seconds each, under load).
 */
const BOUND_MS = 500;
const options: TrainOptions = { head: 'lite', sizes: { ...LITE_SMALL }, seed: 5, maxEpochs: 1, positivesPerQuery: 2, groupsPerStep: 16, distillSteps: 12, distillBatch: 8, distillList: 8, backend: 'wasm' };

async function maxDelayWhile<T>(run: () => Promise<T>): Promise<{ result: T; maxMs: number }> {
  const h = monitorEventLoopDelay({ resolution: 10 });
  h.enable();
  try {
    const result = await run();
    return { result, maxMs: h.max / 1e6 };
  } finally {
    h.disable();
  }
}

describe('training in a worker thread', () => {
  it(`keeps the event loop turning (max delay < ${BOUND_MS} ms) while LITE trains, with the same result as the direct call`, { timeout: 600_000 }, async () => {
    const { src, queries } = synthetic(16, 256);
    const progress: { epoch: number; step: number; loss: number; etaSeconds: number }[] = [];
    const { result, maxMs } = await maxDelayWhile(() => trainHeadInThread(src, queries, { ...options, onProgress: (p) => void progress.push(p) }));
    console.log(`training thread: max event-loop delay ${maxMs.toFixed(1)} ms over ${result.seconds.toFixed(1)} s of training`);
    expect(result.seconds).toBeGreaterThan(1); // long enough for the bound to mean something
    expect(maxMs).toBeLessThan(BOUND_MS);
    // progress came back: the warm start's steps (epoch 0) and the epoch's, with finite losses and an ETA
    expect(progress.filter((p) => p.epoch === 0).map((p) => p.step)).toEqual(Array.from({ length: 12 }, (_, i) => i + 1));
    expect(progress.some((p) => p.epoch === 1)).toBe(true);
    for (const p of progress) expect(Number.isFinite(p.loss) && p.etaSeconds >= 0).toBe(true);
    expect(result.curve.length).toBe(1);
    // the thread runs the same trainer: the same seed on the same backend gives the same weights
    if (process.env.TRAIN_THREAD_COMPARE_MAIN === '1') {
      const direct = await maxDelayWhile(() => trainHead(src, queries, options));
      console.log(`main thread: max event-loop delay ${direct.maxMs.toFixed(1)} ms over ${direct.result.seconds.toFixed(1)} s of training`);
      expect(Array.from((result.weights as LiteWeights).W1)).toEqual(Array.from((direct.result.weights as LiteWeights).W1));
    }
  });

  it('propagates the trainer errors with their class and message, and stops when onProgress throws', { timeout: 300_000 }, async () => {
    const { src, queries } = synthetic(3, 16);
    const err = await trainHeadInThread(src, queries, { head: 'knrm', seed: 1 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TooFewQueriesError);
    expect((err as Error).message).toMatch(/at least \d+ judged queries/);

    // a NaN loss: TrainingDivergedError with its epoch and last finite loss, as from the direct call
    const nan = synthetic(12);
    const bad: TokenSource = {
      dims: nan.src.dims,
      doc: (i) => (i % 12 === 0 ? { vectors: new Float32Array(nan.src.doc(i).vectors.length).fill(NaN), length: nan.src.doc(i).length } : nan.src.doc(i)),
    };
    const div = await trainHeadInThread(bad, nan.queries, { head: 'lite', sizes: { L1: 8, L2: 16, m1: 8, m2: 8 }, seed: 2, maxEpochs: 3, negatives: 11, positivesPerQuery: 3, groupsPerStep: 1, distillSteps: 0 }).catch((e: unknown) => e);
    expect(div).toBeInstanceOf(TrainingDivergedError);
    expect((div as TrainingDivergedError).epoch).toBe(1);
    expect((div as Error).message).toMatch(/^training diverged: non-finite loss in epoch 1; last finite loss/);

    const big = synthetic(12, 16);
    let calls = 0;
    const stop = await trainHeadInThread(big.src, big.queries, {
      head: 'knrm', seed: 1, maxEpochs: 50, patience: 50,
      onProgress: () => {
        if (++calls === 3) throw new Error('cancelled by the caller');
      },
    }).catch((e: unknown) => e);
    expect((stop as Error).message).toBe('cancelled by the caller');
    expect(calls).toBe(3);
  });
});
