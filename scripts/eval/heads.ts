/**
 * `npm run eval -- heads [--quick] [--json]`: learned heads against MaxSim, cross-validated on
 * judged collections. For every dataset (Cranfield, Vaswani) and model (glove-ctx-100d,
 * minilm-l6-384):
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
 * LITE starts with the trainer's MaxSim warm start (distillation steps: full 300 default / 600
 * small, --quick 60 / 150); the log line of each fold says how far it got on the early-stopping
 * queries, and where the time went (training vs scoring).
 * --quick: 2 folds, fewer epochs (LITE default 2, small 3, K-NRM 6), one positive per query and
 * epoch, re-rank depth 30, Vaswani sampled to its judged documents plus random others (2,000 in
 * all), and LITE default trained on at most 60 queries per fold (its step costs about 6x the
 * small one's).
 * Encodings (documents and queries) are cached under .cache/eval-heads/ keyed by model, manifest
 * and texts: the encoder was most of a row's time (MiniLM over Cranfield: 8-15 minutes on the
 * loaded 2-core machine); later runs read them back in seconds.
 *
 *   npm run eval -- heads [--quick] [--json] [--datasets DIR,DIR] [--models NAME,NAME] [--heads lite,lite-small,knrm]
 *                         [--folds K] [--epochs N] [--depth 100] [--max-docs N] [--seed 1]
 *                         [--distill-steps N] [--distill-weight W] [--lr X] [--distill-lr X]
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { resolve, basename, join } from 'node:path';
import { GemmMaxsim, OnnxKnrm, OnnxLite } from '@lateral/kernels';
import { TokenEncoder, type EncodedText } from '@lateral/model';
import { LITE_DEFAULT, LITE_SMALL, type KnrmWeights, type LiteWeights } from '@lateral/scoring';
import { assembleTrainingQuery, rng, shuffled, trainHead, type TokenSource, type TrainOptions, type TrainingQuery } from '@lateral/training';
import { loadRetrievalDataset } from '../lib/retrieval-dataset';
import { ndcgAt } from '../lib/metrics';

type HeadName = 'lite' | 'lite-small' | 'knrm';

function flag(args: string[], name: string, fallback: string): string {
  const i = args.indexOf(name);
  return i >= 0 && args[i + 1] !== undefined ? args[i + 1] : fallback;
}

interface HeadFigures {
  ndcg10: number;
  deltaVsMaxsim: number;
  wins: number;
  losses: number;
  ties: number;
  perFold: number[];
  bestEpochs: number[];
  /** per fold, held-out (early-stopping) nDCG@10 right after the MaxSim warm start (LITE) */
  warmStartValNdcg10?: number[];
  trainSeconds: number;
  beatsMaxsim: boolean;
}

export interface HeadsRun {
  dataset: string;
  model: string;
  documents: number;
  documentsInDataset: number;
  queries: number;
  folds: number;
  maxsim: { ndcg10: number; perFold: number[] };
  heads: Partial<Record<HeadName, HeadFigures>>;
  seconds: { encode: number; total: number };
}

const log = (msg: string) => process.stderr.write(`${msg}\n`);

interface EncodedSet {
  /** documents' token vectors, CSR (offsets docs + 1) */
  all: Float32Array;
  offsets: Uint32Array;
  queries: { vectors: Float32Array; length: number }[];
}

/**
 * Encodes documents and queries once per (texts, model) and keeps them under
 * .cache/eval-heads/<hash>.bin: later runs (other heads, folds, options) skip the encoder, which
 * was minutes of a row on the loaded 2-core machine (MiniLM over 2,000 Vaswani abstracts).
 */
async function encodeCached(model: string, docs: { text: string }[], queries: { text: string }[], label: string): Promise<EncodedSet & { seconds: number; cached: boolean }> {
  const te = Date.now();
  const h = createHash('sha256').update(model).update('\0');
  for (const x of docs) h.update(x.text).update('\0');
  h.update('\u0001');
  for (const x of queries) h.update(x.text).update('\0');
  const manifest = JSON.parse(readFileSync(resolve('.cache/models', model, 'manifest.json'), 'utf8')) as unknown;
  h.update(JSON.stringify(manifest));
  const dir = resolve('.cache/eval-heads');
  const file = join(dir, `${model}-${h.digest('hex').slice(0, 16)}.bin`);
  if (existsSync(file)) {
    const buf = readFileSync(file);
    const head = buf.readUInt32LE(0);
    const meta = JSON.parse(buf.subarray(4, 4 + head).toString('utf8')) as { docs: number; tokens: number; d: number; qLengths: number[] };
    let at = 4 + head;
    const f32 = (n: number) => {
      const a = new Float32Array(n);
      Buffer.from(a.buffer).set(buf.subarray(at, at + n * 4));
      at += n * 4;
      return a;
    };
    const offsets = new Uint32Array(meta.docs + 1);
    Buffer.from(offsets.buffer).set(buf.subarray(at, at + offsets.byteLength));
    at += offsets.byteLength;
    const all = f32(meta.tokens * meta.d);
    const qs = meta.qLengths.map((len) => ({ vectors: f32(len * meta.d), length: len }));
    log(`  ${label}: encodings read from ${file}`);
    return { all, offsets, queries: qs, seconds: (Date.now() - te) / 1000, cached: true };
  }
  const enc = await TokenEncoder.load(resolve('.cache/models', model), { executionProvider: 'cpu', intraOpThreads: 2 });
  const d = enc.dims;
  const encoded: EncodedText[] = [];
  for (let i = 0; i < docs.length; i += 256) {
    encoded.push(...(await enc.encodeDocuments(docs.slice(i, i + 256).map((x) => x.text))));
    log(`  ${label}: encoded ${encoded.length}/${docs.length} documents`);
  }
  const qEnc = await enc.encodeQueries(queries.map((q) => q.text));
  const offsets = new Uint32Array(docs.length + 1);
  encoded.forEach((e, i) => (offsets[i + 1] = offsets[i] + e.length));
  const all = new Float32Array(offsets[docs.length] * d);
  encoded.forEach((e, i) => all.set(e.vectors.subarray(0, e.length * d), offsets[i] * d));
  const qs = qEnc.map((e) => ({ vectors: e.vectors.slice(0, e.length * d), length: e.length }));
  const meta = Buffer.from(JSON.stringify({ docs: docs.length, tokens: offsets[docs.length], d, qLengths: qs.map((q) => q.length) }));
  const len = Buffer.alloc(4);
  len.writeUInt32LE(meta.length, 0);
  mkdirSync(dir, { recursive: true });
  writeFileSync(file, Buffer.concat([len, meta, Buffer.from(offsets.buffer), Buffer.from(all.buffer, all.byteOffset, all.byteLength), ...qs.map((q) => Buffer.from(q.vectors.buffer, q.vectors.byteOffset, q.vectors.byteLength))]));
  return { all, offsets, queries: qs, seconds: (Date.now() - te) / 1000, cached: false };
}

async function evalOne(dir: string, model: string, opts: { folds: number; epochs: Record<HeadName, number>; depth: number; trainDepth: number; maxDocs: number; seed: number; heads: HeadName[]; positivesPerQuery: number; maxTrainQueries: Partial<Record<HeadName, number>>; train: Partial<TrainOptions>; distillSteps: Record<HeadName, number> }): Promise<HeadsRun> {
  const t0 = Date.now();
  const ds = loadRetrievalDataset(dir);
  const judgedDocs = new Set<string>();
  const queries = ds.queries.filter((q) => [...(ds.qrels.get(q.id)?.values() ?? [])].some((g) => g > 0));
  for (const q of queries) for (const doc of ds.qrels.get(q.id)!.keys()) judgedDocs.add(doc);
  let docs = ds.docs;
  if (opts.maxDocs > 0 && docs.length > opts.maxDocs) {
    const r = rng(opts.seed);
    const others = shuffled(docs.filter((d) => !judgedDocs.has(d.id)), r);
    const keep = new Set([...docs.filter((d) => judgedDocs.has(d.id)).map((d) => d.id), ...others.slice(0, Math.max(0, opts.maxDocs - judgedDocs.size)).map((d) => d.id)]);
    docs = docs.filter((d) => keep.has(d.id));
  }
  const { all, offsets, queries: qEnc, seconds: encodeSeconds } = await encodeCached(model, docs, queries, `${basename(dir)} / ${model}`);
  const d = qEnc[0].vectors.length / qEnc[0].length;
  const src: TokenSource = { dims: d, doc: (i) => ({ vectors: all.subarray(offsets[i] * d, offsets[i + 1] * d), length: offsets[i + 1] - offsets[i] }) };
  const rowOf = new Map(docs.map((x, i) => [x.id, i]));

  // First stage and baseline: MaxSim against every document.
  const gemm = await GemmMaxsim.create(2);
  const maxsim: Float32Array[] = [];
  for (let i = 0; i < qEnc.length; i += 16) maxsim.push(...(await gemm.score(qEnc.slice(i, i + 16), all, offsets, d)));
  const pool = Array.from({ length: docs.length }, (_, i) => i);
  const judgedRows = queries.map((q) => {
    const m = new Map<number, number>();
    for (const [doc, g] of ds.qrels.get(q.id)!) if (rowOf.has(doc)) m.set(rowOf.get(doc)!, g);
    return m;
  });
  const ranked = (scores: ArrayLike<number>, rows: number[]) => rows.map((_, i) => i).sort((a, b) => scores[b] - scores[a] || a - b).map((i) => rows[i]);
  const topRows = maxsim.map((s) => pool.slice().sort((a, b) => s[b] - s[a] || a - b));
  const ndcgOf = (qi: number, order: number[]) => ndcgAt(order.map((r) => docs[r].id), ds.qrels.get(queries[qi].id)!, 10);
  const maxsimNdcg = queries.map((_, qi) => ndcgOf(qi, topRows[qi].slice(0, 10)));

  const order = shuffled(queries.map((_, i) => i), rng(opts.seed ^ 0xf01d));
  const foldOf = new Int32Array(queries.length);
  order.forEach((qi, k) => (foldOf[qi] = k % opts.folds));
  const headNdcg: Record<string, Float64Array> = Object.fromEntries(opts.heads.map((h) => [h, new Float64Array(queries.length)]));
  const bestEpochs: Record<string, number[]> = Object.fromEntries(opts.heads.map((h) => [h, []]));
  const trainSeconds: Record<string, number> = Object.fromEntries(opts.heads.map((h) => [h, 0]));
  const warmNdcg: Record<string, number[]> = Object.fromEntries(opts.heads.map((h) => [h, []]));
  for (let f = 0; f < opts.folds; f++) {
    const trainIdx = queries.map((_, i) => i).filter((i) => foldOf[i] !== f);
    const testIdx = queries.map((_, i) => i).filter((i) => foldOf[i] === f);
    const trainQs: TrainingQuery[] = trainIdx.map((qi) => assembleTrainingQuery({ id: queries[qi].id, vectors: qEnc[qi].vectors, length: qEnc[qi].length }, judgedRows[qi], pool, maxsim[qi], opts.trainDepth));
    for (const head of opts.heads) {
      const ts = Date.now();
      const cap = opts.maxTrainQueries[head];
      const res = await trainHead(src, cap && trainQs.length > cap ? shuffled(trainQs, rng(opts.seed + 17 * f)).slice(0, cap) : trainQs, {
        head: head === 'knrm' ? 'knrm' : 'lite',
        ...(head === 'knrm' ? {} : { sizes: { ...(head === 'lite' ? LITE_DEFAULT : LITE_SMALL) } }),
        seed: opts.seed + f,
        maxEpochs: opts.epochs[head],
        patience: 2,
        positivesPerQuery: opts.positivesPerQuery,
        ...(head === 'knrm' ? {} : { distillSteps: opts.distillSteps[head] }),
        ...opts.train,
      });
      const trainedIn = (Date.now() - ts) / 1000;
      if (res.warmStart) warmNdcg[head].push(round(res.warmStart.valNdcg10));
      trainSeconds[head] += (Date.now() - ts) / 1000;
      bestEpochs[head].push(res.bestEpoch);
      // Inference on the production path: ONNX Runtime graphs with the trained weights baked in.
      const scorer = head === 'knrm' ? await OnnxKnrm.create(res.weights as KnrmWeights, { intraOpThreads: 2 }) : await OnnxLite.create(res.weights as LiteWeights, { intraOpThreads: 2 });
      for (const qi of testIdx) {
        const cands = topRows[qi].slice(0, opts.depth);
        const co = new Uint32Array(cands.length + 1);
        cands.forEach((r, i) => (co[i + 1] = co[i] + (offsets[r + 1] - offsets[r])));
        const block = new Float32Array(co[cands.length] * d);
        cands.forEach((r, i) => block.set(src.doc(r).vectors, co[i] * d));
        const s = await scorer.score(qEnc[qi].vectors, qEnc[qi].length, block, co, d);
        headNdcg[head][qi] = ndcgOf(qi, ranked(s, cands).slice(0, 10));
      }
      await scorer.release();
      const foldMean = testIdx.reduce((a, qi) => a + headNdcg[head][qi], 0) / testIdx.length;
      const foldMaxsim = testIdx.reduce((a, qi) => a + maxsimNdcg[qi], 0) / testIdx.length;
      log(`  ${basename(dir)} / ${model} fold ${f + 1}/${opts.folds} ${head}: nDCG@10 ${foldMean.toFixed(4)} vs MaxSim ${foldMaxsim.toFixed(4)} (best epoch ${res.bestEpoch}/${res.curve.length}${res.warmStart ? `, after the MaxSim warm start ${res.warmStart.valNdcg10.toFixed(4)} on the early-stopping queries vs MaxSim ${res.heldOut.maxsimNdcg10.toFixed(4)}` : ''}; train ${trainedIn.toFixed(0)} s, score ${((Date.now() - ts) / 1000 - trainedIn).toFixed(0)} s)`);
    }
  }
  const mean = (a: ArrayLike<number>, idx?: number[]) => {
    const ix = idx ?? Array.from({ length: a.length }, (_, i) => i);
    return ix.reduce((s, i) => s + a[i], 0) / Math.max(1, ix.length);
  };
  const foldIdx = (f: number) => queries.map((_, i) => i).filter((i) => foldOf[i] === f);
  const heads: HeadsRun['heads'] = {};
  for (const h of opts.heads) {
    const a = headNdcg[h];
    let wins = 0, losses = 0, ties = 0;
    a.forEach((v, qi) => (Math.abs(v - maxsimNdcg[qi]) < 1e-9 ? ties++ : v > maxsimNdcg[qi] ? wins++ : losses++));
    const m = mean(a);
    heads[h] = {
      ndcg10: round(m),
      deltaVsMaxsim: round(m - mean(maxsimNdcg)),
      wins, losses, ties,
      perFold: Array.from({ length: opts.folds }, (_, f) => round(mean(a, foldIdx(f)))),
      bestEpochs: bestEpochs[h],
      ...(warmNdcg[h].length ? { warmStartValNdcg10: warmNdcg[h] } : {}),
      trainSeconds: Math.round(trainSeconds[h]),
      beatsMaxsim: m > mean(maxsimNdcg),
    };
  }
  await gemm.release();
  return {
    dataset: basename(dir),
    model,
    documents: docs.length,
    documentsInDataset: ds.docs.length,
    queries: queries.length,
    folds: opts.folds,
    maxsim: { ndcg10: round(mean(maxsimNdcg)), perFold: Array.from({ length: opts.folds }, (_, f) => round(mean(maxsimNdcg, foldIdx(f)))) },
    heads,
    seconds: { encode: Math.round(encodeSeconds), total: Math.round((Date.now() - t0) / 1000) },
  };
}

const round = (x: number) => Math.round(x * 1e4) / 1e4;

export async function runHeadsEval(args: string[]): Promise<{ quick: boolean; runs: HeadsRun[]; summary: string[] }> {
  const quick = args.includes('--quick');
  const datasets = flag(args, '--datasets', '../shared/datasets/cranfield,../shared/datasets/vaswani').split(',').map((p) => resolve(p));
  const models = flag(args, '--models', 'glove-ctx-100d,minilm-l6-384').split(',');
  const heads = flag(args, '--heads', 'lite,lite-small,knrm').split(',') as HeadName[];
  for (const h of heads) if (!['lite', 'lite-small', 'knrm'].includes(h)) throw new Error(`--heads: unknown head ${h} (lite, lite-small, knrm)`);
  const folds = Number(flag(args, '--folds', quick ? '2' : '5'));
  const e = flag(args, '--epochs', '');
  const epochs: Record<HeadName, number> = e ? { lite: +e, 'lite-small': +e, knrm: +e } : quick ? { lite: 2, 'lite-small': 3, knrm: 6 } : { lite: 8, 'lite-small': 12, knrm: 20 };
  const ds = flag(args, '--distill-steps', '');
  const opts = {
    folds,
    epochs,
    depth: Number(flag(args, '--depth', quick ? '30' : '100')),
    trainDepth: quick ? 30 : 50,
    maxDocs: Number(flag(args, '--max-docs', quick ? '2000' : '0')),
    seed: Number(flag(args, '--seed', '1')),
    heads,
    positivesPerQuery: quick ? 1 : 4,
    maxTrainQueries: (quick ? { lite: 60 } : {}) as Partial<Record<HeadName, number>>,
    distillSteps: ds ? { lite: +ds, 'lite-small': +ds, knrm: 0 } : quick ? { lite: 60, 'lite-small': 150, knrm: 0 } : { lite: 300, 'lite-small': 600, knrm: 0 },
    train: {
      ...(flag(args, '--distill-weight', '') ? { distillWeight: Number(flag(args, '--distill-weight', '')) } : {}),
      ...(flag(args, '--lr', '') ? { learningRate: Number(flag(args, '--lr', '')) } : {}),
      ...(flag(args, '--distill-lr', '') ? { distillLearningRate: Number(flag(args, '--distill-lr', '')) } : {}),
    } as Partial<TrainOptions>,
  };
  const runs: HeadsRun[] = [];
  for (const dir of datasets) {
    for (const model of models) {
      log(`${basename(dir)} / ${model}: ${opts.folds}-fold cross-validation`);
      runs.push(await evalOne(dir, model, opts));
    }
  }
  const summary: string[] = [];
  for (const r of runs) {
    const line = [`${r.dataset} / ${r.model} (${r.queries} queries, ${r.documents} docs${r.documents < r.documentsInDataset ? ` sampled of ${r.documentsInDataset}` : ''}): MaxSim ${r.maxsim.ndcg10.toFixed(4)}`];
    for (const [h, f] of Object.entries(r.heads)) line.push(`${h} ${f!.ndcg10.toFixed(4)} (${f!.deltaVsMaxsim >= 0 ? '+' : ''}${f!.deltaVsMaxsim.toFixed(4)}, ${f!.wins}/${f!.losses} wins/losses${f!.beatsMaxsim ? '' : ', does NOT beat MaxSim'})`);
    summary.push(line.join('; '));
  }
  for (const s of summary) console.log(s);
  return { quick, runs, summary };
}
