/**
 * Re-ranking evaluation on a first-stage run with text, in any TREC-DL-format folder (the layout
 * of ../shared/datasets/trec-dl-2019-passage, any year: `retrieve_results*.json` + `qrels*.txt`,
 * found by pattern by scripts/lib/trec-dl.ts; --run / --qrels name a file when several match).
 * Every query's candidates are encoded with the token encoder and re-scored by each scorer;
 * reported beside the first stage (scripts/lib/metrics): nDCG@10 with **linear gain**
 * (rel / log2(rank + 1), ideal DCG from every judged document of the query, as trec_eval), MRR@10
 * and recall@10 with "relevant" = grade >= --rel-level (default 2, the TREC DL convention for
 * binary measures). Queries without judgments are skipped. Ties keep first-stage order.
 *
 *   npx tsx scripts/eval/rerank.ts [--dataset DIR (alias --data)] [--run FILE] [--qrels FILE] [--model DIR] [--scorers a,b,...] [--rel-level 2] [--lambda 0.5] [--lite FILE.onnx] [--json]
 *   (--scorers filters by name prefix, e.g. --scorers maxsim,dense; the first stage is always reported)
 *
 * Scorers: first stage; maxsim; maxsim-topk (k = 2, 4, sum); dense (the model's pooling); mebert (mean-pooled
 * query vs the first 4 document vectors: the GloVe models have no CLS); signed-maxsim with the
 * negation heuristic on queries; hybrid (min-max maxsim + lambda * min-max first-stage score,
 * lambda NOT tuned: there is no dev split here); rrf(first stage, maxsim); lite when an artifact is given.
 */
import { resolve } from 'node:path';
import {
  dense, hybridLinear, maxsim, maxsimTopK, mebert, negationWeights, rrf, signedMaxsim, topK,
} from '@lateral/scoring';
import { OnnxLite } from '@lateral/kernels';
import { TokenEncoder, type EncodedText } from '@lateral/model';
import { numberFlag, parseCliOrExit } from '../lib/cli';
import { ndcgAt, recallAt, reciprocalRankAt, relevantAtLeast, type Judgments } from '../lib/metrics';
import { loadTrecDlFolder } from '../lib/trec-dl';
import { runIfMain } from '../lib/command';

/** The shared test collections sit beside the repository (`../shared/`). */
export const DEFAULT_RERANK_DIR = '../shared/datasets/trec-dl-2019-passage';
export const DEFAULT_MODEL_DIR = '.cache/models/glove-ctx-100d';

export interface Metrics { ndcg10: number; mrr10: number; recall10: number }

/** ranking: doc ids best first; judged: docid -> grade; relevant for MRR and recall = grade >= relLevel. */
export function metricsAt10(ranking: string[], judged: Judgments, relLevel: number): Metrics {
  const relevant = relevantAtLeast(judged, relLevel);
  return { ndcg10: ndcgAt(ranking, judged, 10), mrr10: reciprocalRankAt(ranking, relevant, 10), recall10: recallAt(ranking, relevant, 10) };
}

const USAGE = `usage: npm run eval -- rerank [--dataset DIR (alias --data; ${DEFAULT_RERANK_DIR})] [--run FILE] [--qrels FILE] [--model DIR (${DEFAULT_MODEL_DIR})]
  [--scorers a,b,... (all; by name prefix)] [--rel-level N (2)] [--lambda X (0.5)] [--lite FILE.onnx] [--json]`;

async function tokenStrings(enc: TokenEncoder, e: EncodedText): Promise<string[]> {
  return Array.from(e.tokenIds, (id) => enc.tokenizer.decode([id]) || '[SPECIAL]');
}

export async function runRerankEval(args: string[]): Promise<Record<string, unknown>> {
  const { values: v } = parseCliOrExit('eval rerank', USAGE, args, {
    dataset: { type: 'string' },
    data: { type: 'string' },
    run: { type: 'string' },
    qrels: { type: 'string' },
    model: { type: 'string', default: DEFAULT_MODEL_DIR },
    scorers: { type: 'string' },
    'rel-level': { type: 'string', default: '2' },
    lambda: { type: 'string', default: '0.5' },
    lite: { type: 'string' },
    json: { type: 'boolean' },
  }, {}, (parsed) => {
    numberFlag('rel-level', parsed.values['rel-level']);
    numberFlag('lambda', parsed.values.lambda);
    return parsed;
  });
  const dataDir = resolve(v.dataset ?? v.data ?? DEFAULT_RERANK_DIR);
  const only = v.scorers?.split(',').map((x) => x.trim()).filter(Boolean);
  const modelDir = resolve(v.model);
  const relLevel = Number(v['rel-level']);
  const lambda = Number(v.lambda);
  const litePath = v.lite;
  const log = (m: string) => process.stderr.write(`${m}\n`);

  const { files, queries: run, qrels } = loadTrecDlFolder(dataDir, { run: v.run, qrels: v.qrels });
  log(`rerank eval: ${files.run} (${run.length} queries), ${files.qrels}`);
  const enc = await TokenEncoder.load(modelDir, { executionProvider: 'cpu', intraOpThreads: 2 });
  const lite = litePath ? await OnnxLite.create(litePath) : null;
  const d = enc.dims;

  const all = ['first-stage', 'maxsim', 'maxsim-top2', 'maxsim-top4', 'dense', 'mebert-4', 'signed-maxsim (heuristic)', `hybrid minmax lambda=${lambda}`, 'rrf(first, maxsim)', ...(lite ? ['lite'] : [])];
  const names = only ? all.filter((n) => n === 'first-stage' || only.some((o) => n.startsWith(o))) : all;
  if (only && names.length === 1) throw new Error(`--scorers ${only.join(',')} matches none of: ${all.slice(1).join(', ')}`);
  const sums = new Map(names.map((n) => [n, { ndcg10: 0, mrr10: 0, recall10: 0 }]));
  let evaluated = 0;
  const t0 = performance.now();
  for (const [qi, rq] of run.entries()) {
    const judged = qrels.get(rq.qid);
    if (!judged || rq.hits.length === 0) continue;
    const hits = rq.hits;
    const ids = hits.map((h) => h.docid);
    const [q] = await enc.encodeQueries([rq.text]);
    const docsEnc = await enc.encodeDocuments(hits.map((h) => h.content));
    const C = hits.length, n = q.length;
    const qPool = enc.pool(q);
    const qSigns = negationWeights(await tokenStrings(enc, q));
    const s = (f: (e: EncodedText) => number) => Float32Array.from(docsEnc, f);
    const scores: Record<string, Float32Array> = {
      maxsim: s((e) => maxsim(q.vectors, n, e.vectors, e.length, d)),
      'maxsim-top2': s((e) => maxsimTopK(q.vectors, n, e.vectors, e.length, d, 2)),
      'maxsim-top4': s((e) => maxsimTopK(q.vectors, n, e.vectors, e.length, d, 4)),
      dense: s((e) => dense(qPool, enc.pool(e))),
      'mebert-4': s((e) => mebert(qPool, e.vectors, e.length, d, 4)),
      'signed-maxsim (heuristic)': s((e) => signedMaxsim(q.vectors, qSigns, n, e.vectors, new Float32Array(e.length).fill(1), e.length, d)),
    };
    const first = Float32Array.from(hits, (h) => h.score);
    scores[`hybrid minmax lambda=${lambda}`] = Float32Array.from(hybridLinear(scores.maxsim, first, lambda, 'minmax'));
    if (lite) {
      const offsets = new Uint32Array(C + 1);
      docsEnc.forEach((e, c) => { offsets[c + 1] = offsets[c] + e.length; });
      const all = new Float32Array(offsets[C] * d);
      docsEnc.forEach((e, c) => all.set(e.vectors, offsets[c] * d));
      scores.lite = await lite.score(q.vectors, n, all, offsets, d);
    }
    const rankings: Record<string, string[]> = { 'first-stage': ids };
    for (const [name, sc] of Object.entries(scores)) rankings[name] = topK(sc, ids, C).map((h) => h.id);
    rankings['rrf(first, maxsim)'] = rrf([ids, rankings.maxsim]).map((h) => h.id);
    for (const name of names) {
      const m = metricsAt10(rankings[name], judged, relLevel);
      const acc = sums.get(name)!;
      acc.ndcg10 += m.ndcg10; acc.mrr10 += m.mrr10; acc.recall10 += m.recall10;
    }
    evaluated++;
    if ((qi + 1) % 10 === 0) log(`rerank eval: ${qi + 1}/${run.length} queries`);
  }
  await lite?.release();
  const table: Record<string, Metrics> = {};
  for (const [name, acc] of sums) table[name] = { ndcg10: acc.ndcg10 / evaluated, mrr10: acc.mrr10 / evaluated, recall10: acc.recall10 / evaluated };
  const w = Math.max(...names.map((x) => x.length));
  console.log(`${'scorer'.padEnd(w)}  nDCG@10  MRR@10  R@10   (${evaluated} queries, ${enc.manifest.name}, relevant = grade >= ${relLevel})`);
  for (const name of names) {
    const m = table[name];
    console.log(`${name.padEnd(w)}  ${m.ndcg10.toFixed(4)}   ${m.mrr10.toFixed(4)}  ${m.recall10.toFixed(4)}`);
  }
  const out = (m: Metrics) => ({ 'ndcg@10': m.ndcg10, 'mrr@10': m.mrr10, 'recall@10': m.recall10 });
  const { ['first-stage']: firstStage, ...rest } = table;
  return {
    first_stage: out(firstStage),
    scorers: Object.fromEntries(Object.entries(rest).map(([k, v]) => [k, out(v)])),
    dataset: dataDir,
    run: files.run,
    qrels: files.qrels,
    model: enc.manifest.name,
    queries: evaluated,
    relLevel,
    lambda,
    ms: performance.now() - t0,
  };
}

runIfMain(import.meta.url, runRerankEval);
