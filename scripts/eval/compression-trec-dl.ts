/**
 * TREC-DL compression sweep (issue 4; `npm run eval -- compression --dataset DIR`): what each codec
 * setting costs in bytes and in re-ranking quality.
 *
 *   npm run eval -- compression --dataset DIR [--json] [--plot out.svg] [--quick] [--run FILE] [--qrels FILE]
 *       [--model DIR] [--static-model DIR] [--settings prefix,...] [--docs-per-segment 1000] [--sample-tokens 20000] [--seed N]
 *
 * DIR is any TREC-DL-format folder (`retrieve_results*.json` = [{query, hits:[{content, qid, docid,
 * rank, score}]}], `qrels*.txt` = `qid 0 docid grade`, found by pattern by scripts/lib/trec-dl.ts),
 * e.g. ../shared/datasets/trec-dl-2019-passage. Each judged query's first-stage candidates are
 * re-ranked with exact MaxSim (float64 loop) under every setting: fp32, fp16, int8, EDEN B in
 * {1,2,3,4,5,6,8} x c in {full, 64, 32, 16} x layout {token, cross}, EDEN with side information
 * (static embedding) at a few (B, c), residual coding, and token-id references. Documents are
 * encoded once; each codec is fitted on a seeded sample of the collection's document token vectors,
 * the whole collection is written into segments (format v1), read back (checksums verified) and
 * decoded. Reported per setting: bytes per token of the vector representation on disk (whole
 * segment files minus the token-id and doc-id sections: headers, token offsets, norms, codes,
 * padding), nDCG@10 (linear gain, trec_eval ideal; scripts/lib/metrics), the recall of fp32's top
 * 10, the mean |score - fp32 score|, the relative reconstruction error.
 *
 * Side-information settings use the static embedding u of every token, recomputed at read time,
 * never stored: the contextual model's own table when its manifest declares `staticEmbeddings`
 * (as the pipeline does; for the GloVe models it equals glove-static-100d's output bit for bit),
 * else (or with --static-model) the static model (same tokenizer, no context).
 */
import { intFlag } from '../lib/cli';
import { compressionFlags } from './compression-flags';
import { aesiComparisonSweep, fitAesiSetting, parseAesiFlags, type AesiFitSummary, type AesiSetting } from './compression-aesi';
import { basename, resolve } from 'node:path';
import { CodecSettingsSchema, type CodecSettings } from '@lateral/shared';
import { maxsimOfSimilarities } from '@lateral/scoring';
import {
  IMAGE_MAX_BITS, LinearStage, createCodec, fitCodec, quantizeRotatedQuery, readSegment, scoreImage, writeSegment, type EdenCodec,
} from '@lateral/codec';
import { TokenEncoder, type EncodedText } from '@lateral/model';
import { hasRelevant, mean, ndcgAt, orderByScore, pairedDifference, recallAt, type Judgments } from '../lib/metrics';
import { loadTrecDlFolder, type TrecDlFiles } from '../lib/trec-dl';
import { encodeCollection, flatten, modelStaticTable, relativeError, sampleRows, segmentSlice } from './compression-collection';

/** One point of the re-ranking sweep. */
export interface RerankSetting {
  name: string;
  /** A codec setting, or one of the reference representations that store no vector codes. */
  codec?: CodecSettings;
  /** residual: k-means centroids (default the codec's rule, min(256, PLAID's)). */
  centroids?: number;
  /**
   * token-id: the document token is represented by its id alone and decoded to the static
   *   embedding of that id (glove-static-100d), scored against the contextual query;
   * token-id-pred: the same id decoded to the fitted linear prediction of the contextual vector
   *   from the static embedding (mean + W^T [u; 1], the side-information predictor with no codes);
   * static-model: static query vs static documents, where the id is an exact representation.
   */
  reference?: 'token-id' | 'token-id-pred' | 'static-model';
  /** SDR's AESI autoencoder instead of the fitted linear stage (--aesi, compression-aesi.ts). */
  aesi?: AesiSetting;
}

export interface RerankSettingResult {
  name: string;
  /** Vector representation on disk / tokens: segment headers, token offsets, norms, codes, padding (token ids and doc ids excluded). */
  bytes_per_token: number;
  /** Token ids on disk / tokens (i32 in segment format v1). */
  token_id_bytes_per_token: number;
  'ndcg@10': number;
  /** ndcg / fp32's - 1. */
  ndcg_rel_change: number;
  /** Standard error of the mean per-query paired difference (nDCG@10 - fp32's): the noise level of ndcg_rel_change x fp32. */
  ndcg_delta_se: number;
  /** |top-10 of this setting n top-10 of fp32| / 10, averaged over queries. */
  top10_recall: number;
  /** Mean over (query, candidate) of |MaxSim score - fp32 MaxSim score|. */
  mean_abs_score_error: number;
  /** sum ||x - x^||^2 / sum ||x||^2 over all document tokens (null for references). */
  relative_error: number | null;
  /**
   * EDEN token layout with bits <= IMAGE_MAX_BITS: the same codes scored the way the pipeline's
   * scorer does (int8 rotated image, int8 query; libs/codec rotated-image.ts).
   */
  int8_image?: { 'ndcg@10': number; ndcg_rel_change: number; top10_recall: number; mean_abs_score_error: number };
  ms: number;
  /** AESI settings: the training run (compression-aesi.ts). */
  aesi?: AesiFitSummary;
}

const DEFAULT_CTX_MODEL = '.cache/models/glove-ctx-100d';
const DEFAULT_STATIC_MODEL = '.cache/models/glove-static-100d';
const ALL_BITS = [1, 2, 3, 4, 5, 6, 8];
const ALL_DIMS: (number | undefined)[] = [undefined, 64, 32, 16];
/** (bits, dims, norms) of the side-information sweep; the fp16-norm points sit at or under ~6 B/token. */
const SIDE_POINTS: [number, number, 'fp32' | 'fp16'][] = [
  [4, 64, 'fp32'],
  [2, 64, 'fp32'],
  [4, 32, 'fp32'],
  [2, 32, 'fp32'],
  [6, 16, 'fp32'],
  [4, 16, 'fp32'],
  [2, 16, 'fp32'],
  [1, 32, 'fp32'],
  [1, 40, 'fp16'],
  [2, 20, 'fp16'],
  [3, 12, 'fp16'],
  [5, 8, 'fp16'],
];

function settingName(s: CodecSettings): string {
  if (s.kind === 'fp32' || s.kind === 'fp16' || s.kind === 'int8') return s.kind;
  const c = s.dims ? `c${s.dims}` : 'full';
  if (s.kind === 'residual') return `residual-${s.bits ?? 2}b-${c}`;
  return `eden-${s.bits ?? 6}b-${c}-${s.layout}${s.sideInfo ? '-side' : ''}${s.norms === 'fp16' ? '-fp16norms' : ''}`;
}

const codecSetting = (s: Partial<CodecSettings>): RerankSetting => {
  const codec = CodecSettingsSchema.parse(s);
  return { name: settingName(codec), codec };
};

/** The full sweep (about 70 points) or the --quick one. */
export function rerankSweep(quick = false): RerankSetting[] {
  const out: RerankSetting[] = [codecSetting({ kind: 'fp32' }), codecSetting({ kind: 'fp16' }), codecSetting({ kind: 'int8' })];
  if (quick) {
    out.push(
      codecSetting({ kind: 'eden', bits: 4, layout: 'cross' }),
      codecSetting({ kind: 'eden', bits: 4, layout: 'token' }),
      codecSetting({ kind: 'eden', bits: 2, dims: 32, layout: 'cross' }),
      codecSetting({ kind: 'eden', bits: 4, dims: 16, layout: 'cross', sideInfo: true }),
      codecSetting({ kind: 'residual', bits: 2 }),
      { name: 'token-id', reference: 'token-id' },
    );
    return out;
  }
  for (const layout of ['token', 'cross'] as const)
    for (const dims of ALL_DIMS) for (const bits of ALL_BITS) out.push(codecSetting({ kind: 'eden', bits, layout, ...(dims ? { dims } : {}) }));
  for (const [bits, dims, norms] of SIDE_POINTS) out.push(codecSetting({ kind: 'eden', bits, dims, layout: 'cross', norms, sideInfo: true }));
  for (const bits of [1, 2, 4]) out.push(codecSetting({ kind: 'residual', bits }));
  // PLAID's rule, K = 2^floor(log2(16 sqrt T)) (8,192 for TREC DL 2019's 275k tokens), capped at
  // sample / 8 so each centroid is fitted on about 8 sample vectors or more: 2,048 at 20,000.
  out.push({ ...codecSetting({ kind: 'residual', bits: 2 }), name: 'residual-2b-full-k2048', centroids: 2048 });
  out.push({ name: 'token-id', reference: 'token-id' }, { name: 'token-id-pred', reference: 'token-id-pred' }, { name: 'static-model', reference: 'static-model' });
  return out;
}

interface RerankQuery {
  qid: string;
  text: string;
  /** Indices into the unique document list, first-stage order. */
  candidates: number[];
  judged: Judgments;
}

interface RerankData {
  /** File names (in the folder) of the run and the qrels. */
  runFile: string;
  qrelsFile: string;
  docIds: string[];
  texts: string[];
  queries: RerankQuery[];
}

/**
 * A TREC-DL-format folder (scripts/lib/trec-dl.ts): the queries with at least one positive
 * judgement and candidates, each candidate as an index into the folder's unique documents.
 */
export function loadRerankFolder(dir: string, chosen: Partial<TrecDlFiles> = {}): RerankData {
  const { files, queries: run, qrels } = loadTrecDlFolder(dir, chosen);
  const index = new Map<string, number>();
  const docIds: string[] = [];
  const texts: string[] = [];
  const queries: RerankQuery[] = [];
  for (const e of run) {
    const judged = qrels.get(e.qid);
    if (!hasRelevant(judged) || e.hits.length === 0) continue;
    const candidates = e.hits.map((h) => {
      let i = index.get(h.docid);
      if (i === undefined) {
        i = docIds.length;
        index.set(h.docid, i);
        docIds.push(h.docid);
        texts.push(h.content);
      }
      return i;
    });
    queries.push({ qid: e.qid, text: e.text, candidates, judged: judged! });
  }
  return { runFile: basename(files.run), qrelsFile: basename(files.qrels), docIds, texts, queries };
}

/** Exact MaxSim of one query against one document (float64 accumulation; -inf for an empty doc). */
function maxSimOne(q: Float32Array, n: number, x: Float32Array, xo: number, m: number, d: number): number {
  if (m === 0) return Number.NEGATIVE_INFINITY;
  let total = 0;
  for (let i = 0; i < n; i++) {
    const qo = i * d;
    let best = Number.NEGATIVE_INFINITY;
    for (let t = 0; t < m; t++) {
      const base = xo + t * d;
      let s = 0;
      for (let k = 0; k < d; k++) s += q[qo + k]! * x[base + k]!;
      if (s > best) best = s;
    }
    total += best;
  }
  return total;
}

/** The command-line flags of `npm run eval -- compression` (both sweeps read --dataset and --model); CliUsageError for a bad one. */
export function parseFlags(args: string[]) {
  const v = compressionFlags(args);
  return {
    dataset: v.dataset ?? v.data,
    run: v.run,
    qrels: v.qrels,
    model: v.model ?? DEFAULT_CTX_MODEL,
    modelGiven: v.model !== undefined,
    staticModel: v['static-model'] ?? DEFAULT_STATIC_MODEL,
    staticModelGiven: v['static-model'] !== undefined,
    plot: v.plot,
    quick: v.quick === true,
    json: v.json === true,
    docsPerSegment: intFlag('docs-per-segment', v['docs-per-segment']),
    sampleTokens: intFlag('sample-tokens', v['sample-tokens']),
    seed: intFlag('seed', v.seed, 0),
    only: v.settings?.split(',').map((x) => x.trim()).filter(Boolean),
  };
}

export interface RerankCompressionResult extends Record<string, unknown> {
  dataset: string;
  model: string;
  static_model: string;
  /** Where the documents' static embeddings came from: the model's own table (manifest staticEmbeddings) or the static model; null when not needed. */
  static_embeddings: 'model-table' | 'static-model' | null;
  dims: number;
  queries: number;
  documents: number;
  tokens: number;
  /** UTF-8 bytes of the candidate texts / tokens (for scale; not part of any representation). */
  text_bytes_per_token: number;
  fp32: { bytes_per_token: number; 'ndcg@10': number };
  settings: RerankSettingResult[];
  smallest_within_1pct: { name: string; bytes_per_token: number; 'ndcg@10': number } | null;
  smallest_within_1pct_codec: { name: string; bytes_per_token: number; 'ndcg@10': number } | null;
  ms: number;
}

/**
 * Re-ranks each judged query's first-stage candidates with exact MaxSim under every setting of
 * the sweep. Documents and queries are encoded once; every codec setting is fitted on a seeded
 * sample of the collection's document token vectors, the whole collection is written into
 * segments (format v1) and read back, and the decoded vectors are scored.
 */
export async function runRerankCompression(
  args: string[],
  log: (line: string) => void = (l) => process.stderr.write(`${l}\n`),
): Promise<RerankCompressionResult> {
  const f = parseFlags(args);
  const t0 = performance.now();
  const dataDir = resolve(f.dataset ?? '../shared/datasets/trec-dl-2019-passage');
  const data = loadRerankFolder(dataDir, { run: f.run, qrels: f.qrels });
  let queriesList = data.queries;
  if (f.quick) queriesList = queriesList.slice(0, 10);
  // Only the documents the evaluated queries need.
  const used = [...new Set(queriesList.flatMap((q) => q.candidates))].sort((a, b) => a - b);
  const remap = new Map(used.map((g, i) => [g, i]));
  const docIds = used.map((g) => data.docIds[g]!);
  const texts = used.map((g) => data.texts[g]!);
  const queries = queriesList.map((q) => ({ ...q, candidates: q.candidates.map((g) => remap.get(g)!) }));
  const aesiFlags = parseAesiFlags(args);
  let sweep: RerankSetting[] = aesiFlags ? aesiComparisonSweep(aesiFlags.points, aesiFlags.options) : rerankSweep(f.quick);
  if (f.only) sweep = sweep.filter((s) => s.name === 'fp32' || f.only!.some((o) => s.name.startsWith(o)));
  const needStatic = sweep.some((s) => s.reference || s.codec?.sideInfo);

  const { enc, d, docs, qenc, offsets, tokenIds, vectors, T } = await encodeCollection(f.model, texts, queries.map((q) => q.text));
  log(`${enc.manifest.name}: ${queries.length} queries, ${docs.length} documents, ${T} tokens (${(T / docs.length).toFixed(1)} per doc), d = ${d}, encoded in ${((performance.now() - t0) / 1000).toFixed(1)} s`);

  let staticVectors: Float32Array | null = null;
  let staticQueries: EncodedText[] | null = null;
  let sd = 0;
  // Document side: the model's own table when it declares one and --static-model is not given
  // (bit-identical to the static model's output for the GloVe models); queries of the
  // 'static-model' reference always come from the static model.
  const table = needStatic && !f.staticModelGiven ? modelStaticTable(enc) : null;
  if (table) {
    staticVectors = table.lookup(tokenIds);
    sd = table.dims;
    log(`static embeddings of the documents: ${enc.manifest.name}'s table ${enc.manifest.staticEmbeddings!.file}`);
  }
  const needStaticModel = needStatic && (!table || sweep.some((s) => s.reference === 'static-model'));
  if (needStaticModel) {
    const st = await TokenEncoder.load(f.staticModel, { executionProvider: 'cpu', intraOpThreads: 2 });
    try {
      if (!table) {
        const flat = flatten(await st.encodeDocuments(texts), st.dims);
        if (flat.T !== T || flat.tokenIds.some((t, i) => t !== tokenIds[i])) throw new Error(`static model ${f.staticModel} tokenizes differently from ${f.model}`);
        staticVectors = flat.vectors;
        sd = st.dims;
      }
      staticQueries = await st.encodeQueries(queries.map((q) => q.text));
    } finally {
      await st.release();
    }
  }
  const sample = sampleRows(vectors, T, d, f.sampleTokens, f.seed);
  const sampleStatic = staticVectors ? sampleRows(staticVectors, T, sd, f.sampleTokens, f.seed).rows : undefined;

  const scoreAll = (qs: EncodedText[], x: Float32Array, dims: number): Float64Array[] =>
    queries.map((q, qi) => {
      const e = qs[qi]!;
      return Float64Array.from(q.candidates, (c) => maxSimOne(e.vectors, e.length, x, offsets[c]! * dims, offsets[c + 1]! - offsets[c]!, dims));
    });

  /**
   * Per query: nDCG@10 and the top-10 set of `scores`; against a reference run (fp32), the mean
   * recall of its top 10 and the mean |score - reference score| over finite pairs.
   */
  const rankMetrics = (scores: Float64Array[], ref: { scores: Float64Array[]; tops: Set<number>[] } | null) => {
    let recall = 0;
    let absErr = 0;
    let pairs = 0;
    const tops: Set<number>[] = [];
    const perQuery: number[] = [];
    scores.forEach((sc, qi) => {
      const q = queries[qi]!;
      const order = orderByScore(sc);
      perQuery.push(ndcgAt(order.map((i) => docIds[q.candidates[i]!]!), q.judged, 10));
      tops.push(new Set(order.slice(0, 10)));
      if (!ref) return;
      recall += recallAt(order, ref.tops[qi]!, 10);
      const r = ref.scores[qi]!;
      for (let i = 0; i < sc.length; i++)
        if (Number.isFinite(sc[i]!) && Number.isFinite(r[i]!)) {
          absErr += Math.abs(sc[i]! - r[i]!);
          pairs++;
        }
    });
    const ndcg = mean(perQuery);
    return { ndcg, perQuery, tops, top10Recall: recall / queries.length, meanAbsError: pairs > 0 ? absErr / pairs : 0 };
  };

  /** The same metrics when the codes are scored as the pipeline does (int8 rotated image, int8 query). */
  const imageScores = (im: { codec: EdenCodec; p: number; bytes: Uint8Array; scales: Float32Array; seed: bigint }, ref: { scores: Float64Array[]; tops: Set<number>[] }) => {
    const scores = queries.map((q, qi) => {
      const e = qenc[qi]!;
      const qq = quantizeRotatedQuery(im.codec.rotateQuery(e.vectors.subarray(0, e.length * d), d, im.seed), im.p);
      return Float64Array.from(q.candidates, (c) => {
        const a = offsets[c]!;
        const m = offsets[c + 1]! - a;
        if (m === 0) return -Infinity;
        return maxsimOfSimilarities(scoreImage(qq, im.bytes.subarray(a * im.p, (a + m) * im.p), im.scales.subarray(a, a + m), m), e.length, m);
      });
    });
    const m = rankMetrics(scores, ref);
    return { 'ndcg@10': m.ndcg, ndcg_rel_change: m.ndcg / fp32Ndcg - 1, top10_recall: m.top10Recall, mean_abs_score_error: m.meanAbsError };
  };

  const results: RerankSettingResult[] = [];
  let fp32Scores: Float64Array[] | null = null;
  let fp32Top: Set<number>[] = [];
  let fp32Ndcg = NaN;
  let fp32PerQuery: number[] = [];
  let tokenIdBytes = 4;
  let overheadBytes = 0; // header + token offsets share of an fp32 run: what a codes-free representation still pays
  let image: { codec: EdenCodec; p: number; bytes: Uint8Array; scales: Float32Array; seed: bigint } | null = null;
  for (const setting of sweep) {
    const ts = performance.now();
    image = null;
    let decoded: Float32Array;
    let vecBytes: number;
    let idBytes = tokenIdBytes;
    let qs = qenc;
    let relErr: number | null = null;
    if (setting.reference) {
      if (!staticVectors || (setting.reference === 'static-model' && !staticQueries)) throw new Error('reference settings need the static embeddings (and static-model the static model)');
      vecBytes = overheadBytes;
      if (setting.reference === 'token-id') decoded = staticVectors;
      else if (setting.reference === 'static-model') {
        decoded = staticVectors;
        qs = staticQueries!;
      } else {
        // The side-information predictor alone: decode zero codes.
        const art = fitCodec(CodecSettingsSchema.parse({ kind: 'eden', dims: 2, layout: 'cross', sideInfo: true }), sample.rows, d, { seed: f.seed, staticEmbeddings: sampleStatic, staticDims: sd });
        decoded = new LinearStage(art).inverse(new Float64Array(T * 2), T, d, staticVectors);
      }
      if (setting.reference !== 'static-model') relErr = relativeError(vectors, decoded);
    } else {
      const s = setting.codec!;
      const fitted = s.kind === 'eden' || s.kind === 'residual';
      const artifact = setting.aesi
        ? await fitAesiSetting(setting, sample.rows, sampleStatic, d, sd, f.seed, log)
        : fitted
        ? fitCodec(s, sample.rows, d, { seed: f.seed, ...(setting.centroids ? { centroids: setting.centroids } : {}), ...(s.sideInfo ? { staticEmbeddings: sampleStatic, staticDims: sd } : {}) })
        : undefined;
      const codec = createCodec(s, artifact);
      decoded = new Float32Array(T * d);
      const imaged = s.kind === 'eden' && s.layout === 'token' && !s.sideInfo && (s.bits ?? 6) <= IMAGE_MAX_BITS ? (codec as EdenCodec) : null;
      const p = imaged ? imaged.paddedDims(d) : 0;
      image = imaged ? { codec: imaged, p, bytes: new Uint8Array(T * p), scales: new Float32Array(T), seed: 0n } : null;
      let fileBytes = 0;
      let idSection = 0;
      let didSection = 0;
      for (let a = 0; a < docs.length; a += f.docsPerSegment) {
        const b = Math.min(a + f.docsPerSegment, docs.length);
        const o0 = offsets[a]!;
        const side = s.sideInfo ? { vectors: staticVectors!, dims: sd } : null;
        const bytes = writeSegment(segmentSlice({ docIds, offsets, tokenIds, vectors }, d, a, b, side), codec, { seed: f.seed });
        const r = readSegment(bytes, `${setting.name}/${a / f.docsPerSegment}`, artifact, {
          staticEmbeddings: (i) => staticVectors!.subarray(offsets[a + i]! * sd, offsets[a + i + 1]! * sd),
        });
        const sizes = r.sectionSizes();
        fileBytes += bytes.length;
        idSection += sizes.tokenIds!;
        didSection += sizes.docIds!;
        decoded.set(r.decodeAll(), o0 * d);
        if (image) image.seed = r.seed;
        if (image) for (let i = 0; i < b - a; i++) image.codec.rotatedImage(r.encodedDoc(i), r.tokenOffsets[i + 1]! - r.tokenOffsets[i]!, d, image.bytes, image.scales, offsets[a + i]!);
      }
      vecBytes = fileBytes - idSection - didSection;
      idBytes = idSection / T;
      if (s.kind === 'fp32') {
        tokenIdBytes = idBytes;
        const norm = codec.docBytes(1, d);
        overheadBytes = vecBytes - (norm.codes + norm.norms) * T;
      }
      relErr = s.kind === 'fp32' ? 0 : relativeError(vectors, decoded);
    }
    const scores = scoreAll(qs, decoded, d);
    const { ndcg, perQuery, tops, top10Recall, meanAbsError } = rankMetrics(scores, fp32Scores ? { scores: fp32Scores, tops: fp32Top } : null);
    const isFp32 = setting.codec?.kind === 'fp32';
    if (isFp32) {
      fp32Scores = scores;
      fp32Top = tops;
      fp32Ndcg = ndcg;
      fp32PerQuery = perQuery;
    }
    const { se } = pairedDifference(perQuery, fp32PerQuery);
    const row: RerankSettingResult = {
      name: setting.name,
      bytes_per_token: vecBytes / T,
      token_id_bytes_per_token: idBytes,
      'ndcg@10': ndcg,
      ndcg_rel_change: ndcg / fp32Ndcg - 1,
      ndcg_delta_se: se,
      top10_recall: isFp32 ? 1 : top10Recall,
      mean_abs_score_error: meanAbsError,
      relative_error: relErr,
      ms: Math.round(performance.now() - ts),
    };
    if (setting.reference) row.bytes_per_token = (overheadBytes + idBytes * T) / T; // the id is the representation
    if (setting.aesi?.summary) row.aesi = setting.aesi.summary;
    if (image && fp32Scores) row.int8_image = imageScores(image, { scores: fp32Scores, tops: fp32Top });
    results.push(row);
    log(formatRerankRow(row));
  }
  const fp32 = results.find((r) => r.name === 'fp32')!;
  const within = (rows: RerankSettingResult[]) => {
    const ok = rows.filter((r) => r['ndcg@10'] >= 0.99 * fp32Ndcg).sort((a, b) => a.bytes_per_token - b.bytes_per_token || b['ndcg@10'] - a['ndcg@10']);
    return ok[0] ? { name: ok[0].name, bytes_per_token: ok[0].bytes_per_token, 'ndcg@10': ok[0]['ndcg@10'] } : null;
  };
  const textBytes = texts.reduce((s, x) => s + Buffer.byteLength(x, 'utf8'), 0);
  return {
    dataset: dataDir,
    run: data.runFile,
    qrels: data.qrelsFile,
    model: enc.manifest.name,
    static_model: f.staticModel,
    static_embeddings: table ? 'model-table' : needStatic ? 'static-model' : null,
    dims: d,
    queries: queries.length,
    documents: docs.length,
    tokens: T,
    text_bytes_per_token: textBytes / T,
    fp32: { bytes_per_token: fp32.bytes_per_token, 'ndcg@10': fp32['ndcg@10'] },
    settings: results,
    smallest_within_1pct: within(results),
    smallest_within_1pct_codec: within(results.filter((r) => !['token-id', 'token-id-pred', 'static-model'].includes(r.name))),
    ms: Math.round(performance.now() - t0),
  };
}

export function formatRerankRow(r: RerankSettingResult): string {
  const rel = Number.isFinite(r.ndcg_rel_change) ? `${r.ndcg_rel_change >= 0 ? '+' : ''}${(100 * r.ndcg_rel_change).toFixed(1)}%` : 'n/a';
  return (
    `${r.name.padEnd(26)} ${r.bytes_per_token.toFixed(2).padStart(7)} B/tok  ${r['ndcg@10'].toFixed(4)} (${rel.padStart(6)} +-${r.ndcg_delta_se.toFixed(4)})  ` +
    `R@10(fp32) ${r.top10_recall.toFixed(3)}  |ds| ${r.mean_abs_score_error.toExponential(2)}  rel.err ${r.relative_error === null ? 'n/a     ' : r.relative_error.toExponential(2)}  ${r.ms} ms` +
    (r.int8_image ? `  [int8 image: ${r.int8_image['ndcg@10'].toFixed(4)}, R@10 ${r.int8_image.top10_recall.toFixed(3)}, |ds| ${r.int8_image.mean_abs_score_error.toExponential(2)}]` : '')
  );
}

export function formatRerankTable(res: RerankCompressionResult): string {
  const lines = [
    `${res.model}: ${res.queries} queries, ${res.documents} documents, ${res.tokens} tokens, d = ${res.dims}; token ids ${res.settings[0]?.token_id_bytes_per_token.toFixed(2)} B/token and text ${res.text_bytes_per_token.toFixed(2)} B/token on top of the vector bytes`,
    `${'setting'.padEnd(26)} ${'B/tok'.padStart(7)}        nDCG@10 (vs fp32, +- s.e. of the paired per-query difference)  top-10 recall of fp32, mean |score - fp32 score|, relative reconstruction error`,
    ...res.settings.map(formatRerankRow),
    `fp32 nDCG@10 ${res.fp32['ndcg@10'].toFixed(4)} at ${res.fp32.bytes_per_token.toFixed(2)} B/token`,
    `smallest within 1% of fp32 nDCG@10: ${res.smallest_within_1pct ? `${res.smallest_within_1pct.name} at ${res.smallest_within_1pct.bytes_per_token.toFixed(2)} B/token (${res.smallest_within_1pct['ndcg@10'].toFixed(4)})` : 'none'}` +
      (res.smallest_within_1pct_codec && res.smallest_within_1pct_codec.name !== res.smallest_within_1pct?.name
        ? `; smallest codec: ${res.smallest_within_1pct_codec.name} at ${res.smallest_within_1pct_codec.bytes_per_token.toFixed(2)} B/token (${res.smallest_within_1pct_codec['ndcg@10'].toFixed(4)})`
        : ''),
  ];
  return lines.join('\n');
}

