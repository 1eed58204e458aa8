import { ID_PATTERN } from './ids';

/** Throws instead of building a key from an id outside the resource-id alphabet. */
function id(what: string, v: string): string {
  if (!ID_PATTERN.test(v)) throw new Error(`${what} '${String(v).slice(0, 80)}' is not a valid resource id (${ID_PATTERN.source})`);
  return v;
}
const hex64 = /^[0-9a-f]{64}$/;
const chunkName = (n: number) => String(n).padStart(6, '0');

/** S3 keys of text candidates, the text cache and batch files (every key carries the tenant). */
export const textKeys = {
  /** Distinct candidate texts of a re-rank request, for its encode-texts job (JSON array). */
  rerankTexts: (tenantId: string, rerankJobId: string) => `tenants/${id('tenant id', tenantId)}/rerank/${id('job id', rerankJobId)}/texts.json`,
  /**
   * An encoded candidate text, one segment of one document, under the tenant's text cache (a
   * top-level prefix per tenant, so the expiry cleanup lists nothing else): model, model version (a hash of its
   * files), token cap, codec (`fp16`, or `<collection>.v<codecVersion>` for a codec with an
   * artifact) and the text's sha256.
   */
  vectors: (tenantId: string, model: string, modelVersion: string, maxTokens: number, codecTag: string, sha256: string) => {
    if (!hex64.test(sha256)) throw new Error('text hash must be a sha256 in hex');
    return `text-cache/${id('tenant id', tenantId)}/${id('model', model)}/${id('model version', modelVersion)}/t${maxTokens}/${id('codec tag', codecTag)}/${sha256.slice(0, 2)}/${sha256}.seg`;
  },
  cachePrefix: (tenantId: string) => `text-cache/${id('tenant id', tenantId)}/`,
  /** Every tenant's text cache under one prefix, so the expiry cleanup lists the cache only. */
  cacheRoot: 'text-cache/',
};

export const batchKeys = {
  /** A batch's record: state, options, counts, chunks (written by the API, the plan and the finalize steps). */
  record: (tenantId: string, rerankBatchId: string) => `tenants/${id('tenant id', tenantId)}/batches/${id('batch id', rerankBatchId)}/batch.json`,
  prefix: (tenantId: string) => `tenants/${id('tenant id', tenantId)}/batches/`,
  input: (tenantId: string, rerankBatchId: string) => `tenants/${id('tenant id', tenantId)}/batches/${id('batch id', rerankBatchId)}/input.jsonl`,
  /** One chunk's rows as the plan validated them: binary and columnar (batch-chunk-format.ts); a chunk cut before that format is JSONL (`{ line, custom_id, row }` or `{ line, custom_id, error }`), still read. The name is kept, so a batch cut by either writer finds its chunks. */
  chunk: (tenantId: string, rerankBatchId: string, n: number) => `tenants/${id('tenant id', tenantId)}/batches/${id('batch id', rerankBatchId)}/chunks/${chunkName(n)}.jsonl`,
  chunkTexts: (tenantId: string, rerankBatchId: string, n: number) => `tenants/${id('tenant id', tenantId)}/batches/${id('batch id', rerankBatchId)}/chunks/${chunkName(n)}.texts.json`,
  /** The texts file of chunk `n` of the batch whose chunk texts file `textsKey` is (a chunk's header names texts kept in an earlier chunk's file). */
  siblingChunkTexts: (textsKey: string, n: number) => {
    const m = /^(tenants\/[^/]+\/batches\/[^/]+\/chunks\/)\d{6}\.texts\.json$/.exec(textsKey);
    if (!m) throw new Error(`'${textsKey.slice(0, 200)}' is not a batch chunk's texts file`);
    return `${m[1]}${chunkName(n)}.texts.json`;
  },
  chunkResult: (tenantId: string, rerankBatchId: string, n: number) => `tenants/${id('tenant id', tenantId)}/batches/${id('batch id', rerankBatchId)}/chunks/${chunkName(n)}.result.jsonl`,
  chunksPrefix: (tenantId: string, rerankBatchId: string) => `tenants/${id('tenant id', tenantId)}/batches/${id('batch id', rerankBatchId)}/chunks/`,
  result: (tenantId: string, rerankBatchId: string) => `tenants/${id('tenant id', tenantId)}/batches/${id('batch id', rerankBatchId)}/results.jsonl`,
  /** A caller's upload (`PUT /v1/uploads/{name}`): the only objects a batch may name as its input. */
  upload: (tenantId: string, name: string) => `tenants/${id('tenant id', tenantId)}/uploads/${id('upload name', name)}`,
  uploadsPrefix: (tenantId: string) => `tenants/${id('tenant id', tenantId)}/uploads/`,
};

/** BullMQ job ids ('~' never appears in resource ids). */
export const textJobIds = {
  rerankTexts: (tenantId: string, rerankJobId: string) => `${id('tenant id', tenantId)}~encode-texts~${id('job id', rerankJobId)}`,
  batchChunkTexts: (tenantId: string, rerankBatchId: string, n: number) => `${id('tenant id', tenantId)}~encode-texts~${id('batch id', rerankBatchId)}~${n}`,
  batchPlan: (tenantId: string, rerankBatchId: string) => `${id('tenant id', tenantId)}~batch~${id('batch id', rerankBatchId)}~plan`,
  batchChunk: (tenantId: string, rerankBatchId: string, n: number) => `${id('tenant id', tenantId)}~batch~${id('batch id', rerankBatchId)}~chunk~${n}`,
  batchFinalize: (tenantId: string, rerankBatchId: string) => `${id('tenant id', tenantId)}~batch~${id('batch id', rerankBatchId)}~finalize`,
};

/**
 * The codec the text cache keeps a collection's encoded texts with: the collection's own when
 * it has one beyond the default (`{ collectionId, codecVersion }`), null for the default fp16
 * (no collection, an fp16 token-layout collection, or side-information codecs, which need the
 * static table at read time). The cache key's codec tag follows from it.
 */
export function textCodecRef(
  collection: { id: string; codecVersion: number; codec: { kind: string; layout?: string; sideInfo?: boolean } } | null | undefined,
): { collectionId: string; codecVersion: number } | null {
  if (!collection) return null;
  const c = collection.codec;
  if (c.sideInfo || (c.kind === 'fp16' && (c.layout ?? 'token') === 'token')) return null;
  return { collectionId: collection.id, codecVersion: collection.codecVersion };
}

export const textCodecTag = (ref: { collectionId: string; codecVersion: number } | null) => (ref ? `${ref.collectionId}.v${ref.codecVersion}` : 'fp16');
