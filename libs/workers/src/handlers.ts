import path from 'node:path';
import { PermanentJobError, QueueName, redisKeys, s3Keys, textCodecRef, trainingKeys, type MergePayload, type SegmentRef, type ShardJobPayload, type ShardJobResult } from '@lateral/shared';
import { DiskObjectCache, ScorerArtifactStore, registerCacheMetrics, DocumentRepository, JobFlows, ShardQueues, deliverWebhook, enqueueWebhook, webhookEventFor, withRedisLease, type HandlerRegistry, type Runtime } from '@lateral/infra';
import {
  SegmentIds,
  commitSegment,
  writeBm25GenerationStats,
  deleteDocuments,
  mergeProcessor,
  enqueueMerge,
  refitProcessor,
  enqueueWarpRefit,
  DEFAULT_MERGE_POLICY,
  type CommittedGeneration,
  compressProcessor,
  encodeProcessor,
  indexProcessor,
  encoderProvider,
  searchProcessor,
  shardChildProcessor,
  trainProcessor,
  KnownTexts,
  TextCacheReader,
  TextMemoryCache,
  batchProcessor,
  childTextStats,
  encodeTextsProcessor,
  rerankProcessor,
  RawHandoff,
} from '@lateral/pipeline';
import { Bm25StatsCache, DegradedSegmentsRecorder, SegmentCache, StaticEmbeddingsCache } from '@lateral/serving';
import { readSegment } from '@lateral/codec';
import { OnnxNearestCentroid, ScorerResources } from '@lateral/kernels';
import { jobObjects } from './inline-io';

/**
 * Wall-clock ms (sub-ms resolution): when a re-rank or search handler started and ended, in its
 * return value (`timing`), so the API reports pick-up, job and hand-back apart (Server-Timing).
 */
const epochMs = (): number => performance.timeOrigin + performance.now();

/** Queues this build has processors for. */
export const HANDLED_QUEUES: QueueName[] = [QueueName.encode, QueueName.compress, QueueName.index, QueueName.commit, QueueName.merge, QueueName.refit, QueueName.rerank, QueueName.search, QueueName.encodeTexts, QueueName.batch, QueueName.train, QueueName.webhook];

/**
 * The complete queue -> handler registry; WorkerHost refuses to start a queue without one. Each
 * processor receives only the repositories and settings it uses.
 */
export function pipelineHandlers(rt: Runtime, extra: { shardChild?: (p: ShardJobPayload) => Promise<ShardJobResult>; encoders?: (model: string) => Promise<unknown> } = {}): HandlerRegistry {
  const { config, store, collections, generations, codecs, queues, logger } = rt;
  const encoders = encoderProvider(
    {
      modelsDir: config.MODELS_DIR,
      executionProvider: config.ORT_EXECUTION_PROVIDER,
      deviceId: config.ORT_CUDA_DEVICE_ID,
      intraOpThreads: config.ORT_INTRA_OP_THREADS,
      precision: config.ENCODER_PRECISION,
      sessions: config.ENCODER_SESSIONS,
    },
    logger,
  );
  // The same encoders, for a compute thread that loads its default model before lowering its priority (compute/thread-main.ts).
  extra.encoders = encoders;
  const staticEmbeddings = new StaticEmbeddingsCache(path.resolve(config.MODELS_DIR));
  // Trained heads come from S3 on first use (cached under SCORERS_DIR/tenants/), so any scorer serves any tenant's head.
  const scorerArtifacts = new ScorerArtifactStore(store, path.resolve(config.SCORERS_DIR));
  const scorers = new ScorerResources(path.resolve(config.SCORERS_DIR), config.ORT_INTRA_OP_THREADS, (tenantId, spec) => scorerArtifacts.resolve(tenantId, spec));
  const documents = new DocumentRepository(store); // hits' text and metadata, passages of parent candidates (from S3)
  // One byte-bounded cache of segments for re-rank and search, over the local disk cache of S3 objects.
  const objects = new DiskObjectCache(store, path.resolve(config.SCORER_DISK_CACHE_DIR ?? path.join(config.DATA_DIR, 'scorer-cache')), config.SCORER_DISK_CACHE_BYTES, `${rt.services.s3Endpoint ?? 'embedded'}/${config.S3_BUCKET}`);
  const segments = new SegmentCache(objects, codecs, staticEmbeddings, {
    maxBytes: config.SCORER_CACHE_BYTES,
    loadConcurrency: config.SCORER_LOAD_CONCURRENCY,
    scoreFromCodes: config.COMPRESSED_SCORING === 'int8-image',
    // Re-ranks read their candidates' bytes from the disk cache's copies (not whole segments into memory).
    rangeReads: config.SCORER_RERANK_READS === 'ranges' && objects.enabled,
    alternateScans: config.SCORER_SCAN_ORDER === 'alternate',
    // WARP layouts: small ones read whole, larger ones by their probed lists' ranges (ranged GETs through the disk cache).
    warpLayoutInMemoryBytes: Math.min(config.SCORER_WARP_WHOLE_BYTES, config.SCORER_CACHE_BYTES / 16),
    warpRangeGapBytes: config.SCORER_WARP_RANGE_GAP_BYTES,
    // A segment that cannot be read: its ids from its batch's info.json (so its candidates are named
    // unavailable), and the collection's degraded record in S3, a log line and metrics.
    segmentIds: async (tenantId, collectionId, ref) => (await documents.encodedInfo(tenantId, collectionId, ref.batchId))?.documents.map((d) => d.id) ?? null,
    health: new DegradedSegmentsRecorder(store, logger),
  });
  // lateral_cache_*{cache=...}: hit ratio, bytes held and evictions of both, read at each scrape.
  registerCacheMetrics('scorer-segments', () => segments.stats());
  registerCacheMetrics('scorer-disk', () => {
    const d = objects.stats();
    return { bytes: d.bytes, entries: d.files, hits: d.hits, misses: d.misses, evictions: d.evictions };
  });
  // Candidate texts: decoded entries kept in memory (TEXT_CACHE_MEMORY_MB), keys known to be in S3.
  const modelsDir = path.resolve(config.MODELS_DIR);
  const texts = new TextCacheReader({ store, codecs, memory: new TextMemoryCache(config.TEXT_CACHE_MEMORY_MB * 1024 * 1024), ttlDays: config.TEXT_CACHE_TTL_DAYS });
  const knownTexts = new KnownTexts();
  const flows = new JobFlows(rt.redis, config.REDIS_PREFIX, config.JOB_ATTEMPTS);
  // Re-rank and search of collections with several shards fan out to the shard queues (shard-fanout.ts).
  const shardCoordinator = { queues: new ShardQueues(rt.redis, config.REDIS_PREFIX, config.JOB_ATTEMPTS), store };
  // Re-rank and search read the collection's record and current manifest from the serving cache
  // (one Redis GET when nothing changed; a commit or record write is seen by the next read).
  const served = {
    collections: { get: (tenantId: string, collectionId: string) => rt.serving.collection(tenantId, collectionId) },
    generations: { manifest: (tenantId: string, collectionId: string, g?: number) => (g === undefined ? rt.serving.manifest(tenantId, collectionId) : generations.manifest(tenantId, collectionId, g)) },
  };
  const rerankDeps = { store, ...served, encoders, views: segments, scorers, documents, shardCoordinator };
  // Generations' BM25 statistics (written after each commit): a BM25 or hybrid search then walks the segments once.
  const bm25Stats = new Bm25StatsCache(store, (key, err) => logger.warn(`BM25 statistics ${key} unusable (${err.message}): counted over the indexes instead`));
  const searchDeps = { store, ...served, ivf: rt.ivf, warpCodecs: rt.warpCodecs, encoders, segments, scorers, documents, shardCoordinator, bm25Stats };
  extra.shardChild = (p) => shardChildProcessor({ ...rerankDeps, ...searchDeps }, p);
  // DELETE /v1/train/{id} sets a flag in Redis; the train job checks it between steps.
  const cancelled = async (tenantId: string, id: string) => (await rt.redis.exists(trainingKeys.cancelFlag(config.REDIS_PREFIX, tenantId, id))) > 0;
  let nearest: Promise<OnnxNearestCentroid> | null = null;
  const assigner = () => (nearest ??= OnnxNearestCentroid.create(config.ORT_INTRA_OP_THREADS));
  const liveIds = new SegmentIds(async (tenantId, collectionId, ref) => {
    const bytes = await store.get(ref.key);
    if (!bytes) throw new Error(`segment ${ref.key} of the current generation is missing from S3`);
    return readSegment(bytes, ref.key, await codecs.get(tenantId, collectionId, ref.codecVersion)).docIds;
  });
  // Deletes by filter read each segment's ids and metadata (no vectors decoded).
  const segmentDocs = async (tenantId: string, collectionId: string, ref: SegmentRef) => {
    const bytes = await store.get(ref.key);
    if (!bytes) throw new Error(`segment ${ref.key} of the current generation is missing from S3`);
    return readSegment(bytes, ref.key, await codecs.get(tenantId, collectionId, ref.codecVersion));
  };
  // A finished job's callback becomes a job of the webhook queue; the result stands even if queueing it fails.
  const notify = (url: string, event: Parameters<typeof enqueueWebhook>[4]) =>
    enqueueWebhook(queues, config, event.tenant, url, event).catch((err: Error) => logger.warn(`webhook for ${event.kind} ${event.id} not queued: ${err.message}`));
  const mergePolicy = {
    ...DEFAULT_MERGE_POLICY,
    factor: config.MERGE_FACTOR,
    deletedFraction: config.MERGE_DELETED_FRACTION,
    floorDocuments: config.MERGE_FLOOR_DOCUMENTS,
    maxDocuments: config.MERGE_MAX_DOCUMENTS,
    maxBytes: config.MERGE_MAX_BYTES,
    // applied to collections with a WARP search layout only (merge.processor.ts)
    maxSegments: config.MERGE_WARP_MAX_SEGMENTS,
    searchMaxBytes: config.MERGE_WARP_MAX_BYTES,
  };
  // One merge per collection at a time, across processes: a lease in Redis (a second merge job waits for it).
  // Its expiry is the job lock's: a killed worker's merge is resumed (stalled job) about when its lease is free.
  // A job waits at most two job locks (a dead holder's lease is gone by then), then answers 'busy' and is
  // queued again, so a merge slot is never held for the length of another process's merge.
  // A batch's raw vectors from its encode job to its compress job in this process, not read back from S3 (raw-handoff.ts).
  const rawHandoff = new RawHandoff().view(store);
  const lockMs = config.JOB_LOCK_SECONDS * 1000;
  const exclusive = <T>(tenantId: string, collectionId: string, fn: () => Promise<T>) => withRedisLease(rt.redis, redisKeys.mergeLease(config.REDIS_PREFIX, tenantId, collectionId), fn, { ttlMs: lockMs, maxWaitMs: 2 * lockMs });
  // Each committed generation's BM25 statistics (carried forward from the one before): its searches
  // read them instead of walking every index. A failure never fails the commit: searches of a
  // generation without them count the statistics in a first walk over the indexes, as before.
  const writeBm25Stats = (tenantId: string, collectionId: string, generation: number) =>
    writeBm25GenerationStats({ store, generations, logger }, tenantId, collectionId, generation).catch((err: Error) => logger.warn(`BM25 statistics of ${collectionId} g${generation} not written: ${err.message}`));
  // WARP refits on their own queue and lease (refit.processor.ts): merges go on while one runs. A
  // refit is queued after committed generations when one is due (a failure to queue never fails
  // the job: the next commit asks again).
  const refitLease = <T>(tenantId: string, collectionId: string, fn: () => Promise<T>) => withRedisLease(rt.redis, redisKeys.refitLease(config.REDIS_PREFIX, tenantId, collectionId), fn, { ttlMs: lockMs, maxWaitMs: lockMs });
  const enqueueRefit = (tenantId: string, collectionId: string, committed?: CommittedGeneration) =>
    enqueueWarpRefit({ collections, generations, ivf: rt.ivf, ivfCentroids: config.IVF_CENTROIDS }, queues, tenantId, collectionId, committed).catch((err: Error) => {
      logger.warn(`refit not enqueued: ${err.message}`);
      return null;
    });
  // Background merges: one pending per collection (merge-schedule.ts: deduplicated by collection; a
  // request made while one runs becomes one merge after it). A failure to enqueue never fails the
  // job: the next commit asks again.
  const askMerge = (tenantId: string, collectionId: string, trigger: MergePayload['trigger'], generation: number, opts?: Parameters<typeof enqueueMerge>[5]) =>
    enqueueMerge(queues, tenantId, collectionId, trigger, generation, opts).catch((err: Error) => {
      logger.warn(`merge not enqueued: ${err.message}`);
      return undefined;
    });
  const runMerge = async (p: MergePayload) => {
    const out = await mergeProcessor(
      { store, collections, generations, codecs, liveIds, logger, policy: mergePolicy, exclusive, gc: { keepGenerations: config.KEEP_GENERATIONS, graceSeconds: config.GC_GRACE_SECONDS }, ivf: rt.ivf, warpCodecs: rt.warpCodecs, encoders, ivfCentroids: config.IVF_CENTROIDS, assigner, staticEmbeddings },
      p,
    );
    if (out.committed) await writeBm25Stats(p.tenantId, p.collectionId, out.generation);
    // After every merge job (POST .../merge included): a refit when the tokens call for one, or segments of an older epoch to move.
    const refit = await enqueueRefit(p.tenantId, p.collectionId);
    // The policy still asks a merge on the newest generation this job saw (its output filled the next
    // tier, more segments than the bound): the collection's next merge (a request made while this one
    // ran is already kept for after it: the two are one).
    // Its id names the generation this merge committed ('-again': no other job asks under it), else the newest it found, which another job committed (and may have asked a merge under): a time suffix.
    if (out.again && config.MERGE_AFTER_COMMIT) await askMerge(p.tenantId, p.collectionId, 'commit', out.generation, { suffix: out.committed ? '-again' : `-again${Date.now()}` });
    // Busy (another merge held the lease): the same merge again, after a job lock's time (its own id: the holder's may reuse this one's).
    if (out.merged.status === 'busy') await askMerge(p.tenantId, p.collectionId, p.trigger, out.generation, { delayMs: lockMs, suffix: `-busy${Date.now()}` });
    return refit ? { ...out, refit } : out;
  };
  return {
    [QueueName.encode]: (p, job) => encodeProcessor({ store: rawHandoff, collections, encoders, queues, tokenBudget: config.ENCODE_TOKEN_BUDGET, logger }, p, job),
    [QueueName.compress]: (p) => compressProcessor({ store: rawHandoff, collections, codecs, staticEmbeddings, queues }, p),
    [QueueName.index]: (p) => indexProcessor({ store, collections, codecs, generations, ivf: rt.ivf, warpCodecs: rt.warpCodecs, encoders, queues, ivfCentroids: config.IVF_CENTROIDS, assigner, staticEmbeddings }, p),
    // The commit queue carries segment commits (jobs named 'commit') and deletes (named 'delete', jobName
    // in libs/shared): both write the next generation. The payload, not the name, chooses the handler.
    [QueueName.commit]: async (p) => {
      // A merge queued here by an earlier version: run as on the merge queue.
      if ('op' in p && p.op === 'merge') return runMerge(p);
      const { result: out, committed } = !('op' in p)
        ? await commitSegment({ store, collections, generations, codecs, liveIds, logger }, p)
        : await deleteDocuments({ store, collections, generations, liveIds, segmentDocs, logger }, p);
      // The batch's segment is in the generation (committed now or before): no longer in flight for ingest back-pressure.
      if (!('op' in p)) await rt.ingestBacklog.done(p.tenantId, p.collectionId, p.batchId).catch((err: Error) => logger.warn(`ingest backlog: batch ${p.batchId} not removed: ${err.message}`));
      if (out.committed) await writeBm25Stats(p.tenantId, p.collectionId, out.generation);
      // Each new generation may fill a merge tier: the collection's one pending merge (it reads the newest generation when it starts).
      if (out.committed && config.MERGE_AFTER_COMMIT) await askMerge(p.tenantId, p.collectionId, 'commit', out.generation);
      // Background maintenance after commits (MERGE_AFTER_COMMIT) includes WARP refits: decided on the record and manifest this job committed (no read of either).
      if (committed && config.MERGE_AFTER_COMMIT) await enqueueRefit(p.tenantId, p.collectionId, committed);
      return out;
    },
    // Merges, beside commits and deletes: only their reference swap is a generation commit.
    [QueueName.merge]: (p) => runMerge(p),
    // WARP refits: own lease (one per collection at a time), never the merge lease.
    [QueueName.refit]: async (p) => {
      const out = await refitProcessor(
        { store, collections, generations, codecs, logger, ivf: rt.ivf, warpCodecs: rt.warpCodecs, ivfCentroids: config.IVF_CENTROIDS, assigner, staticEmbeddings, exclusive: refitLease, gc: { keepGenerations: config.KEEP_GENERATIONS, graceSeconds: config.GC_GRACE_SECONDS } },
        p,
      );
      // The tokens committed while it ran may call for the next epoch already: asked now, not at the
      // collection's next commit (an ingestion that has ended makes none). Its own epoch's id is still held by this job.
      if (out.status === 'done') await enqueueRefit(p.tenantId, p.collectionId);
      return out;
    },
    // A small request comes in the job's data and a small result goes back in its return value (inline-io.ts).
    [QueueName.search]: async (p, job) => {
      const startedAt = epochMs();
      const io = jobObjects(store, p, s3Keys.searchResult(p.tenantId, p.searchId));
      const r = await searchProcessor({ ...searchDeps, store: io.store }, p, job);
      if (p.callback) await notify(p.callback, webhookEventFor('search', p, { counts: { queries: r.queries, hits: r.hits } }));
      return { ...r, ...io.inline(), timing: { startedAt, doneAt: epochMs() } };
    },
    [QueueName.rerank]: async (p, job) => {
      const startedAt = epochMs();
      const io = jobObjects(store, p, s3Keys.rerankResult(p.tenantId, p.rerankId));
      const r = await rerankProcessor({ ...rerankDeps, store: io.store, texts, modelsDir }, p, job, await childTextStats(job));
      if (p.callback) await notify(p.callback, webhookEventFor('rerank', p, { counts: { queries: r.queries, candidates: r.candidates, missing: r.missing } }));
      return { ...r, ...io.inline(), timing: { startedAt, doneAt: epochMs() } };
    },
    // Deliveries of the callbacks above (and of failures, start.ts): retried with backoff by BullMQ.
    [QueueName.webhook]: (p) => deliverWebhook(config, p),
    // Training: every live document of the generation through the same segment cache (first stage, token vectors).
    [QueueName.train]: (p, job) =>
      trainProcessor(
        { store, collections, generations, encoders, scorers, scorersDir: path.resolve(config.SCORERS_DIR), cancelled, staticEmbeddings,
          loadView: async (c, m) => segments.view(c, m, (await segments.searchParts(c, m)).flatMap((part) => part.segment.docIds)) },
        p,
        job,
      ),
    [QueueName.encodeTexts]: (p, job) =>
      encodeTextsProcessor({ store, collections, codecs, encoders, modelsDir, tokenBudget: config.ENCODE_TOKEN_BUDGET, ttlDays: config.TEXT_CACHE_TTL_DAYS, known: knownTexts }, p, job),
    [QueueName.batch]: (p, job) =>
      batchProcessor(
        {
          store,
          flows,
          rerank: { ...rerankDeps, texts, modelsDir },
          chunkRows: config.BATCH_CHUNK_ROWS,
          maxTextBytes: config.MAX_DOCUMENT_BYTES,
          textSpace: async (rec) => {
            const collection = rec.options.collection ? await collections.get(rec.tenantId, rec.options.collection) : null;
            if (rec.options.collection && !collection) throw new PermanentJobError(`collection ${rec.tenantId}/${rec.options.collection} does not exist`);
            const model = collection?.model ?? rec.options.model!;
            const maxTokens = collection?.maxDocTokens ?? (await encoders(model)).manifest.maxDocTokens;
            return { model, maxTokens, codec: textCodecRef(collection) };
          },
        },
        p,
        job,
      ),
  };
}
