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
  /** Where every collection of a tenant lives (one common prefix per collection). */
  collectionsPrefix: (t: string) => `tenants/${t}/collections/`,
  rawPrefix: (t: string, c: string) => `tenants/${t}/collections/${c}/raw/`,
  segmentPrefix: (t: string, c: string, codecVersion: number) => `tenants/${t}/collections/${c}/segments/v${codecVersion}/`,
  /** One ingestion's record: its batches and their document counts (written before the API answers). */
  ingestion: (t: string, c: string, ingestion: string) => `tenants/${t}/collections/${c}/ingestions/${ingestion}.json`,
  ingestionPrefix: (t: string, c: string) => `tenants/${t}/collections/${c}/ingestions/`,
  /** A batch whose job failed for good (which stage, why). */
  batchFailure: (t: string, c: string, batch: string) => `tenants/${t}/collections/${c}/failures/${batch}.json`,
  failurePrefix: (t: string, c: string) => `tenants/${t}/collections/${c}/failures/`,
  /** A re-compression's written segment (its SegmentRef), until the last one commits them all. */
  pendingSegment: (t: string, c: string, v: number, batch: string) => `tenants/${t}/collections/${c}/pending/v${v}/${batch}.json`,
  pendingPrefix: (t: string, c: string, v: number) => `tenants/${t}/collections/${c}/pending/v${v}/`,
  /** Search index of one segment (IVF postings, BM25 postings), immutable like the segment. */
  segmentIndex: (t: string, c: string, batch: string, codecVersion: number) => `tenants/${t}/collections/${c}/indexes/v${codecVersion}/${batch}.idx`,
  /** IVF centroids of a collection at one codec version, fitted once (conditional write). */
  ivfCentroids: (t: string, c: string, codecVersion: number) => `tenants/${t}/collections/${c}/ivf/v${codecVersion}.centroids`,
  searchRequest: (t: string, job: string) => `tenants/${t}/search/${job}/request.json`,
  searchResult: (t: string, job: string) => `tenants/${t}/search/${job}/result.json`,
  rerankRequest: (t: string, job: string) => `tenants/${t}/rerank/${job}/request.json`,
  rerankResult: (t: string, job: string) => `tenants/${t}/rerank/${job}/result.json`,
};

/**
 * Redis holds queues and caches only: nothing here is needed to rebuild a collection, its
 * generations or its ingestions' progress after Redis loses its data (see docs/storage.md).
 */
export const redisKeys = {
  /** Lock held while a codec version is fitted (saves duplicate fits; the artifact write is conditional). */
  codecFitLock: (prefix: string, t: string, c: string, v: number) => `${prefix}:t:${t}:c:${c}:codec-fit:v${v}`,
};

/** BullMQ forbids ':' in custom ids; '~' never appears in resource ids. */
export const jobIds = {
  encode: (t: string, c: string, batch: string) => `${t}~${c}~encode~${batch}`,
  compress: (t: string, c: string, batch: string, v: number) => `${t}~${c}~compress~${batch}~v${v}`,
  index: (t: string, c: string, batch: string, v: number) => `${t}~${c}~index~${batch}~v${v}`,
  commit: (t: string, c: string, batch: string, v: number) => `${t}~${c}~commit~${batch}~v${v}`,
  rerank: (t: string, id: string) => `${t}~rerank~${id}`,
  search: (t: string, id: string) => `${t}~search~${id}`,
};
