/**
 * Issue 4 evaluation: what each codec setting costs in bytes and in ranking quality.
 *
 * For every codec setting: fit on a seeded sample of document token vectors, write the whole
 * collection into segments (`docsPerSegment` documents each), read them back (all checksums
 * verified), decode, and rank every query against every document with exact MaxSim. Reported:
 * bytes per token from the actual segment bytes (headers, doc ids, offsets, token ids, norms,
 * padding and codes included) and for the vectors alone (codes + norms), the compression ratio
 * against fp32 vectors, relative reconstruction error, nDCG@10 (and its change against fp32),
 * and fit / encode / decode times.
 *
 * Side-information settings use the static model (same tokenizer, no context) as the static
 * embedding u of every token, recomputed at read time, never stored.
 *
 *   npx tsx scripts/eval/compression.ts [--data DIR] [--model DIR] [--static-model DIR] [--docs-per-segment 200]
 */
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { CodecSettingsSchema, type CodecSettings } from '../../libs/shared/src/index';
import { createCodec, fitCodec, readSegment, writeSegment, type CodecArtifact } from '../../libs/codec/src/index';
import { TokenEncoder, type EncodedText } from '../../libs/model/src/index';
import { loadCranfield, ndcgAt10 } from '../lib/cranfield';
import { DEFAULT_CRANFIELD_DIR, maxSimScores } from '../lib/cranfield-eval';

export interface CompressionEvalOptions {
  /** Cranfield directory. */
  dataDir?: string;
  /** Contextual encoder (default .cache/models/glove-ctx-100d). */
  modelDir?: string;
  /** Static encoder giving the side information (default .cache/models/glove-static-100d); null = skip sideInfo settings. */
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

  // Static embeddings of the same tokens (same tokenizer and skiplist, no context).
  let staticVectors: Float32Array | null = null;
  let sd = 0;
  const staticDir = opts.staticModelDir === undefined ? '.cache/models/glove-static-100d' : opts.staticModelDir;
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
      const o0 = offsets[a]!;
      const o1 = offsets[b]!;
      segments.push(
        writeSegment(
          {
            docIds: docIds.slice(a, b),
            tokenOffsets: offsets.slice(a, b + 1).map((o) => o - o0),
            tokenIds: tokenIds.subarray(o0, o1),
            vectors: vectors.subarray(o0 * d, o1 * d),
            dims: d,
            ...(settings.sideInfo ? { staticEmbeddings: staticVectors!.subarray(o0 * sd, o1 * sd) } : {}),
          },
          codec,
          { seed },
        ),
      );
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

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const arg = (name: string) => {
    const i = args.indexOf(name);
    return i >= 0 ? args[i + 1] : undefined;
  };
  const res = await runCompressionEval({
    dataDir: arg('--data'),
    modelDir: arg('--model'),
    staticModelDir: arg('--static-model'),
    docsPerSegment: arg('--docs-per-segment') ? Number(arg('--docs-per-segment')) : undefined,
    log: (l) => console.log(l),
  });
  console.log(`\n${res.model}: ${res.documents} docs, ${res.tokens} tokens, d = ${res.dims}, ${res.queries} judged queries`);
}

if (import.meta.url === pathToFileURL(resolve(process.argv[1] ?? '')).href) {
  main().catch((err) => {
    console.error(err);
    process.exit(1);
  });
}
