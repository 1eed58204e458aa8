/**
 * Encoder throughput of the service's own code path (`TokenEncoder`, onnxruntime-node) with the
 * CPU and the CUDA execution provider, on the same machine, and the agreement of their outputs.
 *
 *   npx tsx scripts/bench/encoder-cuda.ts [--models .cache/models] [--data ../shared/datasets/cranfield]
 *       [--model minilm-l6-384,minilm-l6-384-int8] [--providers cpu,cuda] [--passes 3] [--repeat 1]
 *       [--threads N] [--limit N] [--baseline MODEL/PROVIDER] [--json OUT]
 *
 * onnxruntime-node's CUDA provider is two libraries beside its binding
 * (node_modules/onnxruntime-node/bin/napi-v6/linux/x64/libonnxruntime_providers_{shared,cuda}.so);
 * docs/models.md ("GPU.") says where they come from and how this was run on an H100. Without
 * them `--providers cuda` shows the service's fallback (the warning is printed and recorded).
 *
 * Per model and provider: TokenEncoder.load as the encoder worker does ({executionProvider,
 * deviceId 0}, graphOptimizationLevel 'all'), one warm-up pass, then `--passes` timed passes of
 * encodeDocuments over the Cranfield documents (title + abstract, at most 256 tokens, the
 * service's length-sorted batches of at most 16,384 padded tokens), repeated `--repeat` times;
 * the median pass gives docs/s and tokens/s (real tokens, [CLS]/[SEP] included). `run ms` is the
 * share spent inside session.run (the inference observer), the rest is tokenizing, tensor
 * building and normalising in JS. Then query latency: the 225 queries encoded one at a time
 * (median and p90 ms). Outputs of every provider are compared with the first one's (cpu): the
 * largest absolute difference of any document token vector component, and the smallest and the
 * mean cosine between matching token vectors; with `--baseline MODEL/PROVIDER` (listed first)
 * every later result is also compared with that one (e.g. int8 on CUDA with fp32 on CPU).
 *
 * On a GPU machine without a checkout or npm (how the H100 figures were taken): bundle it here,
 *   node_modules/.bin/esbuild scripts/bench/encoder-cuda.ts --bundle --platform=node --target=node20 \
 *     --format=cjs --external:onnxruntime-node --tsconfig=tsconfig.json --outfile=encoder-cuda.cjs
 * and run `node encoder-cuda.cjs --models DIR --data DIR ...` beside a node_modules/ that holds
 * onnxruntime-node (package.json, dist/, bin/napi-v6/linux/x64/ plus the two libraries) and
 * onnxruntime-common, with the CUDA 13 libraries on LD_LIBRARY_PATH.
 */
import { writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { TokenEncoder, type EncodedText } from '../../libs/model/src/token-encoder';
import { setInferenceObserver } from '../../libs/kernels/src/inference-observer';
import { loadCranfield } from '../lib/cranfield';

function flag(args: string[], name: string, fallback: string): string {
  const i = args.indexOf(name);
  return i >= 0 && args[i + 1] !== undefined ? args[i + 1]! : fallback;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)]!;
const quantile = (xs: number[], q: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(q * xs.length))]!;

interface ProviderFigures {
  model: string;
  requested: 'cpu' | 'cuda';
  provider: 'cpu' | 'cuda';
  warnings: string[];
  loadMs: number;
  warmupMs: number;
  passMs: number[];
  runMs: number[];
  docsPerS: number;
  tokensPerS: number;
  queryMsMedian: number;
  queryMsP90: number;
  maxAbsDiff?: number;
  minCosine?: number;
  meanCosine?: number;
  /** Against `--baseline MODEL/PROVIDER` (e.g. minilm-l6-384/cpu), when given. */
  baseline?: { of: string; maxAbsDiff: number; minCosine: number; meanCosine: number };
}

function compare(a: EncodedText[], b: EncodedText[], dims: number): { maxAbsDiff: number; minCosine: number; meanCosine: number } {
  let maxAbsDiff = 0;
  let minCosine = 1;
  let sumCosine = 0;
  let n = 0;
  a.forEach((x, i) => {
    const y = b[i]!;
    if (x.length !== y.length) throw new Error(`document ${i}: ${x.length} vs ${y.length} token vectors`);
    for (let t = 0; t < x.length; t++) {
      let dot = 0;
      let nx = 0;
      let ny = 0;
      for (let k = 0; k < dims; k++) {
        const u = x.vectors[t * dims + k]!;
        const v = y.vectors[t * dims + k]!;
        maxAbsDiff = Math.max(maxAbsDiff, Math.abs(u - v));
        dot += u * v;
        nx += u * u;
        ny += v * v;
      }
      if (nx > 0 && ny > 0) {
        const c = dot / Math.sqrt(nx * ny);
        minCosine = Math.min(minCosine, c);
        sumCosine += c;
        n++;
      }
    }
  });
  return { maxAbsDiff, minCosine, meanCosine: n ? sumCosine / n : 1 };
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const modelsDir = resolve(flag(args, '--models', '.cache/models'));
  const data = loadCranfield(resolve(flag(args, '--data', '../shared/datasets/cranfield')));
  const models = flag(args, '--model', 'minilm-l6-384,minilm-l6-384-int8').split(',');
  const providers = flag(args, '--providers', 'cpu,cuda').split(',') as ('cpu' | 'cuda')[];
  const passes = Number(flag(args, '--passes', '3'));
  const repeat = Number(flag(args, '--repeat', '1'));
  const threads = Number(flag(args, '--threads', '0'));
  const jsonOut = flag(args, '--json', '');
  const baseline = flag(args, '--baseline', '');
  const limit = Number(flag(args, '--limit', '0'));
  const all = data.docs.map((d) => d.text).filter((t) => t.length > 0);
  const texts = limit > 0 ? all.slice(0, limit) : all;
  const docs = Array.from({ length: repeat }, () => texts).flat();

  let runMs = 0;
  setInferenceObserver((e) => (runMs += e.ms));
  const results: ProviderFigures[] = [];
  let baselineOut: EncodedText[] | null = null;
  for (const model of models) {
    let reference: EncodedText[] | null = null;
    for (const requested of providers) {
      const warnings: string[] = [];
      const logger = { info: (m: string) => console.log(`  [info] ${m}`), warn: (m: string) => (warnings.push(m), console.log(`  [warn] ${m}`)) };
      const t0 = performance.now();
      const enc = await TokenEncoder.load(join(modelsDir, model), { executionProvider: requested, deviceId: 0, ...(threads ? { intraOpThreads: threads } : {}), logger });
      const loadMs = performance.now() - t0;
      const tokens = docs.reduce((s, d) => s + enc.countTokens(d, 'doc'), 0);
      let t = performance.now();
      const out = await enc.encodeDocuments(docs);
      const warmupMs = performance.now() - t;
      const passMs: number[] = [];
      const runs: number[] = [];
      for (let p = 0; p < passes; p++) {
        runMs = 0;
        t = performance.now();
        await enc.encodeDocuments(docs);
        passMs.push(performance.now() - t);
        runs.push(runMs);
      }
      const qms: number[] = [];
      for (const { text: q } of limit > 0 ? data.queries.slice(0, limit) : data.queries) {
        t = performance.now();
        await enc.encodeQueries([q]);
        qms.push(performance.now() - t);
      }
      const ms = median(passMs);
      const r: ProviderFigures = {
        model,
        requested,
        provider: enc.executionProvider,
        warnings,
        loadMs: Math.round(loadMs),
        warmupMs: Math.round(warmupMs),
        passMs: passMs.map(Math.round),
        runMs: runs.map(Math.round),
        docsPerS: Math.round((docs.length / ms) * 1000),
        tokensPerS: Math.round((tokens / ms) * 1000),
        queryMsMedian: Number(median(qms).toFixed(2)),
        queryMsP90: Number(quantile(qms, 0.9).toFixed(2)),
      };
      if (reference) Object.assign(r, compare(reference, out, enc.dims));
      else reference = out;
      if (`${model}/${requested}` === baseline) baselineOut = out;
      else if (baselineOut) r.baseline = { of: baseline, ...compare(baselineOut, out, enc.dims) };
      results.push(r);
      console.log(
        `${model} ${requested} -> ${r.provider}: ${docs.length} docs, ${tokens} tokens; median pass ${Math.round(ms)} ms (session.run ${Math.round(median(runs))} ms): ` +
          `${r.docsPerS} docs/s, ${r.tokensPerS} tokens/s; load ${r.loadMs} ms, warm-up ${r.warmupMs} ms; query ${r.queryMsMedian} ms median, ${r.queryMsP90} ms p90` +
          (r.maxAbsDiff !== undefined ? `; vs ${providers[0]}: max |diff| ${r.maxAbsDiff.toExponential(2)}, min cosine ${r.minCosine!.toFixed(6)}, mean ${r.meanCosine!.toFixed(6)}` : '') +
          (r.baseline ? `; vs ${baseline}: max |diff| ${r.baseline.maxAbsDiff.toExponential(2)}, min cosine ${r.baseline.minCosine.toFixed(6)}, mean ${r.baseline.meanCosine.toFixed(6)}` : ''),
      );
      await enc.release();
    }
  }
  const summary = { node: process.version, docs: docs.length, passes, threads: threads || 'default', results };
  if (jsonOut) writeFileSync(jsonOut, JSON.stringify(summary, null, 2));
  console.log(JSON.stringify(summary));
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
