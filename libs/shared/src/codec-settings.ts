import { z } from 'zod';
import { ID_PATTERN } from './ids';

/** Largest `codec.poolFactor` (token pooling at ingest). */
export const POOL_FACTOR_MAX = 16;

/**
 * How a collection's token vectors are stored in its segments (SPEC section 2).
 * `fp32`, `fp16` and `int8` need no fitting; `eden` and `residual` are fitted per collection
 * on a sample of raw vectors and stored as a versioned codec artifact in S3.
 */
export const CodecSettingsSchema = z
  .object({
    kind: z.enum(['fp32', 'fp16', 'int8', 'eden', 'residual']).default('fp16'),
    /** EDEN bits per coordinate (1..8); residual bits (1..4). */
    bits: z.number().int().min(1).max(8).optional(),
    /** Linear dimension reduction to this many dims (PCA); omitted = full dims. */
    dims: z.number().int().min(2).max(8192).optional(),
    /** EDEN block layout: per token (rotated-domain scoring) or SDR's cross-token 128-blocks. */
    layout: z.enum(['token', 'cross']).default('token'),
    norms: z.enum(['fp32', 'fp16']).default('fp32'),
    /**
     * Token pooling at ingest (next-plaid's `pool_factor`): each document's m token vectors are
     * clustered (Ward) into ceil(m / poolFactor) means before coding, so segments hold about
     * 1 / poolFactor of the tokens. Omitted or 1: no pooling. Not with `sideInfo` (400 naming both).
     */
    poolFactor: z
      .number()
      .int()
      .min(1)
      .max(POOL_FACTOR_MAX)
      .optional()
      .describe(`token pooling at ingest: each document's m token vectors are clustered (Ward) into ceil(m / poolFactor) means; integer 1..${POOL_FACTOR_MAX}, omitted = 1 (none); not with sideInfo`),
    /**
     * AESI-style side information: code only what the static embedding does not predict.
     * Pipeline: kind 'eden' only, and the collection's model must declare its static input
     * embedding table (manifest `staticEmbeddings`); otherwise collection creation and
     * re-compression answer 400 on `codec.sideInfo`.
     */
    sideInfo: z
      .boolean()
      .default(false)
      .describe("AESI-style side information (kind 'eden' only; the model must declare staticEmbeddings in its manifest.json, else 400)"),
    /**
     * A trained AESI autoencoder (a train job with head 'aesi' wrote it, `{collection}.aesi-c{dims}.v{n}`)
     * in place of the fitted ridge predictor and PCA: re-compression only, with kind 'eden',
     * sideInfo true and dims = its code size, else 400 on `codec.trained`.
     */
    trained: z
      .string()
      .regex(ID_PATTERN, `trained must be a trained codec name (${ID_PATTERN.source})`)
      .optional()
      .describe("name of a trained AESI codec (POST /v1/collections/{id}/train with head 'aesi'); re-compression only, with kind 'eden', sideInfo true and dims = its code size"),
  })
  .strict();

export type CodecSettings = z.infer<typeof CodecSettingsSchema>;
