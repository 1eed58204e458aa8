import type { RotatedImageSet } from '@lateral/kernels';
import type { UnavailableSegment } from '@lateral/shared';

/**
 * The documents a re-rank scores (its candidates, live in one committed generation), gathered by
 * SegmentCache.view from the segments holding them: per-document token offsets, pooled document
 * vectors and an id -> row map over those documents only, plus their token vectors in one of two forms:
 * - `rotated`: EDEN token-layout codes (bits <= IMAGE_MAX_BITS, no side information) as the int8
 *   rotated image MaxSim scores with integer GEMMs; `vectors` is null and other scorers get
 *   their candidates decoded from the codes by `rowVectors`.
 * - `vectors`: every token decoded to fp32 (T x dims), for the other codecs.
 * When a document id appears in several segments the last committed one wins; deleted ids are absent.
 */
export interface CollectionView {
  generation: number;
  dims: number;
  vectors: Float32Array | null;
  rotated: RotatedImageSet | null;
  /** docs + 1 offsets (in tokens) into `vectors` / the rotated image. */
  offsets: Uint32Array;
  docVectors: Float32Array;
  rowOf: Map<string, number>;
  docIds: string[];
  tokens: number;
  /** Token vectors of `rows` as one T x dims fp32 block with rows + 1 offsets (decoded from the codes when `vectors` is null). */
  rowVectors(rows: number[]): { docs: Float32Array; offsets: Uint32Array };
  /**
   * Token vectors of `rows` as one block per row (rows_i x dims each), where the view holds them so
   * (re-rank's text candidates: the text cache's entries): MaxSim then scores them without the one
   * contiguous copy rowVectors makes (GemmMaxsim.scoreBlocks). Absent: rowVectors.
   */
  rowBlocks?(rows: number[]): Float32Array[];
  /**
   * Segments of the generation that could not be read (checksum, decoding, missing object) among
   * those the candidates live in, plus any whose ids are not known; absent or empty: none.
   */
  unavailable?: UnavailableSegment[];
  /** Candidate ids that are live in the generation but held by an unavailable segment (not in rowOf). */
  unavailableIds?: string[];
}
