/**
 * Token pooling sweep (issue 10 item 5; `npm run eval -- compression --dataset DIR --pool-factors 1,2,3,4`):
 * what `codec.poolFactor` trades, storage against re-ranking quality, on a TREC-DL-format folder.
 *
 *   npm run eval -- compression --dataset ../shared/datasets/trec-dl-2019-passage --pool-factors 1,2,3,4
 *       [--model .cache/models/minilm-l6-384] [--pool-codecs fp16,eden-4b-token] [--quick] [--json]
 *       [--docs-per-segment 1000] [--sample-tokens 20000] [--seed N] [--run FILE] [--qrels FILE]
 *
 * Same data and scoring as the codec sweep (compression-trec-dl.ts): each judged query's
 * first-stage candidates are re-ranked with exact MaxSim (float64 loop). Documents and queries are
 * encoded once. For every factor f, every document's token vectors are pooled as the compress
 * processor does (libs/codec token-pooling.ts: Ward clustering into ceil(m / f) means,
 * re-normalised since the model's vectors are unit-norm), then, for every codec, the codec is
 * fitted on a seeded sample of the pooled rows, the collection written into segments (format v1,
 * pooled token ids = each cluster's representative, poolFactor in the descriptor), read back and
 * decoded, and scored. fp32 at factor 1 is the reference of every relative figure.
 *
 * Reported per (factor, codec): stored tokens, vector bytes per ORIGINAL token (segment files minus
 * the token-id and doc-id sections, divided by the unpooled token count, so factors compare on
 * the same documents), whole-segment bytes per original token (token ids included), nDCG@10, the
 * change against fp32 at factor 1 with the standard error of the paired per-query difference,
 * top-10 recall of that reference, and the pooling time. Rows `fp32-rawmean` keep the
 * un-normalised means, to show what re-normalising does for MaxSim.
 */
import { resolve } from 'node:path';
import { CodecSettingsSchema, type CodecSettings } from '@lateral/shared';
import { createCodec, fitCodec, poolBatch, readSegment, writeSegment } from '@lateral/codec';
import { mean, ndcgAt, orderByScore, pairedDifference, recallAt } from '../lib/metrics';
import { encodeCollection, sampleRows } from './compression-collection';
import { CliUsageError } from '../lib/cli';
import { compressionFlags } from './compression-flags';
import { loadRerankFolder, parseFlags } from './compression-trec-dl';

export interface PoolingRow {
  pool_factor: number;
  codec: string;
  /** Means re-normalised to unit length (the pipeline's choice for unit-norm models). */
  normalized: boolean;
  stored_tokens: number;
  /** Stored / original tokens. */
  token_ratio: number;
  /** Vector representation on disk (headers, offsets, norms, codes) / ORIGINAL tokens. */
  bytes_per_token: number;
  /** Whole segment files (token ids and doc ids included) / original tokens. */
  segment_bytes_per_token: number;
  'ndcg@10': number;
  /** nDCG / (fp32, factor 1)'s - 1. */
  ndcg_rel_change: number;
  ndcg_delta_se: number;
  top10_recall: number;
  /** Pooling of the whole collection (all documents), ms; 0 at factor 1. */
  pool_ms: number;
}

export interface PoolingResult extends Record<string, unknown> {
  dataset: string;
  model: string;
  dims: number;
  queries: number;
  documents: number;
  tokens: number;
  tokens_per_doc: { mean: number; max: number };
  reference: { name: string; 'ndcg@10': number; bytes_per_token: number };
  rows: PoolingRow[];
  ms: number;
}

/** Codec names of --pool-codecs. */
const CODECS: Record<string, Partial<CodecSettings>> = {
  fp32: { kind: 'fp32' },
  fp16: { kind: 'fp16' },
  int8: { kind: 'int8' },
  'eden-4b-token': { kind: 'eden', bits: 4, layout: 'token' },
  'eden-4b-cross': { kind: 'eden', bits: 4, layout: 'cross' },
  'eden-2b-token': { kind: 'eden', bits: 2, layout: 'token' },
  'residual-2b': { kind: 'residual', bits: 2 },
};

/** Exact MaxSim of one query (n x d) against one document (m rows at row xo); -inf for an empty document. */
function maxSim(q: Float32Array, n: number, x: Float32Array, xo: number, m: number, d: number): number {
  if (m === 0) return Number.NEGATIVE_INFINITY;
  let total = 0;
  for (let i = 0; i < n; i++) {
    let best = Number.NEGATIVE_INFINITY;
    for (let t = 0; t < m; t++) {
      const base = (xo + t) * d;
      let s = 0;
      for (let k = 0; k < d; k++) s += q[i * d + k]! * x[base + k]!;
      if (s > best) best = s;
    }
    total += best;
  }
  return total;
}

export function parsePoolFactors(args: string[]): number[] | null {
  const spec = compressionFlags(args)['pool-factors'];
  if (spec === undefined) return null;
  const list = spec.split(',').map((x) => Number(x.trim()));
  if (list.length === 0 || list.some((f) => !Number.isInteger(f) || f < 1 || f > 16)) throw new CliUsageError(`--pool-factors wants integers in 1..16, e.g. 1,2,3,4 (got ${spec})`);
  return list;
}

export async function runPoolingCompression(args: string[], log: (line: string) => void = (l) => process.stderr.write(`${l}\n`)): Promise<PoolingResult> {
  const f = parseFlags(args);
  const factors = parsePoolFactors(args) ?? [1, 2, 3, 4];
  const codecNames = compressionFlags(args)['pool-codecs'].split(',').map((s) => s.trim()).filter(Boolean);
  for (const c of codecNames) if (!CODECS[c]) throw new CliUsageError(`--pool-codecs: unknown codec ${c} (one of ${Object.keys(CODECS).join(', ')})`);
  if (!codecNames.includes('fp32')) codecNames.unshift('fp32');
  const model = f.modelGiven ? f.model : '.cache/models/minilm-l6-384';
  const t0 = performance.now();
  const dataDir = resolve(f.dataset ?? '../shared/datasets/trec-dl-2019-passage');
  const data = loadRerankFolder(dataDir, { run: f.run, qrels: f.qrels });
  const queriesList = f.quick ? data.queries.slice(0, 10) : data.queries;
  const used = [...new Set(queriesList.flatMap((q) => q.candidates))].sort((a, b) => a - b);
  const remap = new Map(used.map((g, i) => [g, i]));
  const docIds = used.map((g) => data.docIds[g]!);
  const texts = used.map((g) => data.texts[g]!);
  const queries = queriesList.map((q) => ({ ...q, candidates: q.candidates.map((g) => remap.get(g)!) }));

  const { enc, d, docs, qenc, offsets, tokenIds, vectors, T } = await encodeCollection(model, texts, queries.map((q) => q.text));
  const maxM = docs.reduce((s, e) => Math.max(s, e.length), 0);
  log(`${enc.manifest.name}: ${queries.length} queries, ${docs.length} documents, ${T} tokens (${(T / docs.length).toFixed(1)} per doc, max ${maxM}), d = ${d}, encoded in ${((performance.now() - t0) / 1000).toFixed(1)} s`);

  const rank = (scores: Float64Array[]) => {
    const perQuery: number[] = [];
    const tops: number[][] = [];
    scores.forEach((sc, qi) => {
      const q = queries[qi]!;
      const order = orderByScore(sc);
      perQuery.push(ndcgAt(order.map((i) => docIds[q.candidates[i]!]!), q.judged, 10));
      tops.push(order);
    });
    return { perQuery, tops };
  };
  let refPerQuery: number[] = [];
  let refTops: Set<number>[] = [];
  let refNdcg = NaN;
  let refBytes = NaN;
  const rows: PoolingRow[] = [];
  for (const factor of factors) {
    for (const normalize of factor === 1 ? [true] : [true, false]) {
      const tp = performance.now();
      const pooled = poolBatch(offsets, tokenIds, vectors, d, factor, { normalize });
      const poolMs = factor === 1 ? 0 : performance.now() - tp;
      const Tp = pooled.tokenOffsets[docs.length]!;
      const sample = sampleRows(pooled.vectors, Tp, d, f.sampleTokens, f.seed).rows;
      for (const name of normalize ? codecNames : ['fp32']) {
        const s = CodecSettingsSchema.parse(CODECS[name]);
        const artifact = s.kind === 'eden' || s.kind === 'residual' ? fitCodec(s, sample, d, { seed: f.seed }) : undefined;
        const codec = createCodec(s, artifact);
        const decoded = new Float32Array(Tp * d);
        let fileBytes = 0;
        let idBytes = 0;
        for (let a = 0; a < docs.length; a += f.docsPerSegment) {
          const b = Math.min(a + f.docsPerSegment, docs.length);
          const o0 = pooled.tokenOffsets[a]!;
          const o1 = pooled.tokenOffsets[b]!;
          const bytes = writeSegment(
            {
              docIds: docIds.slice(a, b),
              tokenOffsets: pooled.tokenOffsets.slice(a, b + 1).map((o) => o - o0),
              tokenIds: pooled.tokenIds.subarray(o0, o1),
              vectors: pooled.vectors.subarray(o0 * d, o1 * d),
              dims: d,
            },
            codec,
            { seed: f.seed, poolFactor: factor },
          );
          const r = readSegment(bytes, `pool${factor}/${name}/${a}`, artifact);
          if ((r.codec.poolFactor ?? 1) !== factor) throw new Error(`segment records poolFactor ${r.codec.poolFactor}, expected ${factor}`);
          const sizes = r.sectionSizes();
          fileBytes += bytes.length;
          idBytes += sizes.tokenIds! + sizes.docIds!;
          decoded.set(r.decodeAll(), o0 * d);
        }
        const scores = queries.map((q, qi) => {
          const e = qenc[qi]!;
          return Float64Array.from(q.candidates, (c) => maxSim(e.vectors, e.length, decoded, pooled.tokenOffsets[c]!, pooled.tokenOffsets[c + 1]! - pooled.tokenOffsets[c]!, d));
        });
        const { perQuery, tops } = rank(scores);
        const ndcg = mean(perQuery);
        const isRef = factor === 1 && name === 'fp32';
        if (isRef) {
          refPerQuery = perQuery;
          refTops = tops.map((o) => new Set(o.slice(0, 10)));
          refNdcg = ndcg;
          refBytes = (fileBytes - idBytes) / T;
        }
        const row: PoolingRow = {
          pool_factor: factor,
          codec: normalize ? name : `${name}-rawmean`,
          normalized: normalize,
          stored_tokens: Tp,
          token_ratio: Tp / T,
          bytes_per_token: (fileBytes - idBytes) / T,
          segment_bytes_per_token: fileBytes / T,
          'ndcg@10': ndcg,
          ndcg_rel_change: ndcg / refNdcg - 1,
          ndcg_delta_se: pairedDifference(perQuery, refPerQuery).se,
          top10_recall: isRef ? 1 : mean(tops.map((o, qi) => recallAt(o, refTops[qi]!, 10))),
          pool_ms: Math.round(poolMs),
        };
        rows.push(row);
        log(formatPoolingRow(row));
      }
    }
  }
  return {
    dataset: dataDir,
    model: enc.manifest.name,
    dims: d,
    queries: queries.length,
    documents: docs.length,
    tokens: T,
    tokens_per_doc: { mean: T / docs.length, max: maxM },
    reference: { name: 'fp32, poolFactor 1', 'ndcg@10': refNdcg, bytes_per_token: refBytes },
    rows,
    ms: Math.round(performance.now() - t0),
  };
}

export function formatPoolingRow(r: PoolingRow): string {
  const rel = `${r.ndcg_rel_change >= 0 ? '+' : ''}${(100 * r.ndcg_rel_change).toFixed(1)}%`;
  return (
    `f=${r.pool_factor} ${r.codec.padEnd(16)} ${String(r.stored_tokens).padStart(7)} tok (${r.token_ratio.toFixed(3)})  ${r.bytes_per_token.toFixed(2).padStart(7)} B/tok ` +
    `(${r.segment_bytes_per_token.toFixed(2)} with ids)  nDCG@10 ${r['ndcg@10'].toFixed(4)} (${rel.padStart(6)} +-${r.ndcg_delta_se.toFixed(4)})  R@10 ${r.top10_recall.toFixed(3)}  pool ${r.pool_ms} ms`
  );
}

export function formatPoolingTable(res: PoolingResult): string {
  return [
    `${res.model}: ${res.queries} queries, ${res.documents} documents, ${res.tokens} tokens (${res.tokens_per_doc.mean.toFixed(1)} per doc, max ${res.tokens_per_doc.max}), d = ${res.dims}`,
    `bytes per ORIGINAL token; nDCG@10 against ${res.reference.name} = ${res.reference['ndcg@10'].toFixed(4)} at ${res.reference.bytes_per_token.toFixed(2)} B/token (+- s.e. of the paired per-query difference)`,
    ...res.rows.map(formatPoolingRow),
  ].join('\n');
}
