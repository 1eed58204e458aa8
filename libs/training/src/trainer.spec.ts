import { describe, expect, it } from 'vitest';
import { liteForward, litePaddedSimilarity, type KnrmWeights, type LiteWeights } from '@lateral/scoring';
import { MIN_TRAIN_QUERIES, TooFewQueriesError, TrainingDivergedError, ndcg10, scoreWithWeights, trainHead, type TokenSource } from './index';
import { synthetic } from './synthetic';

const tiny = { L1: 4, L2: 12, m1: 8, m2: 16 };

describe('trainHead (TF.js)', () => {
  it('LITE: reproducible with a seed, the exported weights are the reference scorer of the trained graph, loss falls', async () => {
    const { src, queries } = synthetic(16);
    const warm: number[] = [];
    const opts = { head: 'lite' as const, sizes: tiny, seed: 7, maxEpochs: 4, patience: 4, learningRate: 3e-3, distillSteps: 12, backend: 'cpu' as const };
    const a = await trainHead(src, queries, { ...opts, onProgress: (p) => void (p.epoch === 0 && warm.push(p.step)) });
    const b = await trainHead(src, queries, opts);
    // the MaxSim warm start ran first (progress epoch 0, steps 1..12) and is reported
    expect(warm).toEqual(Array.from({ length: 12 }, (_, i) => i + 1));
    expect(a.warmStart).toMatchObject({ steps: 12 });
    expect(Number.isFinite(a.warmStart!.loss)).toBe(true);
    expect(a.warmStart).toEqual({ ...b.warmStart, seconds: a.warmStart!.seconds });
    const wa = a.weights as LiteWeights;
    expect(Array.from(wa.W1)).toEqual(Array.from((b.weights as LiteWeights).W1));
    expect(a.curve.map((c) => c.trainLoss)).toEqual(b.curve.map((c) => c.trainLoss));
    expect(a.curve[a.curve.length - 1].trainLoss).toBeLessThan(a.curve[0].trainLoss);
    expect(a.split.val.length).toBe(3);
    expect(a.heldOut.queries).toBe(3);
    // The held-out nDCG@10 the trainer reports is what the float64 reference gives with the exported weights.
    let sum = 0;
    for (const id of a.split.val) {
      const q = queries.find((x) => x.id === id)!;
      const s = q.candidates.map((c) => {
        const doc = src.doc(c);
        return liteForward(litePaddedSimilarity(q.vectors, q.length, doc.vectors, doc.length, src.dims, wa.L1, wa.L2), wa);
      });
      sum += ndcg10(s, q.grades);
    }
    expect(sum / a.split.val.length).toBeCloseTo(a.heldOut.ndcg10, 5);
  }, 240_000); // two training runs on the cpu backend: 25 s on this machine when quiet, past 60 s under load

  it('residual LITE starts exactly at its first stage (epoch 0), and learns past a random first stage', async () => {
    const { src, queries } = synthetic(16);
    // learning rate 0: the weights stay at their start, a zero correction on alpha x first stage
    const still = await trainHead(src, queries, { head: 'lite', residual: true, sizes: tiny, seed: 5, maxEpochs: 1, learningRate: 0, backend: 'cpu' });
    expect(still.residual).toBe(true);
    expect(still.warmStart).toBeNull(); // no distillation: the start is the first stage itself
    expect(still.bestEpoch).toBe(0);
    const w0 = still.weights as LiteWeights;
    expect(Array.from(w0.w).every((v) => v === 0)).toBe(true);
    expect(w0.maxsimWeight).toBeGreaterThan(0);
    expect(still.heldOut.ndcg10).toBeCloseTo(still.heldOut.maxsimNdcg10, 9);
    const q = queries[0];
    const s0 = await scoreWithWeights(src, q, q.candidates, w0, 'cpu');
    s0.forEach((v, i) => expect(v).toBeCloseTo(w0.maxsimWeight! * q.firstStage[i], 5));

    // The synthetic first stage is random; the correction has to learn relevance from the tokens.
    const res = await trainHead(src, queries, { head: 'lite', residual: true, sizes: tiny, seed: 5, maxEpochs: 8, patience: 8, learningRate: 3e-3, backend: 'cpu' });
    expect(res.bestEpoch).toBeGreaterThan(0);
    expect(res.heldOut.ndcg10).toBeGreaterThan(res.heldOut.maxsimNdcg10 + 0.05);
    const w = res.weights as LiteWeights;
    expect(Number.isFinite(w.maxsimWeight)).toBe(true);
    expect(Array.from(w.w).some((v) => v !== 0)).toBe(true);
    // residual applies to LITE only
    await expect(trainHead(src, queries, { head: 'knrm', residual: true, seed: 1, backend: 'cpu' })).rejects.toThrow(/LITE only/);
    // a candidate with no token (MaxSim -Infinity) does not make training diverge
    const withEmpty = queries.map((q) => ({ ...q, firstStage: Float32Array.from(q.firstStage, (v, i) => (i === 3 ? -Infinity : v)) }));
    const safe = await trainHead(src, withEmpty, { head: 'lite', residual: true, sizes: tiny, seed: 5, maxEpochs: 2, patience: 2, learningRate: 3e-3, backend: 'cpu' });
    expect(safe.curve.every((c) => Number.isFinite(c.trainLoss))).toBe(true);
  }, 240_000);

  it('K-NRM learns to rank noisy copies of query tokens first on held-out queries', async () => {
    const { src, queries } = synthetic(20);
    const res = await trainHead(src, queries, { head: 'knrm', seed: 1, maxEpochs: 15, patience: 15, learningRate: 1e-2, backend: 'cpu' });
    const w = res.weights as KnrmWeights;
    expect(w.w).toHaveLength(11);
    expect(res.heldOut.ndcg10).toBeGreaterThan(0.9);
    // The first stage here is random: the learned head is what ranks.
    expect(res.heldOut.ndcg10).toBeGreaterThan(res.heldOut.maxsimNdcg10);
  });

  it('a non-finite loss stops training with the epoch and the last finite loss', async () => {
    const { src, queries } = synthetic(12);
    const bad: TokenSource = {
      dims: src.dims,
      doc: (i) => (i % 12 === 0 ? { vectors: new Float32Array(src.doc(i).vectors.length).fill(NaN), length: src.doc(i).length } : src.doc(i)),
    };
    const err = await trainHead(bad, queries, { head: 'lite', sizes: tiny, seed: 2, maxEpochs: 3, negatives: 11, positivesPerQuery: 3, groupsPerStep: 1, distillSteps: 0, backend: 'cpu' }).catch((e) => e);
    expect(err).toBeInstanceOf(TrainingDivergedError);
    expect(err.epoch).toBe(1);
    expect(err.message).toMatch(/epoch 1; last finite loss/);
  });

  it(`refuses fewer than ${MIN_TRAIN_QUERIES} judged queries, naming the minimum`, async () => {
    const { src, queries } = synthetic(MIN_TRAIN_QUERIES - 1);
    const err = await trainHead(src, queries, { head: 'knrm', seed: 1, backend: 'cpu' }).catch((e) => e);
    expect(err).toBeInstanceOf(TooFewQueriesError);
    expect(err.message).toContain(`at least ${MIN_TRAIN_QUERIES}`);
  });
});
