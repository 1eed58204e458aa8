import { assertResourceId as safe } from './ids';

/**
 * The WARP centroid epoch's part of a key: '' for epoch 0 (the centroids fitted by the first index
 * job of a codec version, and everything written before refits existed), `.e{n}` after the n-th refit.
 */
function epochPart(epoch: number): string {
  if (!Number.isInteger(epoch) || epoch < 0) throw new RangeError(`WARP centroid epoch must be an integer >= 0, got ${epoch}`);
  return epoch > 0 ? `.e${epoch}` : '';
}

/**
 * Where everything lives. S3 keys, Redis keys and job ids all carry the tenant, and are
 * deterministic so that a retried job overwrites its own output instead of duplicating it.
 * Every builder checks each id it is given against ID_PATTERN (assertResourceId) and throws
 * instead of building a key from anything else: no '/', '..', NUL or 10 kB id reaches S3 or Redis.
 */
export const s3Keys = {
  collectionPrefix: (tenantId: string, collectionId: string) => `tenants/${safe('tenant id', tenantId)}/collections/${safe('collection id', collectionId)}/`,
  collection: (tenantId: string, collectionId: string) => `tenants/${safe('tenant id', tenantId)}/collections/${safe('collection id', collectionId)}/collection.json`,
  /** Accepted documents of one ingest batch, NDJSON, written before the API answers. */
  batchDocuments: (tenantId: string, collectionId: string, ingestBatchId: string) => `tenants/${safe('tenant id', tenantId)}/collections/${safe('collection id', collectionId)}/batches/${safe('batch id', ingestBatchId)}/documents.ndjson`,
  /** Raw fp16 token vectors + token ids of one batch (a segment with the fp16 codec). */
  rawVectors: (tenantId: string, collectionId: string, ingestBatchId: string) => `tenants/${safe('tenant id', tenantId)}/collections/${safe('collection id', collectionId)}/raw/${safe('batch id', ingestBatchId)}.seg`,
  /** Compressed, immutable segment of one batch at one codec version. */
  segment: (tenantId: string, collectionId: string, ingestBatchId: string, codecVersion: number) =>
    `tenants/${safe('tenant id', tenantId)}/collections/${safe('collection id', collectionId)}/segments/v${codecVersion}/${safe('batch id', ingestBatchId)}.seg`,
  codecArtifact: (tenantId: string, collectionId: string, codecVersion: number) => `tenants/${safe('tenant id', tenantId)}/collections/${safe('collection id', collectionId)}/codecs/v${codecVersion}.codec`,
  manifest: (tenantId: string, collectionId: string, generation: number) =>
    `tenants/${safe('tenant id', tenantId)}/collections/${safe('collection id', collectionId)}/manifests/${String(generation).padStart(10, '0')}.json`,
  manifestPrefix: (tenantId: string, collectionId: string) => `tenants/${safe('tenant id', tenantId)}/collections/${safe('collection id', collectionId)}/manifests/`,
  /** Where every collection of a tenant lives (one common prefix per collection). */
  collectionsPrefix: (tenantId: string) => `tenants/${safe('tenant id', tenantId)}/collections/`,
  rawPrefix: (tenantId: string, collectionId: string) => `tenants/${safe('tenant id', tenantId)}/collections/${safe('collection id', collectionId)}/raw/`,
  segmentPrefix: (tenantId: string, collectionId: string, codecVersion: number) => `tenants/${safe('tenant id', tenantId)}/collections/${safe('collection id', collectionId)}/segments/v${codecVersion}/`,
  /** One ingestion's record: its batches and their document counts (written before the API answers). */
  ingestion: (tenantId: string, collectionId: string, ingestion: string) => `tenants/${safe('tenant id', tenantId)}/collections/${safe('collection id', collectionId)}/ingestions/${safe('ingestion id', ingestion)}.json`,
  ingestionPrefix: (tenantId: string, collectionId: string) => `tenants/${safe('tenant id', tenantId)}/collections/${safe('collection id', collectionId)}/ingestions/`,
  /** A batch whose job failed for good (which stage, why). */
  batchFailure: (tenantId: string, collectionId: string, ingestBatchId: string) => `tenants/${safe('tenant id', tenantId)}/collections/${safe('collection id', collectionId)}/failures/${safe('batch id', ingestBatchId)}.json`,
  failurePrefix: (tenantId: string, collectionId: string) => `tenants/${safe('tenant id', tenantId)}/collections/${safe('collection id', collectionId)}/failures/`,
  /** A re-compression's written segment (its SegmentRef), until the last one commits them all. */
  pendingSegment: (tenantId: string, collectionId: string, v: number, ingestBatchId: string) => `tenants/${safe('tenant id', tenantId)}/collections/${safe('collection id', collectionId)}/pending/v${v}/${safe('batch id', ingestBatchId)}.json`,
  pendingPrefix: (tenantId: string, collectionId: string, v: number) => `tenants/${safe('tenant id', tenantId)}/collections/${safe('collection id', collectionId)}/pending/v${v}/`,
  /** Search index of one segment (IVF postings, BM25 postings), immutable like the segment. */
  segmentIndex: (tenantId: string, collectionId: string, ingestBatchId: string, codecVersion: number) => `tenants/${safe('tenant id', tenantId)}/collections/${safe('collection id', collectionId)}/indexes/v${codecVersion}/${safe('batch id', ingestBatchId)}.idx`,
  /**
   * A segment's head (ids, token offsets, where each document's bytes lie: libs/serving's
   * segment-head.ts), written beside its index from a checked read of the segment, so a scorer
   * with an empty disk builds its id tables from heads, not from every segment read whole.
   */
  segmentHead: (tenantId: string, collectionId: string, ingestBatchId: string, codecVersion: number) => `tenants/${safe('tenant id', tenantId)}/collections/${safe('collection id', collectionId)}/segment-heads/v${codecVersion}/${safe('batch id', ingestBatchId)}.head`,
  /** BM25's statistics of one generation's live documents (N, total length, df per term; libs/search's LB25), written after its commit. */
  bm25Stats: (tenantId: string, collectionId: string, generation: number) => `tenants/${safe('tenant id', tenantId)}/collections/${safe('collection id', collectionId)}/bm25-stats/g${String(generation).padStart(10, '0')}.lb25`,
  bm25StatsPrefix: (tenantId: string, collectionId: string) => `tenants/${safe('tenant id', tenantId)}/collections/${safe('collection id', collectionId)}/bm25-stats/`,
  /**
   * IVF centroids of a collection at one codec version, fitted once (conditional write). Epoch n > 0:
   * the n-th refit of a WARP collection's centroids (`ivf/v{v}.e{n}.centroids`), which only its
   * search layouts use (segment indexes keep epoch 0's).
   */
  ivfCentroids: (tenantId: string, collectionId: string, codecVersion: number, warpEpoch = 0) => `tenants/${safe('tenant id', tenantId)}/collections/${safe('collection id', collectionId)}/ivf/v${codecVersion}${epochPart(warpEpoch)}.centroids`,
  /** WARP's residual codec (bucket cutoffs and weights) of a collection at one codec version, fitted once beside the IVF centroids (conditional write). */
  warpCodec: (tenantId: string, collectionId: string, codecVersion: number, warpEpoch = 0) => `tenants/${safe('tenant id', tenantId)}/collections/${safe('collection id', collectionId)}/ivf/v${codecVersion}${epochPart(warpEpoch)}.warp-codec`,
  /** A segment's centroid-major search layout (collections with `search.layout` 'warp'), immutable like the segment; under `e{n}/` when built with epoch n > 0's centroids. */
  searchLayout: (tenantId: string, collectionId: string, ingestBatchId: string, codecVersion: number, warpEpoch = 0) =>
    `tenants/${safe('tenant id', tenantId)}/collections/${safe('collection id', collectionId)}/search-layouts/v${codecVersion}/${epochPart(warpEpoch).replace('.', '')}${warpEpoch > 0 ? '/' : ''}${safe('batch id', ingestBatchId)}.warp`,
  searchRequest: (tenantId: string, job: string) => `tenants/${safe('tenant id', tenantId)}/search/${safe('job id', job)}/request.json`,
  searchResult: (tenantId: string, job: string) => `tenants/${safe('tenant id', tenantId)}/search/${safe('job id', job)}/result.json`,
  rerankRequest: (tenantId: string, job: string) => `tenants/${safe('tenant id', tenantId)}/rerank/${safe('job id', job)}/request.json`,
  rerankResult: (tenantId: string, job: string) => `tenants/${safe('tenant id', tenantId)}/rerank/${safe('job id', job)}/result.json`,
};

/**
 * Redis holds queues and caches only: nothing here is needed to rebuild a collection, its
 * generations or its ingestions' progress after Redis loses its data (see docs/storage.md).
 */
export const redisKeys = {
  /** Lock held while a codec version is fitted (saves duplicate fits; the artifact write is conditional). */
  codecFitLock: (prefix: string, tenantId: string, collectionId: string, v: number) => `${prefix}:t:${safe('tenant id', tenantId)}:c:${safe('collection id', collectionId)}:codec-fit:v${v}`,
  /** Lease held while a merge of the collection runs (one merge per collection at a time). */
  mergeLease: (prefix: string, tenantId: string, collectionId: string) => `${prefix}:t:${safe('tenant id', tenantId)}:c:${safe('collection id', collectionId)}:merge`,
  /** Lease held while a WARP refit of the collection runs (one refit per collection at a time; merges take mergeLease, not this). */
  refitLease: (prefix: string, tenantId: string, collectionId: string) => `${prefix}:t:${safe('tenant id', tenantId)}:c:${safe('collection id', collectionId)}:refit`,
  /** The collection's ingest batches accepted and not yet committed (IngestBacklogRepository in libs/infra: ingest back-pressure counts them). */
  ingestBacklog: (prefix: string, tenantId: string, collectionId: string) => `${prefix}:t:${safe('tenant id', tenantId)}:c:${safe('collection id', collectionId)}:ingest-backlog`,
  /** A random token replaced after every change of the collection's record or generation (ServingCache in libs/infra). */
  servingVersion: (prefix: string, tenantId: string, collectionId: string) => `${prefix}:t:${safe('tenant id', tenantId)}:c:${safe('collection id', collectionId)}:serving-version`,
};

/** BullMQ forbids ':' in custom ids; '~' never appears in resource ids. */
export const jobIds = {
  encode: (tenantId: string, collectionId: string, ingestBatchId: string) => `${safe('tenant id', tenantId)}~${safe('collection id', collectionId)}~encode~${safe('batch id', ingestBatchId)}`,
  compress: (tenantId: string, collectionId: string, ingestBatchId: string, v: number) => `${safe('tenant id', tenantId)}~${safe('collection id', collectionId)}~compress~${safe('batch id', ingestBatchId)}~v${v}`,
  index: (tenantId: string, collectionId: string, ingestBatchId: string, v: number) => `${safe('tenant id', tenantId)}~${safe('collection id', collectionId)}~index~${safe('batch id', ingestBatchId)}~v${v}`,
  commit: (tenantId: string, collectionId: string, ingestBatchId: string, v: number) => `${safe('tenant id', tenantId)}~${safe('collection id', collectionId)}~commit~${safe('batch id', ingestBatchId)}~v${v}`,
  rerank: (tenantId: string, id: string) => `${safe('tenant id', tenantId)}~rerank~${safe('job id', id)}`,
  search: (tenantId: string, id: string) => `${safe('tenant id', tenantId)}~search~${safe('job id', id)}`,
};
