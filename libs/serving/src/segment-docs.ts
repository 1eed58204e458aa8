import { createCodec } from '@lateral/codec';
import { poolEncoded, type EncodedText } from '@lateral/model';

/*
 * How encoded texts become a segment's documents: written by ingest (raw batches) and the text
 * cache, read back by the segment cache. One layout for writer and reader.
 */

/** Raw vectors are always kept at fp16: re-compression starts from them without re-encoding. */
export const RAW_CODEC = createCodec({ kind: 'fp16', layout: 'token', norms: 'fp32', sideInfo: false });

/**
 * Concatenates per-document encodings into one segment's arrays (T x dims, row-major).
 * `pool` gives each document's dense vector: pass the model's (`(e) => encoder.pool(e)`); the
 * default is mean pooling.
 */
export function assembleSegmentDocs(
  ids: string[],
  encoded: EncodedText[],
  dims: number,
  metadata?: (Record<string, unknown> | null)[],
  pool: (e: EncodedText) => Float32Array = (e) => poolEncoded(e, dims, 'mean'),
) {
  const offsets = new Uint32Array(ids.length + 1);
  for (let i = 0; i < encoded.length; i++) offsets[i + 1] = offsets[i] + encoded[i].length;
  const total = offsets[ids.length];
  const tokenIds = new Int32Array(total);
  const vectors = new Float32Array(total * dims);
  const docVectors = new Float32Array(ids.length * dims);
  for (let i = 0; i < encoded.length; i++) {
    const e = encoded[i];
    tokenIds.set(e.tokenIds, offsets[i]);
    vectors.set(e.vectors, offsets[i] * dims);
    docVectors.set(pool(e), i * dims);
  }
  return { docIds: ids, tokenOffsets: offsets, tokenIds, vectors, dims, docVectors, metadata };
}
