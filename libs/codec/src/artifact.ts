import type { CodecSettings } from '@lateral/shared';

/**
 * A fitted codec (PCA, side-information predictor, centroids ...), fitted once per collection
 * and codec version, stored beside the segments. Serialisable with a version and a checksum.
 */
export interface CodecArtifact {
  /** Artifact format version. */
  readonly version: number;
  /** CRC32C of the serialised artifact; segments record it to refuse a mismatched artifact. */
  readonly checksum: number;
  readonly settings: CodecSettings;
  /** Dims of the raw vectors the codec was fitted on. */
  readonly inputDims: number;
  readonly seed: bigint;
}
