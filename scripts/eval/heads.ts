/**
 * `npm run eval -- heads [--quick] [--json]`: learned heads against MaxSim on judged collections.
 *
 * Cross-validation, for every dataset (Cranfield, Vaswani) and model (glove-ctx-100d, minilm-l6-384):
 *   - documents and queries are encoded in this process (fp32, the service's encoder);
 *   - MaxSim over the whole collection (ONNX Runtime GEMMs) is the first stage and the baseline;
 *   - the judged queries are cut into K folds (seeded); for each fold, LITE (default and small)
 *     and K-NRM are trained with @lateral/training on the other folds (the train job's method:
 *     judged positives vs hard/sampled negatives of the MaxSim top 50, pairwise logistic loss,
 *     Adam, early stopping on 20% of the training queries held out) and re-rank the held-out
 *     fold's MaxSim top `depth` through the ONNX Runtime artifacts built from the trained weights;
 *   - nDCG@10 (trec_eval's, linear gain, ideal over every judged positive) per query, averaged
 *     over all queries (each scored once, by the heads trained without it), with wins / losses
 *     against MaxSim per query.
 * TREC DL 2019 (`--dl19 DIR`, default ../shared/datasets/trec-dl-2019-passage; `--dl19 none` skips
 * it): per model, each head is trained once on every judged query of the --datasets (Cranfield +
 * Vaswani, same documents and first stage as their cross-validation) and re-ranks DL19's BM25
 * top-100 of its 43 judged queries (scripts/eval/compression-trec-dl.ts loadRerankFolder), against
 * MaxSim over the same candidates (and BM25's own order). The encoder is the same; the training
 * queries are from other domains (aeronautics, physics), so this is a transfer test.
 * Interpolation column ("MaxSim + head", NOT the head alone): per query, the head's scores and
 * MaxSim's over the re-ranked list are z-normalised and mixed, (1 - lambda) z(MaxSim) + lambda
 * z(head), lambda in {0, 0.1, ..., 1} chosen on the fold's early-stopping queries (ties: the
 * smaller lambda) and applied to the held-out queries. It says whether a head carries any signal
 * MaxSim lacks, even where the head alone ranks worse.
 * AESI (`aesi` in the JSON): the SDR comparison of `npm run eval -- compression --aesi` (bytes per
 * token, nDCG@10 vs fp32 for no side information, the ridge predictor and AESI; the smallest bytes
 * per token within 1% of fp32 for each). `--aesi c:bits,...` runs it here (compression-aesi.ts via
 * the compression sweep, on --dl19's folder, with --aesi-width/-epochs/-patience/-batch passed on)
 * and caches its result under .cache/eval-heads/aesi-*.json; `--aesi-json FILE` reads a saved
 * `eval compression --aesi ... --json` output (its last line), `--aesi-json A,B` several of the same
 * collection merged (a grid run as one process per code size; mergeCompressionResults); otherwise
 * the newest cached result is reported, or null. Only the AESI row, nothing trained or encoded
 * for the heads: `--no-cv --dl19 none --aesi-json FILE` (the AESI result names its own dataset).
 * LITE starts with the trainer's MaxSim warm start (distillation steps: full 300 default / 600
 * small, --quick 60 / 150); the log line of each fold says how far it got on the early-stopping
 * queries, and where the time went (training vs scoring).
 * --quick: 2 folds, fewer epochs (LITE default 2, small 3, K-NRM 6), one positive per query and
 * epoch, re-rank depth 30 (DL19: its 100 candidates), Vaswani sampled to its judged documents plus
 * random others (2,000 in all), and LITE default trained on at most 60 queries per fold (its step
 * costs about 6x the small one's).
 * Encodings (documents and queries) are cached under .cache/eval-heads/ keyed by model, manifest
 * and texts: the encoder was most of a row's time (MiniLM over Cranfield: 8-15 minutes on the
 * loaded 2-core machine); later runs read them back in seconds.
 *
 * --only-folds 3,4,5 (1-based): train and score only those folds of the K (the same fold assignment
 * and per-fold seeds as a full run, so the per-fold figures are those a full run gives); the means,
 * wins and losses are over those folds' queries only.
 *
 * Residual heads (`lite-residual`, `lite-small-residual`; the default --heads runs lite, lite-small,
 * knrm and lite-small-residual): LITE trained as a correction on MaxSim (the trainer's `residual`),
 * scored through its ONNX artifact with the list's MaxSim as its `base` input; no warm start.
 * Each head's figure carries the paired standard error of its mean difference to MaxSim.
 *
 *   npm run eval -- heads [--quick] [--json] [--datasets DIR,DIR] [--models NAME,NAME] [--heads lite,lite-small,knrm,lite-residual,lite-small-residual]
 *                         [--folds K] [--only-folds F,F] [--no-cv] [--dl19 DIR|none] [--epochs N] [--depth 100] [--max-docs N] [--seed 1]
 *                         [--distill-steps N] [--distill-weight W] [--lr X] [--distill-lr X] [--positives N (per query and epoch)]
 *                         [--aesi c:bits,... [--aesi-width N ...] | --aesi-json FILE[,FILE...]]
 */
import { resolve, basename } from 'node:path';
import { GemmMaxsim, OnnxKnrm, OnnxLite } from '@lateral/kernels';
import { LITE_DEFAULT, LITE_SMALL, type KnrmWeights, type LiteWeights } from '@lateral/scoring';
import { assembleTrainingQuery, rng, shuffled, trainHead, type TokenSource, type TrainOptions, type TrainResult, type TrainingQuery } from '@lateral/training';
import { parseCliOrExit } from '../lib/cli';
import { ndcgAt, type Judgments } from '../lib/metrics';
import { loadRerankFolder } from './compression-trec-dl';
import { aesiRow, type AesiCell, type AesiComparison } from './heads-aesi';
import { concatSources, encodeCached, prepareJudged, type Prepared } from './heads-data';

export { aesiComparison, mergeCompressionResults, type AesiComparison } from './heads-aesi';

type HeadName = 'lite' | 'lite-small' | 'knrm' | 'lite-residual' | 'lite-small-residual';
const HEAD_NAMES: HeadName[] = ['lite', 'lite-small', 'knrm', 'lite-residual', 'lite-small-residual'];
const isResidual = (h: HeadName) => h.endsWith('-residual');

const HEADS_OPTIONS = {
  quick: { type: 'boolean' },
  json: { type: 'boolean' },
  datasets: { type: 'string' },
  models: { type: 'string' },
  heads: { type: 'string' },
  folds: { type: 'string' },
  'only-folds': { type: 'string' },
  'no-cv': { type: 'boolean' },
  dl19: { type: 'string' },
  epochs: { type: 'string' },
  'distill-steps': { type: 'string' },
  'distill-weight': { type: 'string' },
  lr: { type: 'string' },
  'distill-lr': { type: 'string' },
  depth: { type: 'string' },
  'max-docs': { type: 'string' },
  seed: { type: 'string' },
  positives: { type: 'string' },
  aesi: { type: 'string' },
  'aesi-json': { type: 'string' },
  'aesi-model': { type: 'string' },
  'aesi-width': { type: 'string' },
  'aesi-epochs': { type: 'string' },
  'aesi-patience': { type: 'string' },
  'aesi-batch': { type: 'string' },
  'sample-tokens': { type: 'string' },
} as const;
type HeadsFlags = Partial<Record<keyof typeof HEADS_OPTIONS, string | boolean>>;

const HEADS_USAGE = `usage: npm run eval -- heads [--quick] [--json] [--datasets DIR,DIR (../shared/datasets/cranfield,../shared/datasets/vaswani)]
  [--models a,b (glove-ctx-100d,minilm-l6-384)] [--heads lite,lite-small,knrm,lite-small-residual (also lite-residual)]
  [--folds N (5; --quick 2)] [--only-folds i,j] [--no-cv] [--dl19 DIR|none (../shared/datasets/trec-dl-2019-passage)]
  [--epochs N] [--distill-steps N] [--distill-weight X] [--lr X] [--distill-lr X] [--depth N (100; --quick 30)]
  [--max-docs N (0: all; --quick 2000)] [--seed N (1)] [--positives N (4; --quick 1)]
  [--aesi c:bits,... | --aesi-json FILE[,FILE]] [--aesi-model NAME (minilm-l6-384)] [--aesi-width N] [--aesi-epochs N] [--aesi-patience N] [--aesi-batch N] [--sample-tokens N]`;

/** Flag `name`'s value (parsed by runHeadsEval), or `fallback` when it is not given. */
function flag(v: HeadsFlags, name: keyof typeof HEADS_OPTIONS, fallback: string): string {
  const x = v[name];
  return typeof x === 'string' ? x : fallback;
}

interface Versus {
  ndcg10: number;
  deltaVsMaxsim: number;
  /** standard error of the mean per-query difference to MaxSim (paired) */
  deltaSe: number;
  wins: number;
  losses: number;
  ties: number;
  beatsMaxsim: boolean;
}

/**
 * MaxSim and the head mixed per query: (1 - lambda) z(MaxSim) + lambda z(head), both z-normalised
 * over the re-ranked list, lambda chosen on the early-stopping queries. An interpolation, not the head.
 */
interface InterpolationFigures extends Versus {
  /** per fold (cross-validation) or the one training run (DL19): the lambda chosen */
  lambdas: number[];
  perFold?: number[];
}

interface HeadFigures extends Versus {
  perFold: number[];
  bestEpochs: number[];
  /** per fold, held-out (early-stopping) nDCG@10 right after the MaxSim warm start (LITE) */
  warmStartValNdcg10?: number[];
  trainSeconds: number;
  interpolatedWithMaxsim: InterpolationFigures;
}

export interface HeadsRun {
  dataset: string;
  model: string;
  documents: number;
  documentsInDataset: number;
  /** the queries scored: all judged queries, or those of --only-folds */
  queries: number;
  folds: number;
  /** the folds trained and scored (1-based; all of them unless --only-folds); perFold follows this order */
  foldsRun: number[];
  maxsim: { ndcg10: number; perFold: number[] };
  heads: Partial<Record<HeadName, HeadFigures>>;
  seconds: { encode: number; total: number };
}

/** Heads trained on the --datasets' judged queries, re-ranking TREC DL 2019's BM25 top 100. */
export interface TransferRun {
  dataset: string;
  model: string;
  trainedOn: { dataset: string; queries: number; documents: number }[];
  queries: number;
  candidatesPerQuery: number;
  bm25: { ndcg10: number };
  maxsim: { ndcg10: number };
  heads: Partial<Record<HeadName, Versus & { bestEpoch: number; earlyStopping: { queries: number; ndcg10: number; maxsimNdcg10: number }; warmStartValNdcg10?: number; trainSeconds: number; interpolatedWithMaxsim: InterpolationFigures }>>;
  seconds: { encode: number; total: number };
}

const log = (msg: string) => process.stderr.write(`${msg}\n`);

/** A query's re-rank list: rows of the TokenSource in first-stage order, MaxSim's scores, judgments. */
interface ListQuery {
  id: string;
  vectors: Float32Array;
  length: number;
  rows: number[];
  docIds: string[];
  maxsim: Float64Array;
  judged: Judgments;
}

/** Positions of `scores`, best first; ties keep the first-stage order. */
const rankPositions = (scores: ArrayLike<number>) => Array.from(scores, (_, i) => i).sort((a, b) => scores[b] - scores[a] || a - b);
const listNdcg = (q: ListQuery, scores: ArrayLike<number>) => ndcgAt(rankPositions(scores).slice(0, 10).map((i) => q.docIds[i]), q.judged, 10);

function zNorm(x: ArrayLike<number>): Float64Array {
  const n = x.length;
  let m = 0;
  for (let i = 0; i < n; i++) m += x[i];
  m /= Math.max(1, n);
  let v = 0;
  for (let i = 0; i < n; i++) v += (x[i] - m) ** 2;
  const sd = Math.sqrt(v / Math.max(1, n));
  return Float64Array.from(x, (a) => (sd > 0 ? (a - m) / sd : 0));
}

const LAMBDAS = Array.from({ length: 11 }, (_, i) => i / 10);
const mix = (zm: Float64Array, zh: Float64Array, lambda: number) => zm.map((a, i) => (1 - lambda) * a + lambda * zh[i]);

/** (1 - lambda) z(MaxSim) + lambda z(head) over one list (z: per-list mean 0, deviation 1; a constant list gives 0). */
export function interpolate(maxsim: ArrayLike<number>, head: ArrayLike<number>, lambda: number): Float64Array {
  return mix(zNorm(maxsim), zNorm(head), lambda);
}

/**
 * The lambda of {0, 0.1, ..., 1} whose interpolation has the best mean nDCG@10 over `lists`
 * (`ndcg` scores one list's mixed scores); ties go to the smaller lambda (closer to MaxSim alone).
 */
export function chooseLambda(lists: { maxsim: ArrayLike<number>; head: ArrayLike<number>; ndcg: (scores: ArrayLike<number>) => number }[]): { lambda: number; ndcg10: number } {
  const z = lists.map((l) => ({ zm: zNorm(l.maxsim), zh: zNorm(l.head), ndcg: l.ndcg }));
  let best = { lambda: 0, ndcg10: -Infinity };
  for (const lambda of LAMBDAS) {
    const m = z.reduce((a, l) => a + l.ndcg(mix(l.zm, l.zh, lambda)), 0) / Math.max(1, z.length);
    if (m > best.ndcg10 + 1e-12) best = { lambda, ndcg10: m };
  }
  return best;
}

/** Scores of a list's rows through an ONNX Runtime scorer (the production inference path). */
async function scoreList(scorer: OnnxLite | OnnxKnrm, src: TokenSource, q: ListQuery): Promise<Float32Array> {
  const d = src.dims;
  const co = new Uint32Array(q.rows.length + 1);
  const docs = q.rows.map((r) => src.doc(r));
  docs.forEach((t, i) => (co[i + 1] = co[i] + t.length));
  const block = new Float32Array(co[q.rows.length] * d);
  docs.forEach((t, i) => block.set(t.vectors, co[i] * d));
  // a residual LITE takes the list's MaxSim (the first stage's, as the re-rank path passes the MaxSim scorer's)
  if (scorer instanceof OnnxLite && scorer.residual) return scorer.score(q.vectors, q.length, block, co, d, q.maxsim);
  return scorer.score(q.vectors, q.length, block, co, d);
}

interface HeadOutcome {
  res: TrainResult;
  /** per test list: nDCG@10 of the head alone, and of the interpolation */
  head: number[];
  interpolated: number[];
  lambda: number;
  trainSeconds: number;
  scoreSeconds: number;
}

/**
 * Trains one head, scores the test lists with its ONNX Runtime graph, picks the interpolation's
 * lambda on the trainer's early-stopping queries (`lists` must hold a list for each training query
 * id) and applies it to the test lists.
 */
async function trainAndApply(src: TokenSource, trainQs: TrainingQuery[], options: TrainOptions, lists: Map<string, ListQuery>, test: ListQuery[]): Promise<HeadOutcome> {
  const ts = Date.now();
  const res = await trainHead(src, trainQs, options);
  const trainSeconds = (Date.now() - ts) / 1000;
  const scorer = options.head === 'knrm' ? await OnnxKnrm.create(res.weights as KnrmWeights, { intraOpThreads: 2 }) : await OnnxLite.create(res.weights as LiteWeights, { intraOpThreads: 2 });
  try {
    const val: Parameters<typeof chooseLambda>[0] = [];
    for (const id of res.split.val) {
      const q = lists.get(id)!;
      val.push({ maxsim: q.maxsim, head: await scoreList(scorer, src, q), ndcg: (s) => listNdcg(q, s) });
    }
    const { lambda } = chooseLambda(val);
    const head: number[] = [];
    const interpolated: number[] = [];
    for (const q of test) {
      const s = await scoreList(scorer, src, q);
      head.push(listNdcg(q, s));
      interpolated.push(listNdcg(q, interpolate(q.maxsim, s, lambda)));
    }
    return { res, head, interpolated, lambda, trainSeconds, scoreSeconds: (Date.now() - ts) / 1000 - trainSeconds };
  } finally {
    await scorer.release();
  }
}

interface EvalOptions {
  folds: number;
  /** 0-based folds to run (default: all) */
  onlyFolds?: number[];
  epochs: Record<HeadName, number>;
  depth: number;
  trainDepth: number;
  maxDocs: number;
  seed: number;
  heads: HeadName[];
  positivesPerQuery: number;
  maxTrainQueries: Partial<Record<HeadName, number>>;
  train: Partial<TrainOptions>;
  distillSteps: Record<HeadName, number>;
}

function trainOptions(head: HeadName, opts: EvalOptions, seed: number): TrainOptions {
  return {
    head: head === 'knrm' ? 'knrm' : 'lite',
    ...(head === 'knrm' ? {} : { sizes: { ...(head === 'lite' || head === 'lite-residual' ? LITE_DEFAULT : LITE_SMALL) } }),
    ...(isResidual(head) ? { residual: true } : {}),
    seed,
    maxEpochs: opts.epochs[head],
    patience: 2,
    positivesPerQuery: opts.positivesPerQuery,
    ...(head === 'knrm' || isResidual(head) ? {} : { distillSteps: opts.distillSteps[head] }),
    ...opts.train,
  };
}

function versus(a: ArrayLike<number>, maxsim: ArrayLike<number>): Versus {
  let wins = 0, losses = 0, ties = 0;
  for (let i = 0; i < a.length; i++) {
    if (Math.abs(a[i] - maxsim[i]) < 1e-9) ties++;
    else if (a[i] > maxsim[i]) wins++;
    else losses++;
  }
  const m = mean(a);
  const ms = mean(maxsim);
  const n = a.length;
  let v = 0;
  for (let i = 0; i < n; i++) v += (a[i] - maxsim[i] - (m - ms)) ** 2;
  const deltaSe = n > 1 ? Math.sqrt(v / (n - 1) / n) : 0;
  return { ndcg10: round(m), deltaVsMaxsim: round(m - ms), deltaSe: round(deltaSe), wins, losses, ties, beatsMaxsim: m > ms };
}

function mean(a: ArrayLike<number>, idx?: number[]): number {
  const ix = idx ?? Array.from({ length: a.length }, (_, i) => i);
  return ix.reduce((s, i) => s + a[i], 0) / Math.max(1, ix.length);
}

/** The re-rank list of query `qi` of a prepared collection: its MaxSim top `depth`, rows shifted by `base`. */
function preparedList(p: Prepared, qi: number, depth: number, base = 0, idPrefix = ''): ListQuery {
  const rows = p.topRows[qi].slice(0, depth);
  return {
    id: idPrefix + p.queries[qi].id,
    vectors: p.enc.queries[qi].vectors,
    length: p.enc.queries[qi].length,
    rows: rows.map((r) => r + base),
    docIds: rows.map((r) => p.docIds[r]),
    maxsim: Float64Array.from(rows, (r) => p.maxsim[qi][r]),
    judged: p.qrels.get(p.queries[qi].id)!,
  };
}

function preparedTrainingQuery(p: Prepared, qi: number, trainDepth: number, base = 0, idPrefix = ''): TrainingQuery {
  const pool = Array.from({ length: p.docIds.length }, (_, i) => i + base);
  const judged = new Map([...p.judgedRows[qi]].map(([r, g]) => [r + base, g] as [number, number]));
  return assembleTrainingQuery({ id: idPrefix + p.queries[qi].id, vectors: p.enc.queries[qi].vectors, length: p.enc.queries[qi].length }, judged, pool, p.maxsim[qi], trainDepth);
}

async function crossValidate(p: Prepared, opts: EvalOptions): Promise<HeadsRun> {
  const t0 = Date.now();
  const label = `${p.dataset} / ${p.model}`;
  const { src } = concatSources([p.enc], p.d);
  const nq = p.queries.length;
  const lists = p.queries.map((_, qi) => preparedList(p, qi, opts.depth));
  const maxsimNdcg = lists.map((q) => listNdcg(q, q.maxsim));
  const order = shuffled(p.queries.map((_, i) => i), rng(opts.seed ^ 0xf01d));
  const foldOf = new Int32Array(nq);
  order.forEach((qi, k) => (foldOf[qi] = k % opts.folds));
  const foldIdx = (f: number) => p.queries.map((_, i) => i).filter((i) => foldOf[i] === f);
  const per = () => ({ head: new Float64Array(nq), interp: new Float64Array(nq), bestEpochs: [] as number[], warm: [] as number[], lambdas: [] as number[], trainSeconds: 0 });
  const acc = Object.fromEntries(opts.heads.map((h) => [h, per()])) as Record<HeadName, ReturnType<typeof per>>;
  const foldsRun = opts.onlyFolds ?? Array.from({ length: opts.folds }, (_, f) => f);
  const scored = p.queries.map((_, i) => i).filter((i) => foldsRun.includes(foldOf[i]));
  for (const f of foldsRun) {
    const trainIdx = p.queries.map((_, i) => i).filter((i) => foldOf[i] !== f);
    const testIdx = foldIdx(f);
    const trainQs = trainIdx.map((qi) => preparedTrainingQuery(p, qi, opts.trainDepth));
    const byId = new Map(trainIdx.map((qi) => [lists[qi].id, lists[qi]]));
    for (const head of opts.heads) {
      const cap = opts.maxTrainQueries[head];
      const qs = cap && trainQs.length > cap ? shuffled(trainQs, rng(opts.seed + 17 * f)).slice(0, cap) : trainQs;
      const out = await trainAndApply(src, qs, trainOptions(head, opts, opts.seed + f), byId, testIdx.map((qi) => lists[qi]));
      const a = acc[head];
      testIdx.forEach((qi, k) => {
        a.head[qi] = out.head[k];
        a.interp[qi] = out.interpolated[k];
      });
      a.bestEpochs.push(out.res.bestEpoch);
      if (out.res.warmStart) a.warm.push(round(out.res.warmStart.valNdcg10));
      a.lambdas.push(out.lambda);
      a.trainSeconds += out.trainSeconds;
      const fm = (x: ArrayLike<number>) => mean(x, testIdx).toFixed(4);
      log(
        `  ${label} fold ${f + 1}/${opts.folds} ${head}: nDCG@10 ${fm(a.head)} vs MaxSim ${fm(maxsimNdcg)}; interpolated with MaxSim (lambda ${out.lambda}) ${fm(a.interp)} ` +
          `(best epoch ${out.res.bestEpoch}/${out.res.curve.length}${out.res.warmStart ? `, after the MaxSim warm start ${out.res.warmStart.valNdcg10.toFixed(4)} on the early-stopping queries vs MaxSim ${out.res.heldOut.maxsimNdcg10.toFixed(4)}` : ''}; ` +
          `train ${out.trainSeconds.toFixed(0)} s, score ${out.scoreSeconds.toFixed(0)} s)`,
      );
    }
  }
  const perFold = (x: ArrayLike<number>) => foldsRun.map((f) => round(mean(x, foldIdx(f))));
  const sub = (x: ArrayLike<number>) => scored.map((i) => x[i]);
  const heads: HeadsRun['heads'] = {};
  for (const h of opts.heads) {
    const a = acc[h];
    heads[h] = {
      ...versus(sub(a.head), sub(maxsimNdcg)),
      perFold: perFold(a.head),
      bestEpochs: a.bestEpochs,
      ...(a.warm.length ? { warmStartValNdcg10: a.warm } : {}),
      trainSeconds: Math.round(a.trainSeconds),
      interpolatedWithMaxsim: { ...versus(sub(a.interp), sub(maxsimNdcg)), lambdas: a.lambdas, perFold: perFold(a.interp) },
    };
  }
  return {
    dataset: p.dataset,
    model: p.model,
    documents: p.docIds.length,
    documentsInDataset: p.documentsInDataset,
    queries: scored.length,
    folds: opts.folds,
    foldsRun: foldsRun.map((f) => f + 1),
    maxsim: { ndcg10: round(mean(maxsimNdcg, scored)), perFold: perFold(maxsimNdcg) },
    heads,
    seconds: { encode: Math.round(p.encodeSeconds), total: Math.round((Date.now() - t0) / 1000) },
  };
}

/**
 * Trains each head on every judged query of `train` (one TokenSource over all their documents and
 * DL19's candidates) and re-ranks the DL19 folder's first-stage candidates.
 */
async function transfer(train: Prepared[], dir: string, model: string, opts: EvalOptions, gemm: GemmMaxsim): Promise<TransferRun> {
  const t0 = Date.now();
  const data = loadRerankFolder(dir);
  const enc = await encodeCached(model, data.texts.map((text) => ({ text })), data.queries.map((q) => ({ text: q.text })), `${basename(dir)} / ${model}`);
  const d = train[0].d;
  const { src, base } = concatSources([...train.map((p) => p.enc), enc], d);
  const dlBase = base[train.length];
  const test: ListQuery[] = [];
  for (const [qi, q] of data.queries.entries()) {
    const co = new Uint32Array(q.candidates.length + 1);
    const docs = q.candidates.map((c) => src.doc(c + dlBase));
    docs.forEach((t, i) => (co[i + 1] = co[i] + t.length));
    const block = new Float32Array(co[docs.length] * d);
    docs.forEach((t, i) => block.set(t.vectors, co[i] * d));
    const [s] = await gemm.score([enc.queries[qi]], block, co, d);
    test.push({ id: q.qid, vectors: enc.queries[qi].vectors, length: enc.queries[qi].length, rows: q.candidates.map((c) => c + dlBase), docIds: q.candidates.map((c) => data.docIds[c]), maxsim: Float64Array.from(s), judged: q.judged });
  }
  const bm25 = test.map((q) => ndcgAt(q.docIds.slice(0, 10), q.judged, 10));
  const maxsimNdcg = test.map((q) => listNdcg(q, q.maxsim));
  const trainQs: TrainingQuery[] = [];
  const lists = new Map<string, ListQuery>();
  train.forEach((p, k) => {
    p.queries.forEach((_, qi) => {
      trainQs.push(preparedTrainingQuery(p, qi, opts.trainDepth, base[k], `${p.dataset}:`));
      const l = preparedList(p, qi, opts.depth, base[k], `${p.dataset}:`);
      lists.set(l.id, l);
    });
  });
  const heads: TransferRun['heads'] = {};
  const label = `${basename(dir)} / ${model}`;
  for (const head of opts.heads) {
    const cap = opts.maxTrainQueries[head];
    const qs = cap && trainQs.length > cap ? shuffled(trainQs, rng(opts.seed + 17)).slice(0, cap) : trainQs;
    const out = await trainAndApply(src, qs, trainOptions(head, opts, opts.seed), lists, test);
    heads[head] = {
      ...versus(out.head, maxsimNdcg),
      bestEpoch: out.res.bestEpoch,
      earlyStopping: { queries: out.res.heldOut.queries, ndcg10: round(out.res.heldOut.ndcg10), maxsimNdcg10: round(out.res.heldOut.maxsimNdcg10) },
      ...(out.res.warmStart ? { warmStartValNdcg10: round(out.res.warmStart.valNdcg10) } : {}),
      trainSeconds: Math.round(out.trainSeconds),
      interpolatedWithMaxsim: { ...versus(out.interpolated, maxsimNdcg), lambdas: [out.lambda] },
    };
    log(
      `  ${label} ${head} (trained on ${qs.length} queries of ${train.map((p) => p.dataset).join(' + ')}): nDCG@10 ${mean(out.head).toFixed(4)} vs MaxSim ${mean(maxsimNdcg).toFixed(4)} (BM25 ${mean(bm25).toFixed(4)}); ` +
        `interpolated with MaxSim (lambda ${out.lambda}) ${mean(out.interpolated).toFixed(4)} (best epoch ${out.res.bestEpoch}/${out.res.curve.length}, early-stopping queries ${out.res.heldOut.ndcg10.toFixed(4)} vs MaxSim ${out.res.heldOut.maxsimNdcg10.toFixed(4)}; ` +
        `train ${out.trainSeconds.toFixed(0)} s, score ${out.scoreSeconds.toFixed(0)} s)`,
    );
  }
  return {
    dataset: basename(dir),
    model,
    trainedOn: train.map((p) => ({ dataset: p.dataset, queries: p.queries.length, documents: p.docIds.length })),
    queries: test.length,
    candidatesPerQuery: Math.max(...test.map((q) => q.rows.length)),
    bm25: { ndcg10: round(mean(bm25)) },
    maxsim: { ndcg10: round(mean(maxsimNdcg)) },
    heads,
    seconds: { encode: Math.round(enc.seconds), total: Math.round((Date.now() - t0) / 1000) },
  };
}

const round = (x: number) => Math.round(x * 1e4) / 1e4;
const signed = (x: number) => `${x >= 0 ? '+' : ''}${x.toFixed(4)}`;
const versusText = (f: Versus) => `${f.ndcg10.toFixed(4)} (${signed(f.deltaVsMaxsim)} +- ${f.deltaSe.toFixed(4)} s.e., ${f.wins}/${f.losses} wins/losses${f.beatsMaxsim ? '' : ', does NOT beat MaxSim'})`;

/** --only-folds "3,4,5" (1-based, of `folds`) -> sorted distinct 0-based folds; '' -> undefined (all folds). */
export function parseOnlyFolds(spec: string, folds: number): number[] | undefined {
  if (!spec) return undefined;
  const fs = spec.split(',').map((x) => Number(x) - 1);
  for (const f of fs) if (!Number.isInteger(f) || f < 0 || f >= folds) throw new Error(`--only-folds: ${spec} (1-based fold numbers of the ${folds})`);
  return [...new Set(fs)].sort((a, b) => a - b);
}

export async function runHeadsEval(args: string[]): Promise<{ quick: boolean; runs: HeadsRun[]; dl19: TransferRun[]; aesi: AesiComparison | null; summary: string[] }> {
  const v: HeadsFlags = parseCliOrExit('eval heads', HEADS_USAGE, args, HEADS_OPTIONS).values;
  const quick = v.quick === true;
  const datasets = flag(v, 'datasets', '../shared/datasets/cranfield,../shared/datasets/vaswani').split(',').map((p) => resolve(p));
  const models = flag(v, 'models', 'glove-ctx-100d,minilm-l6-384').split(',');
  const heads = flag(v, 'heads', 'lite,lite-small,knrm,lite-small-residual').split(',') as HeadName[];
  for (const h of heads) if (!HEAD_NAMES.includes(h)) throw new Error(`--heads: unknown head ${h} (${HEAD_NAMES.join(', ')})`);
  const folds = Number(flag(v, 'folds', quick ? '2' : '5'));
  const onlyFolds = parseOnlyFolds(flag(v, 'only-folds', ''), folds);
  const dl19Flag = flag(v, 'dl19', '../shared/datasets/trec-dl-2019-passage');
  const dl19 = dl19Flag === 'none' ? null : resolve(dl19Flag);
  const cv = v['no-cv'] !== true;
  const e = flag(v, 'epochs', '');
  const epochs: Record<HeadName, number> = e
    ? { lite: +e, 'lite-small': +e, knrm: +e, 'lite-residual': +e, 'lite-small-residual': +e }
    : quick
      ? { lite: 2, 'lite-small': 3, knrm: 6, 'lite-residual': 2, 'lite-small-residual': 3 }
      : { lite: 8, 'lite-small': 12, knrm: 20, 'lite-residual': 8, 'lite-small-residual': 12 };
  const ds = flag(v, 'distill-steps', '');
  const opts: EvalOptions = {
    folds,
    ...(onlyFolds ? { onlyFolds } : {}),
    epochs,
    depth: Number(flag(v, 'depth', quick ? '30' : '100')),
    trainDepth: quick ? 30 : 50,
    maxDocs: Number(flag(v, 'max-docs', quick ? '2000' : '0')),
    seed: Number(flag(v, 'seed', '1')),
    heads,
    positivesPerQuery: Number(flag(v, 'positives', quick ? '1' : '4')),
    maxTrainQueries: (quick ? { lite: 60, 'lite-residual': 60 } : {}) as Partial<Record<HeadName, number>>,
    // residual heads start at MaxSim itself: no warm start
    distillSteps: ds
      ? { lite: +ds, 'lite-small': +ds, knrm: 0, 'lite-residual': 0, 'lite-small-residual': 0 }
      : quick
        ? { lite: 60, 'lite-small': 150, knrm: 0, 'lite-residual': 0, 'lite-small-residual': 0 }
        : { lite: 300, 'lite-small': 600, knrm: 0, 'lite-residual': 0, 'lite-small-residual': 0 },
    train: {
      ...(flag(v, 'distill-weight', '') ? { distillWeight: Number(flag(v, 'distill-weight', '')) } : {}),
      ...(flag(v, 'lr', '') ? { learningRate: Number(flag(v, 'lr', '')) } : {}),
      ...(flag(v, 'distill-lr', '') ? { distillLearningRate: Number(flag(v, 'distill-lr', '')) } : {}),
    } as Partial<TrainOptions>,
  };
  const runs: HeadsRun[] = [];
  const transfers: TransferRun[] = [];
  const gemm = await GemmMaxsim.create(2);
  try {
    for (const model of cv || dl19 ? models : []) {
      const prepared: Prepared[] = [];
      for (const dir of datasets) {
        const p = await prepareJudged(dir, model, opts.maxDocs, opts.seed, gemm);
        if (cv) {
          log(`${p.dataset} / ${model}: ${opts.folds}-fold cross-validation`);
          runs.push(await crossValidate(p, opts));
        }
        if (dl19) prepared.push(p);
      }
      if (dl19) {
        log(`${basename(dl19)} / ${model}: heads trained on every judged query of ${prepared.map((p) => p.dataset).join(' + ')}`);
        transfers.push(await transfer(prepared, dl19, model, opts, gemm));
      }
    }
  } finally {
    await gemm.release();
  }
  const aesi = await aesiRow(v, dl19 ?? resolve('../shared/datasets/trec-dl-2019-passage'), flag(v, 'aesi-model', 'minilm-l6-384'));
  const summary: string[] = [];
  for (const r of runs) {
    const line = [`${r.dataset} / ${r.model} (${r.folds}-fold${r.foldsRun.length < r.folds ? `, folds ${r.foldsRun.join(',')} only` : ''}, ${r.queries} queries, ${r.documents} docs${r.documents < r.documentsInDataset ? ` sampled of ${r.documentsInDataset}` : ''}): MaxSim ${r.maxsim.ndcg10.toFixed(4)}`];
    for (const [h, f] of Object.entries(r.heads)) line.push(`${h} ${versusText(f!)}; MaxSim + ${h} interpolation ${versusText(f!.interpolatedWithMaxsim)}`);
    summary.push(line.join('; '));
  }
  for (const t of transfers) {
    const line = [`${t.dataset} / ${t.model} (${t.queries} queries x ${t.candidatesPerQuery} BM25 candidates; heads trained on ${t.trainedOn.map((x) => `${x.dataset} ${x.queries} q`).join(' + ')}): BM25 ${t.bm25.ndcg10.toFixed(4)}, MaxSim ${t.maxsim.ndcg10.toFixed(4)}`];
    for (const [h, f] of Object.entries(t.heads)) line.push(`${h} ${versusText(f!)}; MaxSim + ${h} interpolation (lambda ${f!.interpolatedWithMaxsim.lambdas[0]}) ${versusText(f!.interpolatedWithMaxsim)}`);
    summary.push(line.join('; '));
  }
  if (aesi) {
    const s = aesi.smallestWithin1pct;
    const w = (c: AesiCell | null) =>
      c ? `${c.bytes_per_token.toFixed(2)} B/token (${c.name}, ${c['ndcg@10'].toFixed(4)}${c.ndcg_delta_se !== undefined ? `, ${c.ndcg_rel_change >= 0 ? '+' : ''}${(100 * c.ndcg_rel_change).toFixed(1)}% vs fp32, s.e. ${c.ndcg_delta_se.toFixed(4)}` : ''})` : 'none';
    summary.push(`AESI (${aesi.dataset} / ${aesi.model}, ${aesi.queries} queries, from ${aesi.source}): fp32 ${aesi.fp32['ndcg@10'].toFixed(4)}; smallest within 1% of fp32: no side information ${w(s.noSideInfo)}, ridge ${w(s.ridge)}, AESI ${w(s.aesi)}; target ${aesi.targetMet ? 'met' : 'NOT met'}`);
  } else {
    summary.push('AESI: no comparison (run with --aesi c:bits,... or --aesi-json FILE from `npm run eval -- compression --dataset DIR --aesi ... --json`)');
  }
  for (const s of summary) console.log(s);
  return { quick, runs, dl19: transfers, aesi, summary };
}
