/**
 * Where everything lives. S3 keys, Redis keys and job ids all carry the tenant, and are
 * deterministic so that a retried job overwrites its own output instead of duplicating it.
 */
export const s3Keys = {
  collectionPrefix: (t: string, c: string) => `tenants/${t}/collections/${c}/`,
  collection: (t: string, c: string) => `tenants/${t}/collections/${c}/collection.json`,
  /** Accepted documents of one ingest batch, NDJSON, written before the API answers. */
  batchDocuments: (t: string, c: string, batch: string) => `tenants/${t}/collections/${c}/batches/${batch}/documents.ndjson`,
  /** Raw fp16 token vectors + token ids of one batch (a segment with the fp16 codec). */
  rawVectors: (t: string, c: string, batch: string) => `tenants/${t}/collections/${c}/raw/${batch}.seg`,
  /** Compressed, immutable segment of one batch at one codec version. */
  segment: (t: string, c: string, batch: string, codecVersion: number) =>
    `tenants/${t}/collections/${c}/segments/v${codecVersion}/${batch}.seg`,
  codecArtifact: (t: string, c: string, codecVersion: number) => `tenants/${t}/collections/${c}/codecs/v${codecVersion}.codec`,
  manifest: (t: string, c: string, generation: number) =>
    `tenants/${t}/collections/${c}/manifests/${String(generation).padStart(10, '0')}.json`,
  manifestPrefix: (t: string, c: string) => `tenants/${t}/collections/${c}/manifests/`,
  rerankRequest: (t: string, job: string) => `tenants/${t}/rerank/${job}/request.json`,
  rerankResult: (t: string, job: string) => `tenants/${t}/rerank/${job}/result.json`,
};

export const redisKeys = {
  /** Hash: field = stage, value = number of documents that reached it. */
  ingestion: (prefix: string, t: string, c: string, ingestion: string) => `${prefix}:t:${t}:c:${c}:ingest:${ingestion}`,
  /** Hash of stage counts over the collection's whole life. */
  collectionStats: (prefix: string, t: string, c: string) => `${prefix}:t:${t}:c:${c}:stats`,
  /** Set of ingestion ids of the collection. */
  ingestions: (prefix: string, t: string, c: string) => `${prefix}:t:${t}:c:${c}:ingestions`,
  /** Current committed generation (integer) of the collection's manifest. */
  generation: (prefix: string, t: string, c: string) => `${prefix}:t:${t}:c:${c}:generation`,
  /** Lock held while a new manifest generation is written. */
  manifestLock: (prefix: string, t: string, c: string) => `${prefix}:t:${t}:c:${c}:manifest-lock`,
  collections: (prefix: string, t: string) => `${prefix}:t:${t}:collections`,
  /** Hash batchId -> SegmentRef JSON of a re-compression's written segments. */
  recompress: (prefix: string, t: string, c: string, v: number) => `${prefix}:t:${t}:c:${c}:recompress:v${v}`,
  /** Lock held while a codec version is fitted. */
  codecFitLock: (prefix: string, t: string, c: string, v: number) => `${prefix}:t:${t}:c:${c}:codec-fit:v${v}`,
};

/** BullMQ forbids ':' in custom ids; '~' never appears in resource ids. */
export const jobIds = {
  encode: (t: string, c: string, batch: string) => `${t}~${c}~encode~${batch}`,
  compress: (t: string, c: string, batch: string, v: number) => `${t}~${c}~compress~${batch}~v${v}`,
  index: (t: string, c: string, batch: string, v: number) => `${t}~${c}~index~${batch}~v${v}`,
  rerank: (t: string, id: string) => `${t}~rerank~${id}`,
  search: (t: string, id: string) => `${t}~search~${id}`,
};
