import { crc32c, createCodec, writeSegment, type CodecArtifact } from '@lateral/codec';
import { s3Keys, type CodecSettings, type CollectionManifest, type SegmentRef } from '@lateral/shared';
import type { EncodedText } from '@lateral/model';
import { assembleSegmentDocs } from '../segment-docs';

/**
 * What the segment cache specs store and read: small documents of three tokens each, written as
 * real segments with the real codec, their manifest references, and manifests over them.
 */

/** `n` documents of three tokens (ids from `firstTokenId + 3d`), values depending on the salt and position. */
export const threeTokenDocs = (n: number, salt: number, dims: number, firstTokenId = 0): EncodedText[] =>
  Array.from({ length: n }, (_, d) => ({
    tokenIds: Int32Array.from([firstTokenId + d * 3, firstTokenId + d * 3 + 1, firstTokenId + d * 3 + 2]),
    vectors: Float32Array.from({ length: 3 * dims }, (_, k) => (((salt * 5 + d * 3 + k * 7) % 11) - 5) / 5),
    weights: null,
    length: 3,
    truncated: false,
  }));

/** Segment `batchId` (codec version 1) of `ids` over `docs`, written with `settings` (and ME-BERT's prefix section of `prefixRows` rows when > 0), and its manifest reference. */
export function storedSegment(
  tenantId: string,
  collectionId: string,
  batchId: string,
  ids: string[],
  docs: EncodedText[],
  dims: number,
  settings: CodecSettings,
  artifact: CodecArtifact,
  prefixRows = 0,
): { ref: SegmentRef; bytes: Uint8Array } {
  const bytes = writeSegment(assembleSegmentDocs(ids, docs, dims), createCodec(settings, artifact), { prefixRows });
  const ref: SegmentRef = {
    batchId,
    codecVersion: 1,
    key: s3Keys.segment(tenantId, collectionId, batchId, 1),
    documents: ids.length,
    tokens: ids.length * 3,
    bytes: bytes.byteLength,
    checksum: crc32c(bytes).toString(16).padStart(8, '0'),
  };
  return { ref, bytes };
}

/** Generation `generation` (codec version 1) of the collection over `refs`. */
export const manifestOf = (tenantId: string, collectionId: string, generation: number, refs: SegmentRef[]): CollectionManifest => ({
  tenantId,
  collectionId,
  generation,
  codecVersion: 1,
  committedAt: `2026-01-01T00:00:0${generation}.000Z`,
  segments: refs,
});
