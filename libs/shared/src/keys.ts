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
  collectionPrefix: (t: string, c: string) => `tenants/${safe('tenant id', t)}/collections/${safe('collection id', c)}/`,
  collection: (t: string, c: string) => `tenants/${safe('tenant id', t)}/collections/${safe('collection id', c)}/collection.json`,
  /** Accepted documents of one ingest batch, NDJSON, written before the API answers. */
  batchDocuments: (t: string, c: string, batch: string) => `tenants/${safe('tenant id', t)}/collections/${safe('collection id', c)}/batches/${safe('batch id', batch)}/documents.ndjson`,
  /** Raw fp16 token vectors + token ids of one batch (a segment with the fp16 codec). */
  rawVectors: (t: string, c: string, batch: string) => `tenants/${safe('tenant id', t)}/collections/${safe('collection id', c)}/raw/${safe('batch id', batch)}.seg`,
  /** Compressed, immutable segment of one batch at one codec version. */
  segment: (t: string, c: string, batch: string, codecVersion: number) =>
    `tenants/${safe('tenant id', t)}/collections/${safe('collection id', c)}/segments/v${codecVersion}/${safe('batch id', batch)}.seg`,
  codecArtifact: (t: string, c: string, codecVersion: number) => `tenants/${safe('tenant id', t)}/collections/${safe('collection id', c)}/codecs/v${codecVersion}.codec`,
  manifest: (t: string, c: string, generation: number) =>
    `tenants/${safe('tenant id', t)}/collections/${safe('collection id', c)}/manifests/${String(generation).padStart(10, '0')}.json`,
  manifestPrefix: (t: string, c: string) => `tenants/${safe('tenant id', t)}/collections/${safe('collection id', c)}/manifests/`,
  /** Where every collection of a tenant lives (one common prefix per collection). */
  collectionsPrefix: (t: string) => `tenants/${safe('tenant id', t)}/collections/`,
  rawPrefix: (t: string, c: string) => `tenants/${safe('tenant id', t)}/collections/${safe('collection id', c)}/raw/`,
  segmentPrefix: (t: string, c: string, codecVersion: number) => `tenants/${safe('tenant id', t)}/collections/${safe('collection id', c)}/segments/v${codecVersion}/`,
  /** One ingestion's record: its batches and their document counts (written before the API answers). */
  ingestion: (t: string, c: string, ingestion: string) => `tenants/${safe('tenant id', t)}/collections/${safe('collection id', c)}/ingestions/${safe('ingestion id', ingestion)}.json`,
  ingestionPrefix: (t: string, c: string) => `tenants/${safe('tenant id', t)}/collections/${safe('collection id', c)}/ingestions/`,
  /** A batch whose job failed for good (which stage, why). */
  batchFailure: (t: string, c: string, batch: string) => `tenants/${safe('tenant id', t)}/collections/${safe('collection id', c)}/failures/${safe('batch id', batch)}.json`,
  failurePrefix: (t: string, c: string) => `tenants/${safe('tenant id', t)}/collections/${safe('collection id', c)}/failures/`,
  /** A re-compression's written segment (its SegmentRef), until the last one commits them all. */
  pendingSegment: (t: string, c: string, v: number, batch: string) => `tenants/${safe('tenant id', t)}/collections/${safe('collection id', c)}/pending/v${v}/${safe('batch id', batch)}.json`,
  pendingPrefix: (t: string, c: string, v: number) => `tenants/${safe('tenant id', t)}/collections/${safe('collection id', c)}/pending/v${v}/`,
  /** Search index of one segment (IVF postings, BM25 postings), immutable like the segment. */
  segmentIndex: (t: string, c: string, batch: string, codecVersion: number) => `tenants/${safe('tenant id', t)}/collections/${safe('collection id', c)}/indexes/v${codecVersion}/${safe('batch id', batch)}.idx`,
  /**
   * A segment's head (ids, token offsets, where each document's bytes lie: libs/serving's
   * segment-head.ts), written beside its index from a checked read of the segment, so a scorer
   * with an empty disk builds its id tables from heads, not from every segment read whole.
   */
  segmentHead: (t: string, c: string, batch: string, codecVersion: number) => `tenants/${safe('tenant id', t)}/collections/${safe('collection id', c)}/segment-heads/v${codecVersion}/${safe('batch id', batch)}.head`,
  /** BM25's statistics of one generation's live documents (N, total length, df per term; libs/search's LB25), written after its commit. */
  bm25Stats: (t: string, c: string, generation: number) => `tenants/${safe('tenant id', t)}/collections/${safe('collection id', c)}/bm25-stats/g${String(generation).padStart(10, '0')}.lb25`,
  bm25StatsPrefix: (t: string, c: string) => `tenants/${safe('tenant id', t)}/collections/${safe('collection id', c)}/bm25-stats/`,
  /**
   * IVF centroids of a collection at one codec version, fitted once (conditional write). Epoch n > 0:
   * the n-th refit of a WARP collection's centroids (`ivf/v{v}.e{n}.centroids`), which only its
   * search layouts use (segment indexes keep epoch 0's).
   */
  ivfCentroids: (t: string, c: string, codecVersion: number, warpEpoch = 0) => `tenants/${safe('tenant id', t)}/collections/${safe('collection id', c)}/ivf/v${codecVersion}${epochPart(warpEpoch)}.centroids`,
  /** WARP's residual codec (bucket cutoffs and weights) of a collection at one codec version, fitted once beside the IVF centroids (conditional write). */
  warpCodec: (t: string, c: string, codecVersion: number, warpEpoch = 0) => `tenants/${safe('tenant id', t)}/collections/${safe('collection id', c)}/ivf/v${codecVersion}${epochPart(warpEpoch)}.warp-codec`,
  /** A segment's centroid-major search layout (collections with `search.layout` 'warp'), immutable like the segment; under `e{n}/` when built with epoch n > 0's centroids. */
  searchLayout: (t: string, c: string, batch: string, codecVersion: number, warpEpoch = 0) =>
    `tenants/${safe('tenant id', t)}/collections/${safe('collection id', c)}/search-layouts/v${codecVersion}/${epochPart(warpEpoch).replace('.', '')}${warpEpoch > 0 ? '/' : ''}${safe('batch id', batch)}.warp`,
  searchRequest: (t: string, job: string) => `tenants/${safe('tenant id', t)}/search/${safe('job id', job)}/request.json`,
  searchResult: (t: string, job: string) => `tenants/${safe('tenant id', t)}/search/${safe('job id', job)}/result.json`,
  rerankRequest: (t: string, job: string) => `tenants/${safe('tenant id', t)}/rerank/${safe('job id', job)}/request.json`,
  rerankResult: (t: string, job: string) => `tenants/${safe('tenant id', t)}/rerank/${safe('job id', job)}/result.json`,
};

/**
 * Redis holds queues and caches only: nothing here is needed to rebuild a collection, its
 * generations or its ingestions' progress after Redis loses its data (see docs/storage.md).
 */
export const redisKeys = {
  /** Lock held while a codec version is fitted (saves duplicate fits; the artifact write is conditional). */
  codecFitLock: (prefix: string, t: string, c: string, v: number) => `${prefix}:t:${safe('tenant id', t)}:c:${safe('collection id', c)}:codec-fit:v${v}`,
  /** Lease held while a merge of the collection runs (one merge per collection at a time). */
  mergeLease: (prefix: string, t: string, c: string) => `${prefix}:t:${safe('tenant id', t)}:c:${safe('collection id', c)}:merge`,
  /** A random token replaced after every change of the collection's record or generation (ServingCache in libs/infra). */
  servingVersion: (prefix: string, t: string, c: string) => `${prefix}:t:${safe('tenant id', t)}:c:${safe('collection id', c)}:serving-version`,
};

/** BullMQ forbids ':' in custom ids; '~' never appears in resource ids. */
export const jobIds = {
  encode: (t: string, c: string, batch: string) => `${safe('tenant id', t)}~${safe('collection id', c)}~encode~${safe('batch id', batch)}`,
  compress: (t: string, c: string, batch: string, v: number) => `${safe('tenant id', t)}~${safe('collection id', c)}~compress~${safe('batch id', batch)}~v${v}`,
  index: (t: string, c: string, batch: string, v: number) => `${safe('tenant id', t)}~${safe('collection id', c)}~index~${safe('batch id', batch)}~v${v}`,
  commit: (t: string, c: string, batch: string, v: number) => `${safe('tenant id', t)}~${safe('collection id', c)}~commit~${safe('batch id', batch)}~v${v}`,
  rerank: (t: string, id: string) => `${safe('tenant id', t)}~rerank~${safe('job id', id)}`,
  search: (t: string, id: string) => `${safe('tenant id', t)}~search~${safe('job id', id)}`,
};
