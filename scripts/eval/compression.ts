/**
 * Issue 4 evaluation: what each codec setting costs in bytes and in ranking quality.
 *
 * Re-ranking sweep (`runCompressionEvalCli`, the `npm run eval -- compression` entry point):
 *
 *   npm run eval -- compression --dataset DIR [--json] [--plot out.svg] [--quick]
 *       [--model DIR] [--static-model DIR] [--settings prefix,...] [--docs-per-segment 1000] [--sample-tokens 20000] [--seed N]
 *
 * DIR is a TREC-DL-format folder (`retrieve_results*.json` = [{query, hits:[{content, qid, docid,
 * rank, score}]}], `qrels*.txt` = `qid 0 docid grade`), e.g. /work/shared/datasets/trec-dl-2019-passage.
 * Each judged query's first-stage candidates are re-ranked with exact MaxSim (float64 loop) under
 * every setting: fp32, fp16, int8, EDEN B in {1,2,3,4,5,6,8} x c in {full, 64, 32, 16} x layout
 * {token, cross}, EDEN with side information (static embedding) at a few (B, c), residual coding,
 * and token-id references. Documents are encoded once; each codec is fitted on a seeded sample of
 * the collection's document token vectors, the whole collection is written into segments (format
 * v1), read back (checksums verified) and decoded. Reported per setting: bytes per token of the
 * vector representation on disk (whole segment files minus the token-id and doc-id sections:
 * headers, token offsets, norms, codes, padding), nDCG@10 (linear gain, trec_eval ideal), the
 * recall of fp32's top 10, the mean |score - fp32 score|, the relative reconstruction error.
 * Table on stdout, progress on stderr; the returned object is printed as JSON by the dispatcher.
 *
 * Legacy Cranfield evaluation (`runCompressionEval`, all-documents ranking, used by
 * docs/segment-format.md): `npx tsx scripts/eval/compression.ts` without --dataset.
 *
 * Side-information settings use the static embedding u of every token, recomputed at read time,
 * never stored: the contextual model's own table when its manifest declares `staticEmbeddings`
 * (as the pipeline does; for the GloVe models it equals glove-static-100d's output bit for bit),
 * else (or with --static-model) the static model (same tokenizer, no context).
 */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { CodecSettingsSchema, type CodecSettings } from '../../libs/shared/src/index';
import { maxsimOfSimilarities } from '../../libs/scoring/src/index';
import { IMAGE_MAX_BITS, createCodec, fitCodec, quantizeRotatedQuery, readSegment, scoreImage, writeSegment, type CodecArtifact, type EdenCodec, type SegmentDocs } from '../../libs/codec/src/index';
import { LinearStage } from '../../libs/codec/src/linear-stage';
import { TokenEncoder, loadStaticEmbeddings, type EncodedText, type StaticEmbeddings } from '../../libs/model/src/index';
import { loadCranfield, ndcgAt10 } from '../lib/cranfield';
import { DEFAULT_CRANFIELD_DIR, maxSimScores } from '../lib/cranfield-eval';

/**
 * The contextual model's own static input embedding table (manifest `staticEmbeddings`), or null.
 * For the GloVe models its rows equal glove-static-100d's output bit for bit, so the numbers are
 * the same as with the static model, without a second encoding pass.
 */
function modelStaticTable(encoder: TokenEncoder): StaticEmbeddings | null {
  return encoder.manifest.staticEmbeddings ? loadStaticEmbeddings(encoder.dir, encoder.manifest) : null;
}

export interface CompressionEvalOptions {
  /** Cranfield directory. */
  dataDir?: string;
  /** Contextual encoder (default .cache/models/glove-ctx-100d). */
  modelDir?: string;
  /**
   * Static encoder giving the side information; default: the model's own table (manifest
   * staticEmbeddings) if it declares one, else .cache/models/glove-static-100d; null = skip sideInfo settings.
   */
  staticModelDir?: string | null;
  /** Settings to evaluate; default DEFAULT_COMPRESSION_SWEEP. */
  settings?: Partial<CodecSettings>[];
  /** Token vectors in the fitting sample (default 20,000). */
  sampleTokens?: number;
  /** Collection seed (fitting and EDEN signs). */
  seed?: number;
  docsPerSegment?: number;
  /** residual: k-means centroids (default the codec's rule: min(256, PLAID's)). */
  centroids?: number;
  log?: (line: string) => void;
}

export interface CompressionEvalRow {
  label: string;
  settings: CodecSettings;
  /** All segment bytes / tokens. */
  bytesPerToken: number;
  /** (codes + norms) / tokens. */
  vectorBytesPerToken: number;
  /** 4 d / vectorBytesPerToken. */
  compressionRatio: number;
  /** sum ||x - x^||^2 / sum ||x||^2 over all document tokens. */
  relativeError: number;
  ndcgMaxsim: number;
  /** ndcgMaxsim - fp32's. */
  deltaNdcg: number;
  fitMs: number;
  encodeMs: number;
  decodeMs: number;
}

export interface CompressionEvalResult {
  model: string;
  dims: number;
  documents: number;
  tokens: number;
  queries: number;
  rows: CompressionEvalRow[];
}

export const DEFAULT_COMPRESSION_SWEEP: Partial<CodecSettings>[] = [
  { kind: 'fp32' },
  { kind: 'fp16' },
  { kind: 'int8' },
  { kind: 'eden', bits: 6, layout: 'token' },
  { kind: 'eden', bits: 4, layout: 'token' },
  { kind: 'eden', bits: 6, layout: 'cross' },
  { kind: 'eden', bits: 4, layout: 'cross' },
  { kind: 'eden', bits: 2, layout: 'cross' },
  { kind: 'eden', bits: 4, layout: 'cross', norms: 'fp16' },
  { kind: 'eden', bits: 6, dims: 32, layout: 'cross' },
  { kind: 'eden', bits: 6, dims: 16, layout: 'cross' },
  { kind: 'eden', bits: 6, dims: 16, layout: 'cross', sideInfo: true },
  { kind: 'eden', bits: 5, dims: 8, layout: 'cross' },
  { kind: 'eden', bits: 5, dims: 8, layout: 'cross', sideInfo: true },
  { kind: 'residual', bits: 2 },
  { kind: 'residual', bits: 1 },
];

export function labelOf(s: CodecSettings): string {
  if (s.kind !== 'eden' && s.kind !== 'residual') return s.kind + (s.kind === 'int8' && s.norms === 'fp16' ? '/fp16-scale' : '');
  const parts = [s.kind, `${s.bits ?? (s.kind === 'eden' ? 6 : 2)}b`];
  if (s.dims) parts.push(`c${s.dims}`);
  if (s.kind === 'eden') parts.push(s.layout);
  if (s.norms === 'fp16') parts.push('fp16-norms');
  if (s.sideInfo) parts.push('side');
  return parts.join('-');
}

/**
 * Documents [a, b) of a flattened collection as the input of one segment, with their static
 * embeddings when `side` is given (side-information codecs).
 */
function segmentSlice(
  c: { docIds: string[]; offsets: Uint32Array; tokenIds: Int32Array; vectors: Float32Array },
  d: number,
  a: number,
  b: number,
  side: { vectors: Float32Array; dims: number } | null,
): SegmentDocs {
  const o0 = c.offsets[a]!;
  const o1 = c.offsets[b]!;
  return {
    docIds: c.docIds.slice(a, b),
    tokenOffsets: c.offsets.slice(a, b + 1).map((o) => o - o0),
    tokenIds: c.tokenIds.subarray(o0, o1),
    vectors: c.vectors.subarray(o0 * d, o1 * d),
    dims: d,
    ...(side ? { staticEmbeddings: side.vectors.subarray(o0 * side.dims, o1 * side.dims) } : {}),
  };
}

/** Concatenates encoded texts: token offsets (n + 1), T token ids, T x d vectors. */
function flatten(items: EncodedText[], d: number) {
  const offsets = new Uint32Array(items.length + 1);
  items.forEach((e, i) => (offsets[i + 1] = offsets[i]! + e.length));
  const T = offsets[items.length]!;
  const tokenIds = new Int32Array(T);
  const vectors = new Float32Array(T * d);
  items.forEach((e, i) => {
    tokenIds.set(e.tokenIds, offsets[i]!);
    vectors.set(e.vectors, offsets[i]! * d);
  });
  return { offsets, tokenIds, vectors, T };
}

/** A seeded sample of `k` rows of an n x d matrix (mulberry32; portable, not cryptographic). */
function sampleRows(x: Float32Array, n: number, d: number, k: number, seed: number): { rows: Float32Array; idx: number[] } {
  let a = seed >>> 0;
  const rand = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), a | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const idx = Array.from({ length: n }, (_, i) => i);
  const m = Math.min(k, n);
  for (let i = 0; i < m; i++) {
    const j = i + Math.floor(rand() * (n - i));
    [idx[i], idx[j]] = [idx[j]!, idx[i]!];
  }
  const chosen = idx.slice(0, m).sort((p, q) => p - q);
  const rows = new Float32Array(m * d);
  chosen.forEach((r, i) => rows.set(x.subarray(r * d, (r + 1) * d), i * d));
  return { rows, idx: chosen };
}

function rankBy(scores: Float64Array, docIds: string[]): string[] {
  return Array.from(scores.keys())
    .sort((a, b) => scores[b]! - scores[a]! || a - b)
    .map((i) => docIds[i]!);
}

export async function runCompressionEval(opts: CompressionEvalOptions = {}): Promise<CompressionEvalResult> {
  const log = opts.log ?? (() => {});
  const data = loadCranfield(opts.dataDir ?? DEFAULT_CRANFIELD_DIR);
  const seed = opts.seed ?? 20261121;
  const docsPerSegment = opts.docsPerSegment ?? 200;
  const settingsList = (opts.settings ?? DEFAULT_COMPRESSION_SWEEP).map((s) => CodecSettingsSchema.parse(s));

  const encoder = await TokenEncoder.load(opts.modelDir ?? '.cache/models/glove-ctx-100d', { executionProvider: 'cpu' });
  let docs: EncodedText[];
  let queries: EncodedText[];
  try {
    docs = await encoder.encodeDocuments(data.docs.map((x) => x.text));
    queries = await encoder.encodeQueries(data.queries.map((x) => x.text));
  } finally {
    await encoder.release();
  }
  const d = encoder.dims;
  const { offsets, tokenIds, vectors, T } = flatten(docs, d);
  const docIds = data.docs.map((x) => x.id);
  log(`${encoder.manifest.name}: ${docs.length} documents, ${T} tokens, ${d} dims, ${queries.length} queries`);

  // Static embeddings of the same tokens (same tokenizer and skiplist, no context): the model's own
  // table when it declares one (what the pipeline uses), else the static model.
  let staticVectors: Float32Array | null = null;
  let sd = 0;
  const table = opts.staticModelDir === undefined && settingsList.some((s) => s.sideInfo) ? modelStaticTable(encoder) : null;
  const staticDir = table ? null : opts.staticModelDir === undefined ? '.cache/models/glove-static-100d' : opts.staticModelDir;
  if (table) {
    staticVectors = table.lookup(tokenIds);
    sd = table.dims;
    log(`static embeddings: ${encoder.manifest.name}'s table ${encoder.manifest.staticEmbeddings!.file}`);
  }
  if (staticDir && settingsList.some((s) => s.sideInfo)) {
    const st = await TokenEncoder.load(staticDir, { executionProvider: 'cpu' });
    try {
      const sdocs = await st.encodeDocuments(data.docs.map((x) => x.text));
      const flat = flatten(sdocs, st.dims);
      if (flat.T !== T || flat.tokenIds.some((t, i) => t !== tokenIds[i])) throw new Error(`static model ${staticDir} tokenizes differently from the contextual model`);
      staticVectors = flat.vectors;
      sd = st.dims;
    } finally {
      await st.release();
    }
  }

  const sample = sampleRows(vectors, T, d, opts.sampleTokens ?? 20_000, seed);
  const sampleStatic = staticVectors ? sampleRows(staticVectors, T, sd, opts.sampleTokens ?? 20_000, seed).rows : undefined;

  const judged = data.queries.map((q, i) => ({ i, qrel: data.qrels.get(q.id) })).filter((q) => q.qrel && [...q.qrel.values()].some((g) => g > 0));
  const rows: CompressionEvalRow[] = [];
  let fp32Ndcg: number | null = null;
  for (const settings of settingsList) {
    const label = labelOf(settings);
    if (settings.sideInfo && !staticVectors) {
      log(`${label}: skipped (no static model)`);
      continue;
    }
    let t0 = Date.now();
    const fitted = settings.kind === 'eden' || settings.kind === 'residual';
    let artifact: CodecArtifact | undefined;
    if (fitted) {
      artifact = fitCodec(settings, sample.rows, d, {
        seed,
        ...(settings.sideInfo ? { staticEmbeddings: sampleStatic, staticDims: sd } : {}),
        ...(opts.centroids ? { centroids: opts.centroids } : {}),
      });
    }
    const fitMs = Date.now() - t0;
    const codec = createCodec(settings, artifact);

    t0 = Date.now();
    const segments: Uint8Array[] = [];
    for (let a = 0; a < docs.length; a += docsPerSegment) {
      const b = Math.min(a + docsPerSegment, docs.length);
      const side = settings.sideInfo ? { vectors: staticVectors!, dims: sd } : null;
      segments.push(writeSegment(segmentSlice({ docIds, offsets, tokenIds, vectors }, d, a, b, side), codec, { seed }));
    }
    const encodeMs = Date.now() - t0;

    t0 = Date.now();
    let fileBytes = 0;
    let vectorBytes = 0;
    const decoded: EncodedText[] = [];
    segments.forEach((bytes, s) => {
      const base = s * docsPerSegment;
      const r = readSegment(bytes, `${label}/${s}`, artifact, {
        staticEmbeddings: (i) => staticVectors!.subarray(offsets[base + i]! * sd, offsets[base + i + 1]! * sd),
      });
      const sizes = r.sectionSizes();
      fileBytes += bytes.length;
      vectorBytes += sizes.codes! + sizes.norms!;
      for (let i = 0; i < r.documents; i++) {
        const v = r.decodeDoc(i);
        const m = r.tokenOffsets[i + 1]! - r.tokenOffsets[i]!;
        decoded.push({ tokenIds: r.tokenIds.subarray(r.tokenOffsets[i]!, r.tokenOffsets[i + 1]!), vectors: v, weights: null, length: m, truncated: false });
      }
    });
    const decodeMs = Date.now() - t0;

    let err = 0;
    let energy = 0;
    decoded.forEach((e, i) => {
      const ref = docs[i]!.vectors;
      for (let k = 0; k < ref.length; k++) {
        err += (e.vectors[k]! - ref[k]!) ** 2;
        energy += ref[k]! ** 2;
      }
    });

    const scores = await maxSimScores(queries, decoded, d);
    let ndcg = 0;
    for (const { i, qrel } of judged) ndcg += ndcgAt10(rankBy(scores.subarray(i * docs.length, (i + 1) * docs.length), docIds), qrel!);
    ndcg /= judged.length;
    if (settings.kind === 'fp32') fp32Ndcg = ndcg;
    const row: CompressionEvalRow = {
      label,
      settings,
      bytesPerToken: fileBytes / T,
      vectorBytesPerToken: vectorBytes / T,
      compressionRatio: (4 * d * T) / vectorBytes,
      relativeError: err / energy,
      ndcgMaxsim: ndcg,
      deltaNdcg: fp32Ndcg === null ? NaN : ndcg - fp32Ndcg,
      fitMs,
      encodeMs,
      decodeMs,
    };
    rows.push(row);
    log(formatRow(row));
  }
  return { model: encoder.manifest.name, dims: d, documents: docs.length, tokens: T, queries: judged.length, rows };
}

export function formatRow(r: CompressionEvalRow): string {
  return (
    `${r.label.padEnd(34)} ${r.bytesPerToken.toFixed(2).padStart(7)} B/tok on disk  ${r.vectorBytesPerToken.toFixed(2).padStart(7)} B/tok vectors  ` +
    `CR ${r.compressionRatio.toFixed(1).padStart(5)}x  rel.err ${r.relativeError.toExponential(2)}  nDCG@10 ${r.ndcgMaxsim.toFixed(4)} ` +
    `(${Number.isNaN(r.deltaNdcg) ? '   n/a' : (r.deltaNdcg >= 0 ? '+' : '') + r.deltaNdcg.toFixed(4)})  fit ${r.fitMs} ms  encode ${r.encodeMs} ms  decode ${r.decodeMs} ms`
  );
}

// ---------------------------------------------------------------------------------------------
// Re-ranking sweep on a TREC-DL-format folder (issue 4): `npm run eval -- compression --dataset DIR`
// ---------------------------------------------------------------------------------------------

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
  judged: Map<string, number>;
}

interface RerankData {
  runFile: string;
  qrelsFile: string;
  docIds: string[];
  texts: string[];
  queries: RerankQuery[];
}

/** A TREC-DL-format folder: `retrieve_results*.json` (first-stage run with text) and `qrels*.txt`. */
export function loadRerankFolder(dir: string): RerankData {
  const files = readdirSync(dir);
  const runName = files.filter((f) => /^retrieve_results.*\.json$/.test(f)).sort()[0];
  const qrelsName = files.filter((f) => /^qrels.*\.txt$/.test(f)).sort()[0];
  if (!runName || !qrelsName) throw new Error(`${dir}: needs retrieve_results*.json and qrels*.txt (found ${files.join(', ')})`);
  const qrels = new Map<string, Map<string, number>>();
  for (const line of readFileSync(join(dir, qrelsName), 'utf8').split('\n')) {
    const f = line.trim().split(/\s+/);
    if (f.length < 4) continue;
    const row = qrels.get(f[0]!) ?? new Map<string, number>();
    row.set(f[2]!, Number(f[3]));
    qrels.set(f[0]!, row);
  }
  type Hit = { content: string; qid?: string | number; docid: string | number; rank: number; score?: number };
  type Entry = { query: string | { text: string; qid?: string | number }; hits: Hit[] };
  const run = JSON.parse(readFileSync(join(dir, runName), 'utf8')) as Entry[];
  const index = new Map<string, number>();
  const docIds: string[] = [];
  const texts: string[] = [];
  const queries: RerankQuery[] = [];
  for (const e of run) {
    const text = typeof e.query === 'string' ? e.query : e.query.text;
    const qid = String((typeof e.query === 'object' ? e.query.qid : undefined) ?? e.hits[0]?.qid ?? '');
    const judged = qrels.get(qid);
    if (!judged || ![...judged.values()].some((g) => g > 0) || e.hits.length === 0) continue;
    const hits = [...e.hits].sort((a, b) => a.rank - b.rank);
    const candidates = hits.map((h) => {
      const id = String(h.docid);
      let i = index.get(id);
      if (i === undefined) {
        i = docIds.length;
        index.set(id, i);
        docIds.push(id);
        texts.push(h.content);
      }
      return i;
    });
    queries.push({ qid, text, candidates, judged });
  }
  return { runFile: runName, qrelsFile: qrelsName, docIds, texts, queries };
}

/** nDCG@10 with linear gain, ideal DCG over every judged document of the query (trec_eval). */
function ndcg10(ranking: string[], judged: Map<string, number>): number {
  let dcg = 0;
  ranking.slice(0, 10).forEach((id, r) => (dcg += Math.max(0, judged.get(id) ?? 0) / Math.log2(r + 2)));
  const ideal = [...judged.values()].filter((g) => g > 0).sort((a, b) => b - a).slice(0, 10);
  const idcg = ideal.reduce((s, g, r) => s + g / Math.log2(r + 2), 0);
  return idcg > 0 ? dcg / idcg : 0;
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

/** Sorted candidate positions by score, ties in first-stage order. */
function orderOf(scores: Float64Array): number[] {
  return Array.from(scores.keys()).sort((a, b) => scores[b]! - scores[a]! || a - b);
}

function parseFlags(args: string[]) {
  const opt = (name: string) => (args.includes(name) ? args[args.indexOf(name) + 1] : undefined);
  return {
    dataset: opt('--dataset') ?? opt('--data'),
    model: opt('--model') ?? DEFAULT_CTX_MODEL,
    staticModel: opt('--static-model') ?? DEFAULT_STATIC_MODEL,
    staticModelGiven: opt('--static-model') !== undefined,
    plot: opt('--plot'),
    quick: args.includes('--quick'),
    json: args.includes('--json'),
    docsPerSegment: Number(opt('--docs-per-segment') ?? 1000),
    sampleTokens: Number(opt('--sample-tokens') ?? 20_000),
    seed: Number(opt('--seed') ?? 20261121),
    only: opt('--settings')?.split(',').map((x) => x.trim()).filter(Boolean),
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
  const data = loadRerankFolder(dataDir);
  let queriesList = data.queries;
  if (f.quick) queriesList = queriesList.slice(0, 10);
  // Only the documents the evaluated queries need.
  const used = [...new Set(queriesList.flatMap((q) => q.candidates))].sort((a, b) => a - b);
  const remap = new Map(used.map((g, i) => [g, i]));
  const docIds = used.map((g) => data.docIds[g]!);
  const texts = used.map((g) => data.texts[g]!);
  const queries = queriesList.map((q) => ({ ...q, candidates: q.candidates.map((g) => remap.get(g)!) }));
  let sweep = rerankSweep(f.quick);
  if (f.only) sweep = sweep.filter((s) => s.name === 'fp32' || f.only!.some((o) => s.name.startsWith(o)));
  const needStatic = sweep.some((s) => s.reference || s.codec?.sideInfo);

  const enc = await TokenEncoder.load(f.model, { executionProvider: 'cpu', intraOpThreads: 2 });
  let docs: EncodedText[];
  let qenc: EncodedText[];
  try {
    docs = await enc.encodeDocuments(texts);
    qenc = await enc.encodeQueries(queries.map((q) => q.text));
  } finally {
    await enc.release();
  }
  const d = enc.dims;
  const { offsets, tokenIds, vectors, T } = flatten(docs, d);
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
      const order = orderOf(sc);
      perQuery.push(ndcg10(order.map((i) => docIds[q.candidates[i]!]!), q.judged));
      const top = new Set(order.slice(0, 10));
      tops.push(top);
      if (!ref) return;
      let hit = 0;
      for (const i of top) if (ref.tops[qi]!.has(i)) hit++;
      recall += hit / Math.min(10, sc.length);
      const r = ref.scores[qi]!;
      for (let i = 0; i < sc.length; i++)
        if (Number.isFinite(sc[i]!) && Number.isFinite(r[i]!)) {
          absErr += Math.abs(sc[i]! - r[i]!);
          pairs++;
        }
    });
    const ndcg = perQuery.reduce((x, y) => x + y, 0) / queries.length;
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
      const artifact = fitted
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
    const diffs = perQuery.map((v, i) => v - fp32PerQuery[i]!);
    const meanDiff = diffs.reduce((a, b) => a + b, 0) / diffs.length;
    const se = diffs.length > 1 ? Math.sqrt(diffs.reduce((a, b) => a + (b - meanDiff) ** 2, 0) / (diffs.length - 1) / diffs.length) : 0;
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

function relativeError(ref: Float32Array, x: Float32Array): number {
  let err = 0;
  let energy = 0;
  for (let k = 0; k < ref.length; k++) {
    err += (x[k]! - ref[k]!) ** 2;
    energy += ref[k]! ** 2;
  }
  return energy > 0 ? err / energy : 0;
}

export function formatRerankRow(r: RerankSettingResult): string {
  const rel = Number.isFinite(r.ndcg_rel_change) ? `${r.ndcg_rel_change >= 0 ? '+' : ''}${(100 * r.ndcg_rel_change).toFixed(1)}%` : 'n/a';
  return (
    `${r.name.padEnd(26)} ${r.bytes_per_token.toFixed(2).padStart(7)} B/tok  ${r['ndcg@10'].toFixed(4)} (${rel.padStart(6)} +-${r.ndcg_delta_se.toFixed(4)})  ` +
    `R@10(fp32) ${r.top10_recall.toFixed(3)}  |ds| ${r.mean_abs_score_error.toExponential(2)}  rel.err ${r.relative_error === null ? 'n/a     ' : r.relative_error.toExponential(2)}  ${r.ms} ms` +
    (r.int8_image ? `  [int8 image: ${r.int8_image['ndcg@10'].toFixed(4)}, R@10 ${r.int8_image.top10_recall.toFixed(3)}, |ds| ${r.int8_image.mean_abs_score_error.toExponential(2)}]` : '')
  );
}

const PLOT_COLORS: [RegExp, string, string][] = [
  [/^(fp32|fp16|int8)$/, '#000000', 'fp32 / fp16 / int8'],
  [/^eden-.*-token$/, '#1f77b4', 'EDEN, token layout'],
  [/^eden-.*-cross$/, '#ff7f0e', 'EDEN, cross layout'],
  [/-side(-fp16norms)?$/, '#2ca02c', 'EDEN + side information (cross)'],
  [/^residual/, '#9467bd', 'residual (PLAID-style)'],
  [/^(token-id|token-id-pred|static-model)$/, '#d62728', 'token id only (references)'],
];

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

/** Hand-written SVG: x = bytes per token (log scale), y = nDCG@10, one labelled marker per setting. */
export function compressionPlotSvg(res: RerankCompressionResult): string {
  const W = 1100, H = 720, L = 70, R = 230, Tm = 40, B = 60;
  const pts = res.settings;
  const xs = pts.map((p) => p.bytes_per_token);
  const ys = pts.map((p) => p['ndcg@10']);
  const x0 = 10 ** Math.floor(Math.log10(Math.min(...xs))), x1 = 10 ** Math.ceil(Math.log10(Math.max(...xs)));
  const y0 = Math.max(0, Math.floor((Math.min(...ys) - 0.02) * 20) / 20), y1 = Math.min(1, Math.ceil((Math.max(...ys) + 0.01) * 20) / 20);
  const X = (v: number) => L + ((Math.log10(v) - Math.log10(x0)) / (Math.log10(x1) - Math.log10(x0))) * (W - L - R);
  const Y = (v: number) => Tm + (1 - (v - y0) / (y1 - y0)) * (H - Tm - B);
  const out: string[] = [];
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif">`);
  out.push(`<rect width="${W}" height="${H}" fill="white"/>`);
  out.push(`<text x="${L}" y="22" font-size="14">${esc(`${res.model}: nDCG@10 vs bytes per token on disk (${res.queries} queries, ${res.documents} docs, ${res.tokens} tokens)`)}</text>`);
  for (let e = Math.log10(x0); e <= Math.log10(x1) + 1e-9; e++) {
    for (const m of [1, 2, 5]) {
      const v = m * 10 ** e;
      if (v < x0 || v > x1) continue;
      out.push(`<line x1="${X(v)}" y1="${Tm}" x2="${X(v)}" y2="${H - B}" stroke="#ddd"/>`);
      out.push(`<text x="${X(v)}" y="${H - B + 16}" font-size="11" text-anchor="middle">${v}</text>`);
    }
  }
  for (let v = y0; v <= y1 + 1e-9; v += 0.05) {
    out.push(`<line x1="${L}" y1="${Y(v)}" x2="${W - R}" y2="${Y(v)}" stroke="#ddd"/>`);
    out.push(`<text x="${L - 6}" y="${Y(v) + 4}" font-size="11" text-anchor="end">${v.toFixed(2)}</text>`);
  }
  out.push(`<rect x="${L}" y="${Tm}" width="${W - L - R}" height="${H - Tm - B}" fill="none" stroke="#333"/>`);
  out.push(`<text x="${(L + W - R) / 2}" y="${H - 18}" font-size="12" text-anchor="middle">bytes per token on disk (vector representation: codes, norms, padding, headers; log scale)</text>`);
  out.push(`<text x="18" y="${(Tm + H - B) / 2}" font-size="12" text-anchor="middle" transform="rotate(-90 18 ${(Tm + H - B) / 2})">nDCG@10</text>`);
  const f32 = res.fp32['ndcg@10'];
  out.push(`<line x1="${L}" y1="${Y(0.99 * f32)}" x2="${W - R}" y2="${Y(0.99 * f32)}" stroke="#888" stroke-dasharray="5,4"/>`);
  out.push(`<text x="${W - R - 4}" y="${Y(0.99 * f32) - 4}" font-size="10" text-anchor="end" fill="#555">99% of fp32 (${(0.99 * f32).toFixed(4)})</text>`);
  for (const p of pts) {
    const color = [...PLOT_COLORS].reverse().find(([re]) => re.test(p.name))?.[1] ?? '#000';
    const cx = X(p.bytes_per_token), cy = Y(p['ndcg@10']);
    out.push(`<circle cx="${cx.toFixed(1)}" cy="${cy.toFixed(1)}" r="3.5" fill="${color}"><title>${esc(`${p.name}: ${p.bytes_per_token.toFixed(2)} B/token, nDCG@10 ${p['ndcg@10'].toFixed(4)}`)}</title></circle>`);
    out.push(`<text x="${(cx + 5).toFixed(1)}" y="${(cy - 3).toFixed(1)}" font-size="7.5" fill="${color}">${esc(p.name)}</text>`);
  }
  PLOT_COLORS.forEach(([, color, label], i) => {
    out.push(`<circle cx="${W - R + 20}" cy="${Tm + 14 + 18 * i}" r="4" fill="${color}"/>`);
    out.push(`<text x="${W - R + 30}" y="${Tm + 18 + 18 * i}" font-size="11">${esc(label)}</text>`);
  });
  out.push('</svg>');
  return out.join('\n');
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

/**
 * `npm run eval -- compression --dataset DIR [--json] [--plot out.svg] [--quick]`: runs the sweep,
 * prints the table (stdout; progress on stderr), writes the plot, returns the JSON object.
 * Without --dataset it runs the legacy Cranfield evaluation (`runCompressionEval`).
 * Other flags: --model DIR, --static-model DIR, --settings prefix,prefix, --docs-per-segment N (1000),
 * --sample-tokens N (20000), --seed N.
 */
export async function runCompressionEvalCli(args: string[]): Promise<Record<string, unknown>> {
  const f = parseFlags(args);
  if (!f.dataset) {
    const res = await runCompressionEval({ dataDir: DEFAULT_CRANFIELD_DIR, modelDir: args.includes('--model') ? f.model : undefined, log: (l) => console.log(l) });
    return res as unknown as Record<string, unknown>;
  }
  const res = await runRerankCompression(args);
  console.log(formatRerankTable(res));
  if (f.plot) {
    writeFileSync(f.plot, compressionPlotSvg(res));
    console.log(`plot written to ${f.plot}`);
  }
  return res;
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const res = await runCompressionEvalCli(args);
  if (args.includes('--json')) console.log(JSON.stringify(res));
}

if (import.meta.url === pathToFileURL(resolve(process.argv[1] ?? '')).href) {
  main().catch((err) => {
    console.error(err);
    process.exit(1);
  });
}
