/**
 * What both compression sweeps (compression-cranfield.ts, compression-trec-dl.ts) do with an
 * encoded collection: flatten it, sample its token vectors for fitting, cut it into segments,
 * find its static embeddings, and measure the reconstruction error.
 */
import type { SegmentDocs } from '@lateral/codec';
import { mulberry32 } from '@lateral/shared';
import { TokenEncoder, loadStaticEmbeddings, type EncodedText, type StaticEmbeddings } from '@lateral/model';

/** A flattened collection: token offsets (n + 1), T token ids, T x d vectors. */
export interface FlatCollection {
  offsets: Uint32Array;
  tokenIds: Int32Array;
  vectors: Float32Array;
  T: number;
}

/**
 * The contextual model's own static input embedding table (manifest `staticEmbeddings`), or null.
 * For the GloVe models its rows equal glove-static-100d's output bit for bit, so the numbers are
 * the same as with the static model, without a second encoding pass.
 */
export function modelStaticTable(encoder: TokenEncoder): StaticEmbeddings | null {
  return encoder.manifest.staticEmbeddings ? loadStaticEmbeddings(encoder.dir, encoder.manifest) : null;
}

/**
 * Loads `model` on the CPU, encodes the documents and the queries, and releases its session: the
 * (released) encoder for its manifest and directory, both encodings, and the flattened documents.
 */
export async function encodeCollection(model: string, texts: string[], queryTexts: string[]): Promise<FlatCollection & { enc: TokenEncoder; d: number; docs: EncodedText[]; qenc: EncodedText[] }> {
  const enc = await TokenEncoder.load(model, { executionProvider: 'cpu', intraOpThreads: 2 });
  let docs: EncodedText[];
  let qenc: EncodedText[];
  try {
    docs = await enc.encodeDocuments(texts);
    qenc = await enc.encodeQueries(queryTexts);
  } finally {
    await enc.release();
  }
  return { enc, d: enc.dims, docs, qenc, ...flatten(docs, enc.dims) };
}

/** Concatenates encoded texts: token offsets (n + 1), T token ids, T x d vectors. */
export function flatten(items: EncodedText[], d: number): FlatCollection {
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

/**
 * Documents [a, b) of a flattened collection as the input of one segment, with their static
 * embeddings when `side` is given (side-information codecs).
 */
export function segmentSlice(
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

/** A seeded sample of `k` rows of an n x d matrix (a partial Fisher-Yates shuffle driven by mulberry32), rows in index order. */
export function sampleRows(x: Float32Array, n: number, d: number, k: number, seed: number): { rows: Float32Array; idx: number[] } {
  const rand = mulberry32(seed);
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

/** sum ||x - ref||^2 / sum ||ref||^2 over all elements (0 when ref is all zero). */
export function relativeError(ref: Float32Array, x: Float32Array): number {
  let err = 0;
  let energy = 0;
  for (let k = 0; k < ref.length; k++) {
    err += (x[k]! - ref[k]!) ** 2;
    energy += ref[k]! ** 2;
  }
  return energy > 0 ? err / energy : 0;
}
