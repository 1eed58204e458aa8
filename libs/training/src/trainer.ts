/**
 * Fits a LITE or K-NRM head from judged queries over a collection's stored token vectors (the
 * encoder stays frozen), with TF.js:
 * - split: the judged queries (those with a positive) are shuffled with the seed; `valFraction` of
 *   them are held out for early stopping and the held-out figures, the rest train;
 * - each epoch, every training query gives up to `positivesPerQuery` (positive, negatives) groups:
 *   a judged positive (grade > 0) against `negatives` documents of grade 0, each drawn with
 *   probability 1/2 from the query's `hardPool` best first-stage (MaxSim) non-positive candidates
 *   (hard negatives) and otherwise from all its non-positive candidates;
 * - LITE warm start (`distillSteps`, on by default): before the ranking epochs, the head is fitted
 *   to MaxSim's scores on the training queries' candidate lists (MSE of the per-list centred scores,
 *   MaxSim divided by its within-list deviation): a randomly initialised LITE starts as a poor
 *   random ranker, and a few hundred ranking steps on a few hundred judged queries do not get it
 *   back to MaxSim; distilled first, it starts near MaxSim's ranking and the judgments move it from
 *   there. The architecture is unchanged (SPEC section 1, no residual): only the starting point is;
 * - loss: pairwise logistic (RankNet), mean of softplus(s_neg - s_pos), plus `distillWeight` times
 *   the same MaxSim-distillation term on the step's lists (keeps a small-data head close to the
 *   first stage it re-ranks; 0 for plain RankNet); Adam;
 * - after each epoch: nDCG@10 of the held-out queries re-ranking their candidate lists; the best
 *   epoch's weights are kept and training stops after `patience` epochs without improvement;
 * - a non-finite loss stops with `TrainingDivergedError` (the epoch and the last finite loss).
 * Everything random comes from the seed (weights, split, sampling), so a run is reproducible on
 * one backend. Steps are small and the loop awaits between them, so a worker's event loop (lock
 * renewal, other queues) keeps running.
 */
import { MIN_TRAIN_QUERIES } from '@lateral/shared';
import { KNRM_MU, dcgAt, idealDcg, type KnrmWeights, type LiteWeights } from '@lateral/scoring';
import { KnrmTf, LiteTf, knrmPhiTf, padRowsTo, type LiteSizes } from './heads';
import { initTf, rng, shuffled, tf, type TfBackend } from './tf';

export interface TokenSource {
  dims: number;
  /** Token vectors (length x dims) of document `i`. */
  doc(i: number): { vectors: Float32Array; length: number };
}

export interface TrainingQuery {
  id: string;
  /** query token vectors (length x dims), as the re-rank path encodes them */
  vectors: Float32Array;
  length: number;
  /** candidate documents (indices into the TokenSource): judged ones and the first stage's best */
  candidates: number[];
  /** per candidate: the judged grade, 0 for judged non-relevant or unjudged */
  grades: number[];
  /** per candidate: the first-stage (MaxSim) score, for hard negatives and the baseline */
  firstStage: Float32Array;
  /**
   * Positions (into `candidates`) of the first stage's top `depth`: the list a re-rank would get,
   * on which held-out queries are scored (default: every candidate). Judged documents the first
   * stage did not retrieve are trained on but never injected into what is evaluated.
   */
  rerank?: number[];
  /** every positive judged grade of the query (the ideal DCG), retrieved or not (default: the candidates' grades) */
  idealGrades?: number[];
}

export type HeadKind = 'lite' | 'knrm';

export interface TrainOptions {
  head: HeadKind;
  /** LITE only */
  sizes?: LiteSizes;
  /**
   * LITE only: train a residual on MaxSim, score = alpha x MaxSim + LITE (alpha learned, from 1;
   * LITE's final layer from 0, so training starts exactly at MaxSim's ranking, which is also the
   * epoch-0 candidate of early stopping). No warm start and no distillation term (defaults 0);
   * learning rate 1e-4 unless given.
   */
  residual?: boolean;
  seed: number;
  maxEpochs?: number;
  patience?: number;
  learningRate?: number;
  negatives?: number;
  hardPool?: number;
  positivesPerQuery?: number;
  /** (positive, negatives) groups per Adam step */
  groupsPerStep?: number;
  /** LITE: Adam steps fitting MaxSim's scores before the ranking epochs (0: random start); default 300 */
  distillSteps?: number;
  /** candidate lists per distillation step (of `distillList` documents each) */
  distillBatch?: number;
  distillList?: number;
  /** weight of the MaxSim-distillation term beside the ranking loss (LITE default 0.5, K-NRM 0) */
  distillWeight?: number;
  /** learning rate of the warm start (default: learningRate x 3) */
  distillLearningRate?: number;
  valFraction?: number;
  /** explicit split (ids); overrides valFraction (cross-validation) */
  split?: { train: string[]; val: string[] };
  backend?: TfBackend;
  /** called after every step and epoch; throw (e.g. a cancellation) to stop */
  onProgress?: (p: TrainProgress) => Promise<void> | void;
}

/** Where a training run is (a head's here, AESI's in aesi.ts), reported after each step; `E` an epoch's record. */
export interface EpochProgress<E> {
  epoch: number;
  maxEpochs: number;
  step: number;
  stepsPerEpoch: number;
  /** mean loss of this epoch so far */
  loss: number;
  etaSeconds: number;
  curve: E[];
}

export type TrainProgress = EpochProgress<EpochRecord>;

export interface EpochRecord {
  epoch: number;
  trainLoss: number;
  valNdcg10: number;
  seconds: number;
}

export interface TrainResult {
  head: HeadKind;
  /** LITE trained as a residual on MaxSim (the weights carry maxsimWeight) */
  residual: boolean;
  /** the MaxSim warm start (LITE): steps, final distillation loss, held-out nDCG@10 after it; null when off */
  warmStart: { steps: number; loss: number; valNdcg10: number; seconds: number } | null;
  weights: LiteWeights | KnrmWeights;
  bestEpoch: number;
  curve: EpochRecord[];
  heldOut: { queries: number; ndcg10: number; maxsimNdcg10: number };
  split: { train: string[]; val: string[] };
  data: { queries: number; trainQueries: number; valQueries: number; positives: number; candidates: number; groupsPerEpoch: number };
  options: Required<Omit<TrainOptions, 'onProgress' | 'split' | 'sizes' | 'backend' | 'distillLearningRate' | 'residual'>> & { sizes?: LiteSizes; backend: TfBackend; distillLearningRate: number; residual: boolean };
  seconds: number;
}

export { MIN_TRAIN_QUERIES };

export class TrainingDivergedError extends Error {
  override name = 'TrainingDivergedError';
  constructor(readonly epoch: number, readonly lastFiniteLoss: number | null) {
    super(`training diverged: non-finite loss in epoch ${epoch}; last finite loss ${lastFiniteLoss === null ? 'none' : lastFiniteLoss.toPrecision(6)}`);
  }
}
export class TooFewQueriesError extends Error {
  override name = 'TooFewQueriesError';
}

/** nDCG@10, linear gain, ideal over the judged positives given (trec_eval's ndcg_cut_10 over the list; @lateral/scoring's nDCG). */
export function ndcg10(scores: ArrayLike<number>, grades: readonly number[], idealGrades: readonly number[] = grades): number {
  const idcg = idealDcg(idealGrades, 10);
  if (idcg === 0) return 0;
  const order = Array.from(grades, (_, i) => i).sort((a, b) => scores[b] - scores[a] || a - b);
  return dcgAt(order, new Map(grades.map((g, i) => [i, g])), 10) / idcg;
}

const yieldLoop = () => new Promise<void>((r) => setImmediate(r));

/** The model behind a head: scores candidates of one query, and a batched training forward. */
interface Head {
  variables(): tf.Variable[];
  /** scores of the candidates `cands` of query `q` (no gradient) */
  scoreQuery(q: TrainingQuery, cands: number[]): Promise<Float32Array>;
  /** training forward: groups of (query, docs) -> scores [groups * (1 + negatives)] */
  forward(groups: { q: TrainingQuery; docs: number[] }[]): tf.Tensor1D;
  export(): Promise<LiteWeights | KnrmWeights>;
  load(w: LiteWeights | KnrmWeights): void;
  dispose(): void;
}

/**
 * Each (query, candidate)'s first-stage MaxSim, the base of a residual head (from `q.firstStage`).
 * A document with no token has MaxSim -Infinity (it ranks last); in training it takes the query's
 * lowest finite score instead, since -Infinity in the graph would make the gradients NaN.
 */
function baseScores(q: TrainingQuery, docs: number[]): Float32Array {
  const at = new Map(q.candidates.map((c, i) => [c, i]));
  let floor = Infinity;
  for (const v of q.firstStage) if (Number.isFinite(v) && v < floor) floor = v;
  return Float32Array.from(docs, (doc) => {
    const i = at.get(doc);
    if (i === undefined) throw new RangeError(`residual LITE: document ${doc} is not a candidate of query ${q.id}, so it has no first-stage MaxSim`);
    const v = q.firstStage[i];
    return Number.isFinite(v) ? v : Number.isFinite(floor) ? floor : 0;
  });
}

function liteHead(src: TokenSource, sizes: LiteSizes, seed: number, residual: { baseScale: number } | null = null): Head {
  const model = new LiteTf(sizes, seed, residual);
  const { L1, L2 } = sizes;
  const d = src.dims;
  const queryBlock = (q: TrainingQuery) => padRowsTo(q.vectors, q.length, d, L1);
  const docsBlock = (docs: number[]) => {
    const out = new Float32Array(docs.length * L2 * d);
    docs.forEach((i, b) => {
      const t = src.doc(i);
      padRowsTo(t.vectors, t.length, d, L2, out, b * L2 * d);
    });
    return out;
  };
  return {
    variables: () => model.variables(),
    async scoreQuery(q, cands) {
      const out = new Float32Array(cands.length);
      const qb = queryBlock(q);
      for (let c0 = 0; c0 < cands.length; c0 += 16) {
        const sub = cands.slice(c0, c0 + 16);
        const s = tf.tidy(() => {
          const qt = tf.tile(tf.tensor3d(qb, [1, L1, d]), [sub.length, 1, 1]) as tf.Tensor3D;
          return model.score(qt, tf.tensor3d(docsBlock(sub), [sub.length, L2, d]), residual ? tf.tensor1d(baseScores(q, sub)) : undefined);
        });
        out.set(await s.data(), c0);
        s.dispose();
        await yieldLoop();
      }
      return out;
    },
    forward(groups) {
      const B = groups.reduce((a, g) => a + g.docs.length, 0);
      const qs = new Float32Array(B * L1 * d);
      let b = 0;
      for (const g of groups) {
        const qb = queryBlock(g.q);
        for (let k = 0; k < g.docs.length; k++) qs.set(qb, (b++) * L1 * d);
      }
      const base = residual ? tf.tensor1d(Float32Array.from(groups.flatMap((g) => Array.from(baseScores(g.q, g.docs))))) : undefined;
      return model.score(tf.tensor3d(qs, [B, L1, d]), tf.tensor3d(docsBlock(groups.flatMap((g) => g.docs)), [B, L2, d]), base);
    },
    export: () => model.export(),
    load: (w) => model.load(w as LiteWeights),
    dispose: () => model.dispose(),
  };
}

/** K-NRM: phi is fixed (the kernels are not learned), so it is computed once per (query, candidate). */
async function knrmHead(src: TokenSource, queries: TrainingQuery[], standardise = true): Promise<Head> {
  const d = src.dims;
  const phi = new Map<string, Float32Array>(); // query id -> candidates x 11
  for (const q of queries) {
    const C = q.candidates.length;
    const out = new Float32Array(C * KNRM_MU.length);
    for (let c0 = 0; c0 < C; c0 += 64) {
      const sub = q.candidates.slice(c0, c0 + 64);
      const L = Math.max(1, ...sub.map((i) => src.doc(i).length));
      const docs = new Float32Array(sub.length * L * d);
      const mask = new Float32Array(sub.length * L);
      sub.forEach((i, b) => {
        const t = src.doc(i);
        docs.set(t.vectors.subarray(0, t.length * d), b * L * d);
        mask.fill(1, b * L, b * L + t.length);
      });
      const p = tf.tidy(() => knrmPhiTf(tf.tensor2d(q.vectors.subarray(0, q.length * d), [q.length, d]), tf.tensor3d(docs, [sub.length, L, d]), tf.tensor2d(mask, [sub.length, L])));
      out.set(await p.data(), c0 * KNRM_MU.length);
      p.dispose();
    }
    phi.set(q.id, out);
    await yieldLoop();
  }
  const K = KNRM_MU.length;
  // Feature statistics over every (query, candidate) pair given (float64), for the standardised parametrisation.
  const mu = new Float32Array(K);
  const sigma = new Float32Array(K).fill(1);
  if (standardise) {
    const sum = new Float64Array(K);
    const sq = new Float64Array(K);
    let n = 0;
    for (const rows of phi.values()) {
      for (let i = 0; i < rows.length; i += K) {
        for (let k = 0; k < K; k++) {
          sum[k] += rows[i + k];
          sq[k] += rows[i + k] * rows[i + k];
        }
        n++;
      }
    }
    for (let k = 0; k < K; k++) {
      mu[k] = sum[k] / Math.max(1, n);
      sigma[k] = Math.sqrt(Math.max(sq[k] / Math.max(1, n) - mu[k] * mu[k], 0)) || 1;
    }
  }
  const model = new KnrmTf({ mu, sigma });
  const rowsOf = (q: TrainingQuery, docs: number[]) => {
    const all = phi.get(q.id)!;
    const pos = new Map(q.candidates.map((c, i) => [c, i]));
    const out = new Float32Array(docs.length * K);
    docs.forEach((doc, b) => out.set(all.subarray(pos.get(doc)! * K, (pos.get(doc)! + 1) * K), b * K));
    return out;
  };
  return {
    variables: () => model.variables(),
    async scoreQuery(q, cands) {
      const s = tf.tidy(() => model.scorePhi(tf.tensor2d(rowsOf(q, cands), [cands.length, K])));
      const out = Float32Array.from(await s.data());
      s.dispose();
      return out;
    },
    forward(groups) {
      const rows = groups.map((g) => rowsOf(g.q, g.docs));
      const B = groups.reduce((a, g) => a + g.docs.length, 0);
      const all = new Float32Array(B * K);
      let at = 0;
      for (const r of rows) {
        all.set(r, at);
        at += r.length;
      }
      return model.scorePhi(tf.tensor2d(all, [B, K]));
    },
    export: () => model.export(),
    load: (w) => model.load(w as KnrmWeights),
    dispose: () => model.dispose(),
  };
}

/** Seeded split of the queries that have a positive. */
export function splitQueries(ids: string[], seed: number, valFraction: number): { train: string[]; val: string[] } {
  if (ids.length < MIN_TRAIN_QUERIES) throw new TooFewQueriesError(`training needs at least ${MIN_TRAIN_QUERIES} judged queries with a positive judgment, got ${ids.length}`);
  const order = shuffled(ids, rng(seed ^ 0x5eed));
  const nVal = Math.min(ids.length - 2, Math.max(2, Math.round(ids.length * valFraction)));
  return { val: order.slice(0, nVal).sort(), train: order.slice(nVal).sort() };
}

export async function trainHead(src: TokenSource, queries: TrainingQuery[], options: TrainOptions): Promise<TrainResult> {
  const t0 = Date.now();
  const backend = await initTf(options.backend ?? 'wasm');
  const residual = options.head === 'lite' && options.residual === true;
  if (options.residual && options.head !== 'lite') throw new RangeError(`residual applies to LITE only, not ${options.head}`);
  const opts = {
    head: options.head,
    residual,
    seed: options.seed,
    maxEpochs: options.maxEpochs ?? 20,
    patience: options.patience ?? 3,
    // residual LITE: 1e-4 (Adam's steps are scale-free, and at 3e-4 the correction outgrew what a
    // few hundred judged queries support; sweep of 3e-4 / 1e-4 / 3e-5 in docs/training.md)
    learningRate: options.learningRate ?? (options.head === 'knrm' ? 1e-2 : residual ? 1e-4 : 3e-4),
    negatives: options.negatives ?? 3,
    hardPool: options.hardPool ?? 20,
    positivesPerQuery: options.positivesPerQuery ?? 4,
    groupsPerStep: options.groupsPerStep ?? (options.head === 'knrm' ? 16 : 4),
    distillSteps: options.head === 'lite' ? options.distillSteps ?? (residual ? 0 : 300) : 0,
    distillBatch: options.distillBatch ?? 4,
    distillList: options.distillList ?? 8,
    distillWeight: options.distillWeight ?? (options.head === 'lite' && !residual ? 0.5 : 0),
    distillLearningRate: options.distillLearningRate ?? (options.learningRate ?? (options.head === 'knrm' ? 1e-2 : 3e-4)) * 3,
    valFraction: options.valFraction ?? 0.2,
    backend,
    ...(options.head === 'lite' ? { sizes: options.sizes ?? { L1: 30, L2: 200, m1: 360, m2: 2400 } } : {}),
  };
  const judged = queries.filter((q) => q.grades.some((g) => g > 0) && q.grades.some((g) => g <= 0));
  const split = options.split ?? splitQueries(judged.map((q) => q.id), opts.seed, opts.valFraction);
  const byId = new Map(judged.map((q) => [q.id, q]));
  const train = split.train.map((id) => byId.get(id)).filter((q): q is TrainingQuery => !!q);
  const val = split.val.map((id) => byId.get(id)).filter((q): q is TrainingQuery => !!q);
  if (train.length < 1 || val.length < 1) throw new TooFewQueriesError(`training needs judged queries (a positive and a non-positive candidate) on both sides of the split: ${train.length} train, ${val.length} held out`);

  const r = rng(opts.seed);
  // Groups come from the list a re-rank would see (the first stage's top depth): its positives
  // against its non-positives (half of them from its `hardPool` best), plus an occasional easy
  // negative from outside it. Positives the first stage missed are used only when a query has none
  // inside: training them against the first stage's best non-positives would teach the head to
  // prefer documents unlike the query.
  const evalList = (q: TrainingQuery) => q.rerank ?? q.candidates.map((_, i) => i);
  const sampling = new Map<string, { pos: number[]; hard: number[]; list: number[]; easy: number[] }>();
  for (const q of train) {
    const inList = new Set(evalList(q));
    const idx = q.candidates.map((_, i) => i);
    const listNeg = idx.filter((i) => inList.has(i) && q.grades[i] <= 0);
    const hard = [...listNeg].sort((a, b) => q.firstStage[b] - q.firstStage[a] || a - b).slice(0, opts.hardPool);
    const posIn = idx.filter((i) => inList.has(i) && q.grades[i] > 0);
    const pos = posIn.length ? posIn : idx.filter((i) => q.grades[i] > 0);
    const easy = idx.filter((i) => !inList.has(i) && q.grades[i] <= 0);
    const c = (a: number[]) => a.map((i) => q.candidates[i]);
    sampling.set(q.id, { pos: c(pos), hard: c(hard), list: c(listNeg.length ? listNeg : easy), easy: c(easy.length ? easy : listNeg) });
  }
  const pick = <T>(a: T[]) => a[Math.floor(r() * a.length)];
  // MaxSim teacher: each training query's first-stage score per candidate document, and the
  // deviation of those scores around their list mean (pooled over the training queries).
  const teacher = new Map(train.map((q) => [q.id, new Map(q.candidates.map((c, i) => [c, q.firstStage[i]]))]));
  let sq = 0;
  let nsq = 0;
  for (const q of train) {
    const m = q.firstStage.reduce((a, b) => a + b, 0) / Math.max(1, q.firstStage.length);
    for (const v of q.firstStage) {
      sq += (v - m) ** 2;
      nsq++;
    }
  }
  const teacherScale = Math.sqrt(sq / Math.max(1, nsq)) || 1;
  const head = opts.head === 'lite' ? liteHead(src, opts.sizes!, opts.seed, residual ? { baseScale: teacherScale } : null) : await knrmHead(src, [...train, ...val]);
  const optimizer = tf.train.adam(opts.learningRate);
  const targets = (groups: { q: TrainingQuery; docs: number[] }[]) => {
    const t = new Float32Array(groups.reduce((a, g) => a + g.docs.length, 0));
    let at = 0;
    for (const g of groups) {
      const m = teacher.get(g.q.id)!;
      for (const doc of g.docs) t[at++] = (m.get(doc) ?? 0) / teacherScale;
    }
    return t;
  };
  /** MSE between per-list centred scores [G, k] and per-list centred teacher targets [G, k]. */
  const distillLoss = (scores: tf.Tensor2D, t: tf.Tensor2D) => {
    const cs = tf.sub(scores, tf.mean(scores, 1, true));
    const ct = tf.sub(t, tf.mean(t, 1, true));
    return tf.mean(tf.square(tf.sub(cs, ct))) as tf.Scalar;
  };

  const evaluate = async (qs: TrainingQuery[]) => {
    let sum = 0;
    for (const q of qs) {
      const pos = evalList(q);
      sum += ndcg10(await head.scoreQuery(q, pos.map((i) => q.candidates[i])), pos.map((i) => q.grades[i]), q.idealGrades ?? q.grades);
    }
    return qs.length ? sum / qs.length : 0;
  };
  const maxsimVal = val.reduce((a, q) => {
    const pos = evalList(q);
    return a + ndcg10(pos.map((i) => q.firstStage[i]), pos.map((i) => q.grades[i]), q.idealGrades ?? q.grades);
  }, 0) / val.length;

  const curve: EpochRecord[] = [];
  let best = { ndcg: -Infinity, epoch: 0, weights: null as LiteWeights | KnrmWeights | null };
  let lastFinite: number | null = null;
  let stepsPerEpoch = 0;
  let secondsPerStep = 0;
  let groupsPerEpoch = 0;
  let warmStart: TrainResult['warmStart'] = null;
  try {
    // A residual head starts as MaxSim itself (its correction is zero): that start is epoch 0, kept
    // unless a trained epoch ranks the early-stopping queries better.
    if (residual) best = { ndcg: await evaluate(val), epoch: 0, weights: await head.export() };
    if (opts.distillSteps > 0) {
      const tw = Date.now();
      const distillOpt = tf.train.adam(opts.distillLearningRate);
      const lists = train.filter((q) => q.candidates.length >= 2);
      let recent = 0;
      try {
        for (let s = 0; s < opts.distillSteps; s++) {
          const ts = Date.now();
          const batch = Array.from({ length: opts.distillBatch }, () => {
            const q = pick(lists);
            const list = evalList(q);
            // half from the list a re-rank sees (where the order matters), half from all candidates
            const docs = Array.from({ length: opts.distillList }, (_, k) => q.candidates[k % 2 === 0 && list.length ? pick(list) : Math.floor(r() * q.candidates.length)]);
            return { q, docs };
          });
          const t = targets(batch);
          const lossT = distillOpt.minimize(() => distillLoss(tf.reshape(head.forward(batch), [batch.length, opts.distillList]) as tf.Tensor2D, tf.tensor2d(t, [batch.length, opts.distillList])), true, head.variables());
          const loss = (await lossT!.data())[0];
          lossT!.dispose();
          if (!Number.isFinite(loss)) throw new TrainingDivergedError(0, lastFinite);
          lastFinite = loss;
          recent = s === 0 ? loss : 0.95 * recent + 0.05 * loss; // smoothed: one step's list is noisy
          secondsPerStep = secondsPerStep ? 0.9 * secondsPerStep + 0.1 * ((Date.now() - ts) / 1000) : (Date.now() - ts) / 1000;
          await options.onProgress?.({
            epoch: 0, maxEpochs: opts.maxEpochs, step: s + 1, stepsPerEpoch: opts.distillSteps, loss: recent,
            etaSeconds: Math.round(secondsPerStep * (opts.distillSteps - s - 1)),
            curve,
          });
          await yieldLoop();
        }
      } finally {
        distillOpt.dispose();
      }
      const valNdcg10 = await evaluate(val);
      warmStart = { steps: opts.distillSteps, loss: recent, valNdcg10, seconds: (Date.now() - tw) / 1000 };
      best = { ndcg: valNdcg10, epoch: 0, weights: await head.export() };
    }
    for (let epoch = 1; epoch <= opts.maxEpochs; epoch++) {
      const te = Date.now();
      const groups: { q: TrainingQuery; docs: number[] }[] = [];
      for (const q of shuffled(train, r)) {
        const smp = sampling.get(q.id)!;
        if (smp.list.length === 0) continue;
        for (const p of shuffled(smp.pos, r).slice(0, opts.positivesPerQuery)) {
          const docs = [p];
          for (let k = 0; k < opts.negatives; k++) {
            const u = r();
            docs.push(u < 0.1 ? pick(smp.easy) : u < 0.55 && smp.hard.length ? pick(smp.hard) : pick(smp.list));
          }
          groups.push({ q, docs });
        }
      }
      const order = shuffled(groups, r);
      groupsPerEpoch = order.length;
      stepsPerEpoch = Math.ceil(order.length / opts.groupsPerStep);
      let lossSum = 0;
      let lossN = 0;
      for (let s = 0; s < stepsPerEpoch; s++) {
        const batch = order.slice(s * opts.groupsPerStep, (s + 1) * opts.groupsPerStep);
        const ts = Date.now();
        const lossT = optimizer.minimize(() => {
          const scores = tf.reshape(head.forward(batch), [batch.length, 1 + opts.negatives]) as tf.Tensor2D;
          const pos = tf.slice(scores, [0, 0], [batch.length, 1]);
          const neg = tf.slice(scores, [0, 1], [batch.length, opts.negatives]);
          const rank = tf.mean(tf.softplus(tf.sub(neg, pos))) as tf.Scalar;
          if (opts.distillWeight === 0) return rank;
          return tf.add(rank, tf.mul(distillLoss(scores, tf.tensor2d(targets(batch), [batch.length, 1 + opts.negatives])), opts.distillWeight)) as tf.Scalar;
        }, true, head.variables());
        const loss = (await lossT!.data())[0];
        lossT!.dispose();
        if (!Number.isFinite(loss)) throw new TrainingDivergedError(epoch, lastFinite);
        lastFinite = loss;
        lossSum += loss;
        lossN++;
        secondsPerStep = secondsPerStep ? 0.9 * secondsPerStep + 0.1 * ((Date.now() - ts) / 1000) : (Date.now() - ts) / 1000;
        await options.onProgress?.({
          epoch, maxEpochs: opts.maxEpochs, step: s + 1, stepsPerEpoch, loss: lossSum / lossN,
          etaSeconds: Math.round(secondsPerStep * ((opts.maxEpochs - epoch) * stepsPerEpoch + (stepsPerEpoch - s - 1))),
          curve,
        });
        await yieldLoop();
      }
      const valNdcg10 = await evaluate(val);
      curve.push({ epoch, trainLoss: lossSum / Math.max(1, lossN), valNdcg10, seconds: (Date.now() - te) / 1000 });
      if (valNdcg10 > best.ndcg) best = { ndcg: valNdcg10, epoch, weights: await head.export() };
      await options.onProgress?.({ epoch, maxEpochs: opts.maxEpochs, step: stepsPerEpoch, stepsPerEpoch, loss: lossSum / Math.max(1, lossN), etaSeconds: Math.round(secondsPerStep * (opts.maxEpochs - epoch) * stepsPerEpoch), curve });
      if (epoch - best.epoch >= opts.patience) break;
    }
  } finally {
    optimizer.dispose();
    head.dispose();
  }
  return {
    head: opts.head,
    residual,
    weights: best.weights!,
    bestEpoch: best.epoch,
    warmStart,
    curve,
    heldOut: { queries: val.length, ndcg10: best.ndcg, maxsimNdcg10: maxsimVal },
    split: { train: train.map((q) => q.id), val: val.map((q) => q.id) },
    data: {
      queries: judged.length,
      trainQueries: train.length,
      valQueries: val.length,
      positives: train.reduce((a, q) => a + q.grades.filter((g) => g > 0).length, 0),
      candidates: [...train, ...val].reduce((a, q) => a + q.candidates.length, 0),
      groupsPerEpoch,
    },
    options: opts as TrainResult['options'],
    seconds: (Date.now() - t0) / 1000,
  };
}

/** Scores of `cands` of one query with trained weights, through TF.js (for parity checks and evaluation). */
export async function scoreWithWeights(src: TokenSource, q: TrainingQuery, cands: number[], weights: LiteWeights | KnrmWeights, backend: TfBackend = 'wasm'): Promise<Float32Array> {
  await initTf(backend);
  const isLite = 'L1' in weights;
  // a residual's base scale only reparametrises alpha: any positive value gives the same scores
  const head = isLite ? liteHead(src, weights, 0, weights.maxsimWeight !== undefined ? { baseScale: 1 } : null) : await knrmHead(src, [{ ...q, candidates: cands, grades: cands.map(() => 0), firstStage: new Float32Array(cands.length) }], false);
  try {
    head.load(weights);
    // a residual reads each candidate's MaxSim from q's first stage (cands must be candidates of q)
    return await head.scoreQuery({ ...q, candidates: cands, firstStage: isLite && weights.maxsimWeight !== undefined ? baseScores(q, cands) : q.firstStage }, cands);
  } finally {
    head.dispose();
  }
}

/**
 * One query's training candidates: its judged documents, the `depth` best of the first stage
 * (`pool` scored by MaxSim; it must contain every judged document) and `randomNegatives` documents
 * drawn from the whole pool (seeded), each with its grade (0 when unjudged) and first-stage score.
 * Random documents matter: with hard negatives only, every negative has a high first-stage score
 * while judged positives span the whole range, and a head learns to prefer dissimilar documents.
 * `rerank` marks the first stage's top `depth`, the list held-out queries are scored on.
 */
export function assembleTrainingQuery(
  q: { id: string; vectors: Float32Array; length: number },
  judged: ReadonlyMap<number, number>,
  pool: ArrayLike<number>,
  poolScores: ArrayLike<number>,
  depth: number,
  randomNegatives = 50,
  seed = 1,
): TrainingQuery {
  const score = new Map<number, number>();
  for (let i = 0; i < pool.length; i++) score.set(pool[i], poolScores[i]);
  const order = Array.from(pool).sort((a, b) => score.get(b)! - score.get(a)! || a - b);
  const top = order.slice(0, depth);
  const cands = new Set<number>(top);
  for (const doc of judged.keys()) if (score.has(doc)) cands.add(doc);
  let h = seed >>> 0;
  for (let i = 0; i < q.id.length; i++) h = Math.imul(h ^ q.id.charCodeAt(i), 16777619) >>> 0;
  const r = rng(h);
  for (let k = 0; k < randomNegatives && cands.size < pool.length; k++) cands.add(pool[Math.floor(r() * pool.length)]);
  const candidates = [...cands];
  return {
    id: q.id,
    vectors: q.vectors,
    length: q.length,
    candidates,
    grades: candidates.map((c) => judged.get(c) ?? 0),
    firstStage: Float32Array.from(candidates, (c) => score.get(c)!),
    rerank: top.map((_, i) => i),
    idealGrades: [...judged.values()].filter((g) => g > 0),
  };
}
