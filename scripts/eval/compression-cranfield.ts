/**
 * Cranfield compression sweep (`npm run eval -- compression` without --dataset; also
 * `npx tsx scripts/eval/compression.ts`; used by docs/segment-format.md): every setting of
 * DEFAULT_COMPRESSION_SWEEP (or `settings`) ranks all 1,400 Cranfield documents for every judged
 * query with exact MaxSim over the decoded vectors (ONNX Runtime GEMMs, scripts/lib/cranfield-eval).
 * Documents are encoded once; each codec is fitted on a seeded sample of the collection's document
 * token vectors, the whole collection is written into segments (format v1), read back (checksums
 * verified) and decoded. Reported per setting: bytes per token on disk (whole segment files) and
 * of the vectors (codes + norms), compression ratio, relative reconstruction error, nDCG@10
 * (linear gain, scripts/lib/metrics) and its change from fp32, fit / encode / decode times.
 *
 * Side-information settings use the static embedding u of every token, recomputed at read time,
 * never stored: the contextual model's own table when its manifest declares `staticEmbeddings`
 * (as the pipeline does), else (or with `staticModelDir`) the static model (same tokenizer, no context).
 */
import { CodecSettingsSchema, type CodecSettings } from '@lateral/shared';
import { createCodec, fitCodec, readSegment, writeSegment, type CodecArtifact } from '@lateral/codec';
import { TokenEncoder, type EncodedText } from '@lateral/model';
import { loadCranfield } from '../lib/cranfield';
import { DEFAULT_CRANFIELD_DIR, maxSimScores } from '../lib/cranfield-eval';
import { hasRelevant, mean, ndcgAt, rankByScore } from '../lib/metrics';
import { flatten, modelStaticTable, relativeError, sampleRows, segmentSlice } from './compression-collection';

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

  const judged = data.queries.map((q, i) => ({ i, qrel: data.qrels.get(q.id) })).filter((q) => hasRelevant(q.qrel));
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
    const decodedVectors = new Float32Array(T * d);
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
        const m = r.tokenOffsets[i + 1]! - r.tokenOffsets[i]!;
        const at = offsets[base + i]! * d;
        decodedVectors.set(r.decodeDoc(i), at);
        const v = decodedVectors.subarray(at, at + m * d);
        decoded.push({ tokenIds: r.tokenIds.subarray(r.tokenOffsets[i]!, r.tokenOffsets[i + 1]!), vectors: v, weights: null, length: m, truncated: false });
      }
    });
    const decodeMs = Date.now() - t0;

    const scores = await maxSimScores(queries, decoded, d);
    const ndcg = mean(judged.map(({ i, qrel }) => ndcgAt(rankByScore(scores.subarray(i * docs.length, (i + 1) * docs.length), docIds), qrel!, 10)));
    if (settings.kind === 'fp32') fp32Ndcg = ndcg;
    const row: CompressionEvalRow = {
      label,
      settings,
      bytesPerToken: fileBytes / T,
      vectorBytesPerToken: vectorBytes / T,
      compressionRatio: (4 * d * T) / vectorBytes,
      relativeError: relativeError(vectors, decodedVectors),
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
