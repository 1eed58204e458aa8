/**
 * In-process Cranfield evaluation of a token encoder: every query against all 1400 documents with
 * exact MaxSim (ColBERT: sum over query tokens of the max dot product over document tokens) and
 * with dense scoring (dot product of mean-pooled, L2-normalised vectors); nDCG@10, linear gain.
 *
 *   npx tsx scripts/lib/cranfield-eval.ts [--models dirA,dirB] [--data /work/shared/datasets/cranfield] [--max-doc-tokens N]
 *   npx tsx scripts/lib/cranfield-eval.ts --sweep [--vocab N] [--radii 1,2,3] [--decays 0.5,0.75]
 *       # static + contextual window grid, built under .cache/tmp/cranfield-sweep , removed afterwards (how CTX_WINDOW was chosen)
 *
 * The MaxSim similarity matrix is computed by ONNX Runtime (a one-node Gemm graph, MLAS on CPU);
 * the per-document max and the sums are plain typed-array loops.
 */
import { rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import * as ort from 'onnxruntime-node';
import { TokenEncoder, type EncodedText } from '@lateral/model';
import { encodeModel, floatAttr, makeModel, makeNode, makeValueInfo } from '@lateral/kernels';
import { loadCranfield, type CranfieldData } from './cranfield';
import { hasRelevant, ndcgAt, rankByScore } from './metrics';
import { CliUsageError, intFlag, parseCliOrExit } from './cli';

/** The vendored copy (data/cranfield) of ../shared/datasets/cranfield. */
export const DEFAULT_CRANFIELD_DIR = 'data/cranfield';

export interface CranfieldScores {
  model: string;
  ndcgMaxsim: number;
  ndcgDense: number;
  /** Queries with at least one relevant document (the ones averaged). */
  queries: number;
  docTokens: number;
  truncatedDocs: number;
  encodeMs: number;
  scoreMs: number;
}

/** A [m,k] x [n,k]^T -> [m,n] Gemm session. */
async function gemmSession(): Promise<ort.InferenceSession> {
  const model = makeModel({
    name: 'sim',
    nodes: [makeNode('Gemm', ['A', 'B'], ['C'], { transB: 1, alpha: floatAttr(1) })],
    inputs: [makeValueInfo('A', 'FLOAT', ['m', 'k']), makeValueInfo('B', 'FLOAT', ['n', 'k'])],
    outputs: [makeValueInfo('C', 'FLOAT', ['m', 'n'])],
  });
  return ort.InferenceSession.create(encodeModel(model));
}

function meanPooled(e: EncodedText, d: number): Float32Array {
  const v = new Float32Array(d);
  for (let r = 0; r < e.length; r++) for (let k = 0; k < d; k++) v[k]! += e.vectors[r * d + k]!;
  let n = 0;
  for (let k = 0; k < d; k++) n += v[k]! * v[k]!;
  const inv = n > 0 ? 1 / Math.sqrt(n) : 0;
  for (let k = 0; k < d; k++) v[k]! *= inv;
  return v;
}

/**
 * Exact MaxSim scores, queries x docs (row-major). Docs are processed in chunks of whole documents
 * so one similarity block stays under ~`blockFloats` floats.
 */
export async function maxSimScores(queries: EncodedText[], docs: EncodedText[], dims: number, blockFloats = 24_000_000): Promise<Float64Array> {
  const qOffsets = [0];
  for (const q of queries) qOffsets.push(qOffsets.at(-1)! + q.length);
  const mq = qOffsets.at(-1)!;
  const Q = new Float32Array(mq * dims);
  queries.forEach((q, i) => Q.set(q.vectors, qOffsets[i]! * dims));
  const scores = new Float64Array(queries.length * docs.length).fill(Number.NEGATIVE_INFINITY);
  const session = await gemmSession();
  const tokensPerBlock = Math.max(1, Math.floor(blockFloats / Math.max(1, mq)));
  const rowMax = new Float32Array(mq);
  try {
    let start = 0;
    while (start < docs.length) {
      let end = start;
      let n = 0;
      while (end < docs.length && (n === 0 || n + docs[end]!.length <= tokensPerBlock)) n += docs[end++]!.length;
      if (n > 0) {
        const D = new Float32Array(n * dims);
        let off = 0;
        for (let j = start; j < end; j++) {
          D.set(docs[j]!.vectors, off * dims);
          off += docs[j]!.length;
        }
        const out = await session.run({ A: new ort.Tensor('float32', Q, [mq, dims]), B: new ort.Tensor('float32', D, [n, dims]) });
        const C = out.C!.data as Float32Array;
        let col = 0;
        for (let j = start; j < end; j++) {
          const len = docs[j]!.length;
          if (len > 0) {
            rowMax.fill(Number.NEGATIVE_INFINITY);
            for (let r = 0; r < mq; r++) {
              const base = r * n + col;
              let m = Number.NEGATIVE_INFINITY;
              for (let t = 0; t < len; t++) if (C[base + t]! > m) m = C[base + t]!;
              rowMax[r] = m;
            }
            for (let qi = 0; qi < queries.length; qi++) {
              let s = 0;
              for (let r = qOffsets[qi]!; r < qOffsets[qi + 1]!; r++) s += rowMax[r]!;
              scores[qi * docs.length + j] = s;
            }
          }
          col += len;
        }
      }
      start = end;
    }
  } finally {
    await session.release();
  }
  return scores;
}

export interface EvalOptions {
  /** Document truncation (capped by the manifest's maxDocTokens). */
  maxDocTokens?: number;
}

export async function evaluateCranfield(encoder: TokenEncoder, data: CranfieldData, opts: EvalOptions = {}): Promise<CranfieldScores> {
  const d = encoder.dims;
  const t0 = Date.now();
  const docs = await encoder.encodeDocuments(data.docs.map((x) => x.text), { maxTokens: opts.maxDocTokens });
  const queries = await encoder.encodeQueries(data.queries.map((x) => x.text));
  const t1 = Date.now();
  const docIds = data.docs.map((x) => x.id);
  const maxsim = await maxSimScores(queries, docs, d);

  const docMeans = docs.map((e) => meanPooled(e, d));
  let sumMax = 0;
  let sumDense = 0;
  let judged = 0;
  queries.forEach((q, qi) => {
    const qrel = data.qrels.get(data.queries[qi]!.id);
    if (!qrel || !hasRelevant(qrel)) return;
    judged++;
    sumMax += ndcgAt(rankByScore(maxsim.subarray(qi * docs.length, (qi + 1) * docs.length), docIds), qrel, 10);
    const qm = meanPooled(q, d);
    const dense = new Float64Array(docs.length);
    docMeans.forEach((v, j) => {
      let s = 0;
      for (let k = 0; k < d; k++) s += qm[k]! * v[k]!;
      dense[j] = docs[j]!.length > 0 ? s : Number.NEGATIVE_INFINITY;
    });
    sumDense += ndcgAt(rankByScore(dense, docIds), qrel, 10);
  });
  return {
    model: encoder.manifest.name,
    ndcgMaxsim: sumMax / judged,
    ndcgDense: sumDense / judged,
    queries: judged,
    docTokens: docs.reduce((a, e) => a + e.length, 0),
    truncatedDocs: docs.filter((e) => e.truncated).length,
    encodeMs: t1 - t0,
    scoreMs: Date.now() - t1,
  };
}

export async function evaluateModelDir(dir: string, data: CranfieldData, opts: EvalOptions = {}): Promise<CranfieldScores> {
  const enc = await TokenEncoder.load(dir, { executionProvider: 'cpu' });
  try {
    return await evaluateCranfield(enc, data, opts);
  } finally {
    await enc.release();
  }
}

const fmt = (s: CranfieldScores, label = s.model) =>
  `${label.padEnd(28)} nDCG@10 maxsim ${s.ndcgMaxsim.toFixed(4)}  dense ${s.ndcgDense.toFixed(4)}  ` +
  `(${s.queries} queries, ${s.docTokens} doc tokens, ${s.truncatedDocs} docs truncated, encode ${s.encodeMs} ms, score ${s.scoreMs} ms)`;

const USAGE = `usage: npx tsx scripts/lib/cranfield-eval.ts [--models dirA,dirB] [--data DIR] [--max-doc-tokens N]
       npx tsx scripts/lib/cranfield-eval.ts --sweep [--vocab N] [--radii 1,2,3] [--decays 0.5,0.75]
  --models <dirs>         model directories, comma-separated (default: the two GloVe models, built if needed)
  --data <dir>            the Cranfield collection (default ${DEFAULT_CRANFIELD_DIR})
  --max-doc-tokens <n>    truncate documents to n tokens
  --sweep                 static + contextual window grid (--vocab, --radii, --decays)
  -h, --help              this text`;

const OPTIONS = {
  models: { type: 'string' },
  data: { type: 'string' },
  'max-doc-tokens': { type: 'string' },
  sweep: { type: 'boolean' },
  vocab: { type: 'string' },
  radii: { type: 'string' },
  decays: { type: 'string' },
} as const;

async function main(): Promise<void> {
  const v = parseCliOrExit('cranfield-eval', USAGE, process.argv.slice(2), OPTIONS, {}, ({ values }) => {
    for (const flag of ['max-doc-tokens', 'vocab'] as const) if (values[flag] !== undefined) intFlag(flag, values[flag]);
    for (const flag of ['radii', 'decays'] as const) if (values[flag]?.split(',').some((x) => !Number.isFinite(Number(x)) || x === '')) throw new CliUsageError(`--${flag} is a comma-separated list of numbers, got ${values[flag]}`);
    return values;
  });
  const data = loadCranfield(v.data ?? DEFAULT_CRANFIELD_DIR);
  const evalOpts: EvalOptions = v['max-doc-tokens'] ? { maxDocTokens: Number(v['max-doc-tokens']) } : {};
  const build = await import('../build-model');
  if (v.sweep) {
    const vocab = Number(v.vocab ?? build.DEFAULT_VOCAB_SIZE);
    const wv = build.loadWinkVectors(vocab);
    const base = resolve('.cache/tmp/cranfield-sweep');
    const staticDir = join(base, 'static');
    await build.writeGloveModelDir(staticDir, wv, { name: 'static', variant: 'static', window: build.CTX_WINDOW, sourceVersion: build.winkPackageInfo().version });
    console.log(fmt(await evaluateModelDir(staticDir, data, evalOpts), `static (vocab ${wv.words.length})`));
    const list = (text: string | undefined, def: number[]) => (text?.split(',').map(Number) ?? def);
    for (const radius of list(v.radii, [1, 2, 3, 4, 6])) {
      for (const decay of list(v.decays, [0.25, 0.5, 0.75, 1])) {
        const dir = join(base, `ctx-r${radius}-d${decay}`);
        await build.writeGloveModelDir(dir, wv, { name: `ctx-r${radius}-d${decay}`, variant: 'ctx', window: { radius, decay }, sourceVersion: '' });
        console.log(fmt(await evaluateModelDir(dir, data, evalOpts)));
        rmSync(dir, { recursive: true, force: true }); // 60 MB each
      }
    }
    rmSync(base, { recursive: true, force: true });
    return;
  }
  let dirs = v.models?.split(',');
  if (!dirs) {
    const res = await build.buildModels({ all: false });
    dirs = [res.dirs['glove-static-100d']!, res.dirs['glove-ctx-100d']!];
  }
  for (const dir of dirs) console.log(fmt(await evaluateModelDir(dir, data, evalOpts)));
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  main().catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
}
