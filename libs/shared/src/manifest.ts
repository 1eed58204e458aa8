import { z } from 'zod';

/**
 * The small JSON manifest (`manifest.json`) that sits beside `model.onnx` and `tokenizer.json`
 * in a model directory. Any ColBERT / XTR / ME-BERT style export can be served by writing one.
 */
export const ModelManifestSchema = z.object({
  name: z.string().min(1),
  /** Manifest format version. */
  format: z.literal(1),
  inputs: z
    .object({
      inputIds: z.string().default('input_ids'),
      attentionMask: z.string().nullable().default('attention_mask'),
      /**
       * Graph input for BERT's segment ids (`token_type_ids`), fed as zeros of the ids' dtype and
       * shape (every sequence is a single segment); null when the graph takes none.
       */
      tokenTypeIds: z.string().nullable().default(null),
      /** Element type of the id / mask / token type inputs. */
      dtype: z.enum(['int64', 'int32']).default('int64'),
    })
    .prefault({}),
  outputs: z
    .object({
      /** Output holding the token vectors, shape [batch, seq, dims]. */
      tokenEmbeddings: z.string().default('last_hidden_state'),
      /** Optional per-token signed weights, shape [batch, seq] (Signed MaxSim). */
      tokenWeights: z.string().nullable().default(null),
    })
    .prefault({}),
  dims: z.number().int().positive().max(8192),
  maxQueryTokens: z.number().int().positive().max(4096),
  maxDocTokens: z.number().int().positive().max(16384),
  /** Marker tokens prepended after [CLS] (ColBERT's [Q] / [D]); null when the model uses none. */
  queryMarker: z.string().nullable().default(null),
  docMarker: z.string().nullable().default(null),
  /** Tokens added around every sequence (BERT's [CLS] ... [SEP]); null when none. */
  clsToken: z.string().nullable().default(null),
  sepToken: z.string().nullable().default(null),
  padToken: z.string().default('[PAD]'),
  /** ColBERT query augmentation: pad queries to maxQueryTokens with this token, attended to. */
  queryPadding: z.enum(['mask', 'none']).default('none'),
  maskToken: z.string().default('[MASK]'),
  /** Document tokens dropped after encoding (ColBERT's punctuation skiplist). */
  skiplist: z.array(z.string()).default([]),
  /** L2-normalise output vectors in the runtime (false when the graph already does it). */
  normalize: z.boolean().default(true),
  /**
   * How the single `dense` vector is pooled: `mean` of the kept token vectors, or `cls`, the
   * vector of the clsToken position (which then must be set). Either way it is L2-normalised.
   */
  pooling: z.enum(['mean', 'cls']).default('mean'),
  /** Free-form provenance shown by the API (source vectors, vocabulary size, window ...). */
  description: z.string().default(''),
  /**
   * The model's static input embedding table, for codecs with side information (`codec.sideInfo`):
   * a file in the model directory holding one row of `dims` values per token id of the tokenizer's
   * vocabulary (row-major, little-endian, no header; `fp16` or `fp32`), the context-free vector
   * of each token. The codec predicts each contextual vector from its token's row and codes only
   * the residual, so the table must never change for a deployed collection. null = none.
   */
  staticEmbeddings: z
    .object({
      file: z
        .string()
        .min(1)
        .regex(/^[A-Za-z0-9_.-]+$/, 'a file name inside the model directory')
        .refine((f) => f !== '.' && f !== '..', 'a file name inside the model directory'),
      dims: z.number().int().positive().max(8192),
      dtype: z.enum(['fp16', 'fp32']),
    })
    .strict()
    .nullable()
    .default(null),
}).superRefine((m, ctx) => {
  // Each graph input is fed once: two fields naming the same input would feed it twice.
  const inputs: [string, string | null][] = [
    ['inputIds', m.inputs.inputIds],
    ['attentionMask', m.inputs.attentionMask],
    ['tokenTypeIds', m.inputs.tokenTypeIds],
  ];
  inputs.forEach(([field, name], i) => {
    const first = inputs.findIndex(([, n]) => n === name);
    if (name !== null && first < i) {
      ctx.addIssue({ code: 'custom', path: ['inputs', field], message: `'${name}' is already named by inputs.${inputs[first]![0]}` });
    }
  });
  // 'cls' pooling takes the vector at the clsToken position, so there must be one.
  if (m.pooling === 'cls' && m.clsToken === null) {
    ctx.addIssue({ code: 'custom', path: ['pooling'], message: "'cls' pools the vector of the clsToken position: set clsToken (e.g. \"[CLS]\") or use 'mean'" });
  }
});

export type ModelManifest = z.infer<typeof ModelManifestSchema>;
