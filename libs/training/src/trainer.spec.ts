import { describe, expect, it } from 'vitest';
import { liteForward, litePaddedSimilarity, type KnrmWeights, type LiteWeights } from '@lateral/scoring';
import { MIN_TRAIN_QUERIES, TooFewQueriesError, TrainingDivergedError, ndcg10, trainHead, type TokenSource } from './index';
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
