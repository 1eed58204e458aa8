import type { Config } from '@lateral/shared';
import type { Runtime } from './runtime';
import { JobCompletions, JobRecordRepository } from './job-records.repository';
import { JobFlows } from './job-flows';
import { InFlightJobRepository } from './in-flight-jobs.repository';
import { WorkerHeartbeatRepository } from './worker-heartbeats.repository';
import { TrainingCancelRepository } from './training-cancels.repository';
import { RateLimiter } from './rate-limiter';
import { ApiKeyRepository } from './api-keys.repository';
import { TenantQuotaRepository } from './tenant-quotas.repository';
import { DocumentRepository } from './documents.repository';

/**
 * The repositories the HTTP API uses, built once from a process's runtime. The API reaches Redis
 * and BullMQ only through these (its lint forbids importing bullmq and ioredis); each of its
 * services receives the few it uses (a `Pick` of this), never the runtime.
 */
export interface ApiRepositories {
  config: Config;
  logger: Runtime['logger'];
  store: Runtime['store'];
  queues: Runtime['queues'];
  collections: Runtime['collections'];
  generations: Runtime['generations'];
  serving: Runtime['serving'];
  ingestions: Runtime['ingestions'];
  /** Ingest batches accepted and not yet committed (ingest back-pressure). */
  ingestBacklog: Runtime['ingestBacklog'];
  /** The queues' jobs as the API reads them (status, dashboard, retry, cancel). */
  jobs: JobRecordRepository;
  /** Waits for re-rank and search jobs to finish (the `wait` parameter). */
  completions: JobCompletions;
  /** Re-rank requests with text candidates: the rerank job as parent of an encode-texts job. */
  flows: JobFlows;
  inFlight: InFlightJobRepository;
  heartbeats: WorkerHeartbeatRepository;
  trainingCancels: TrainingCancelRepository;
  rateLimiter: RateLimiter;
  apiKeys: ApiKeyRepository;
  /** Per-tenant quota overrides (S3). */
  quotaOverrides: TenantQuotaRepository;
  documents: DocumentRepository;
  /** Where the API's Redis and S3 are (the error filter redacts them from messages). */
  services: Pick<Runtime['services'], 'redisUrl' | 's3Endpoint'>;
  /** Closes what these repositories opened (the runtime's connections are the runtime's to close). */
  close(): Promise<void>;
}

/**
 * The members of `repos` that `keys` names, and no other: a service built from this receives at
 * run time only the repositories its type allows (each service file lists them, e.g.
 * `SEARCH_REPOSITORIES`).
 */
export function pickRepositories<K extends keyof ApiRepositories>(repos: ApiRepositories, keys: readonly K[]): Pick<ApiRepositories, K> {
  const picked = {} as Pick<ApiRepositories, K>;
  for (const k of keys) picked[k] = repos[k];
  return picked;
}

export function apiRepositories(rt: Runtime): ApiRepositories {
  const { config } = rt;
  const completions = new JobCompletions(rt.queues, { redisUrl: rt.services.redisUrl, prefix: config.REDIS_PREFIX, logger: rt.logger });
  const flows = new JobFlows(rt.redis, config.REDIS_PREFIX, config.JOB_ATTEMPTS);
  return {
    config,
    logger: rt.logger,
    store: rt.store,
    queues: rt.queues,
    collections: rt.collections,
    generations: rt.generations,
    serving: rt.serving,
    ingestions: rt.ingestions,
    ingestBacklog: rt.ingestBacklog,
    jobs: new JobRecordRepository(rt.queues, rt.redis),
    completions,
    flows,
    inFlight: new InFlightJobRepository(rt.redis, config.REDIS_PREFIX),
    heartbeats: new WorkerHeartbeatRepository(rt.redis, config.REDIS_PREFIX),
    trainingCancels: new TrainingCancelRepository(rt.redis, config.REDIS_PREFIX),
    rateLimiter: new RateLimiter(rt.redis, config.REDIS_PREFIX),
    apiKeys: new ApiKeyRepository(rt.store, { cacheTtlMs: config.API_KEY_CACHE_SECONDS * 1000 }),
    quotaOverrides: new TenantQuotaRepository(rt.store, { cacheTtlMs: config.API_KEY_CACHE_SECONDS * 1000 }),
    documents: new DocumentRepository(rt.store),
    services: { redisUrl: rt.services.redisUrl, s3Endpoint: rt.services.s3Endpoint },
    close: async () => {
      await completions.close();
      await flows.close();
    },
  };
}
