/** The operator endpoints (admin.controller.ts), behind adminAuth (admin-auth.ts): tag `admin`. */
import { z } from 'zod';
import { json, param, type ApiRegistry } from './registry';

const error = { $ref: '#/components/schemas/Error' };
export const OPERATOR_SECURITY: Record<string, string[]>[] = [{ adminToken: [] }, { adminSession: [] }];
const AUTH_ANSWERS = {
  '401': json('no operator credential (ADMIN_TOKEN as a Bearer token, or the dashboard session cookie); `WWW-Authenticate: Bearer`', error),
  '403': json("operator endpoints disabled: ADMIN_TOKEN is not set (`error: 'admin_disabled'`)", error),
};

const ADMIN_SECURITY_SCHEMES = {
  adminToken: { type: 'http', scheme: 'bearer', description: 'the operator credential: `Authorization: Bearer <ADMIN_TOKEN>` (docs/operations.md, "Operations dashboard")' },
  adminSession: { type: 'apiKey', in: 'cookie', name: 'lateral_admin', description: 'the session cookie set by the dashboard login form (POST /dashboard/login): an HMAC of ADMIN_TOKEN' },
};

const int = { type: 'integer' };
const num = { type: ['number', 'null'] };
const percentiles = { type: 'object', properties: { count: int, p50: num, p95: num, p99: num }, description: 'nearest-rank percentiles in ms; null when no job finished in the window' };
const latency = { type: 'object', properties: { total: percentiles, processing: percentiles }, description: 'total: enqueued -> finished (what a caller waits); processing: started -> finished (worker time)' };

/**
 * What GET /v1/admin/overview answers (admin-stats.ts). Written as JSON Schema: most of its nested
 * fields are optional (a worker without caches, a queue without latency), which a zod schema here
 * would have to restate field by field.
 */
const OVERVIEW = {
  type: 'object',
  required: ['at', 'tenants', 'throughputFrom', 'queues', 'latency', 'workers', 'ingestions', 'collections', 'failedJobs', 'training'],
  properties: {
    at: { type: 'integer', description: 'when this overview was taken (ms since the epoch); overviews are shared for up to 1 s' },
    tenants: { type: 'array', items: { type: 'string' }, description: 'every tenant with data in S3 (collections below are of all of them)' },
    throughputFrom: { type: 'integer', description: 'start of the first minute of the per-minute series (ms)' },
    queues: {
      type: 'array',
      items: {
        type: 'object',
        properties: {
          name: { type: 'string' },
          counts: { type: 'object', additionalProperties: int, description: 'waiting, active, completed, failed, delayed, prioritized (BullMQ)' },
          completedPerMinute: { type: 'array', items: int, minItems: 60, maxItems: 60, description: 'jobs completed per minute over the last hour, oldest first' },
          failedPerMinute: { type: 'array', items: int, minItems: 60, maxItems: 60 },
        },
      },
    },
    latency: {
      type: 'object',
      description: 'per queue (rerank, search), over the last 5 and 60 minutes, from the latest 5,000 completed jobs',
      additionalProperties: { type: 'object', properties: { '5m': latency, '60m': latency } },
    },
    workers: {
      type: 'array',
      description: 'worker processes from their heartbeats (every 5 s; stale after 15 s; gone after 120 s)',
      items: {
        type: 'object',
        properties: {
          id: { type: 'string' },
          process: { type: 'string' },
          host: { type: 'string' },
          pid: int,
          queues: { type: 'array', items: { type: 'string' } },
          concurrency: { type: 'object', additionalProperties: int },
          executionProvider: { type: 'string' },
          model: { type: 'string' },
          startedAt: int,
          beatAt: int,
          ageMs: int,
          stale: { type: 'boolean' },
          completed: int,
          failed: int,
          active: int,
          jobsPerSecond: { type: 'number' },
          caches: {
            type: 'object',
            description: "the process's caches (scorer-segments, scorer-disk, ...)",
            additionalProperties: { type: 'object', properties: { bytes: { type: 'number' }, hitRatio: { type: ['number', 'null'] } } },
          },
        },
      },
    },
    ingestions: {
      type: 'array',
      description: 'running ingestions (oldest first), then the latest 5 done',
      items: {
        type: 'object',
        properties: {
          tenant: { type: 'string' },
          collection: { type: 'string' },
          ingestionId: { type: 'string' },
          createdAt: { type: 'string' },
          state: { enum: ['processing', 'done', 'failed'] },
          documents: int,
          batches: int,
          stages: {
            type: 'object',
            description: 'documents per stage: accepted, encoded (raw vectors), compressed (segment), indexed (search index built), committed (in the current generation), failed',
            properties: { accepted: int, encoded: int, compressed: int, indexed: int, committed: int, failed: int },
          },
          docsPerSecond: { type: ['number', 'null'], description: 'null: a done ingestion this API process never saw running' },
          etaSeconds: { type: ['integer', 'null'], description: 'null when nothing moved over the last minute' },
          failures: { type: 'array', items: { type: 'object', properties: { batchId: { type: 'string' }, stage: { type: 'string' }, error: { type: 'string' } } } },
        },
      },
    },
    collections: {
      type: 'array',
      items: {
        type: 'object',
        properties: {
          tenant: { type: 'string' },
          id: { type: 'string' },
          model: { type: 'string' },
          codec: { type: 'string' },
          codecVersion: int,
          recompressing: { type: ['string', 'null'] },
          generation: int,
          segments: int,
          documents: int,
          tokens: int,
          segmentBytes: int,
          s3Bytes: { type: 'integer', description: 'every object under the collection in S3 (re-listed every 30 s)' },
          bytesPerToken: num,
          shards: { type: 'integer', minimum: 1, description: 'shards the segments are split into (`shards` at creation; 1 when not given), each served through its queue `shard-<i>`' },
          degradedSegments: { type: 'integer', minimum: 0, description: 'segments of the current generation that scorers could not read (checksum, decoding, missing object); re-rank and search answer without them' },
          unavailableSegments: {
            type: 'array',
            description: 'those segments: the object that failed, why, the documents it holds, and when it was first seen',
            items: {
              type: 'object',
              additionalProperties: false,
              required: ['key', 'object', 'segment', 'reason', 'documents', 'generation', 'detectedAt'],
              properties: {
                key: { type: 'string' },
                object: { type: 'string', enum: ['segment', 'index'] },
                segment: { type: 'string' },
                reason: { type: 'string' },
                documents: int,
                generation: int,
                detectedAt: { type: 'string' },
              },
            },
          },
        },
      },
    },
    failedJobs: {
      type: 'array',
      description: 'the latest 20 failed jobs across queues, newest first',
      items: {
        type: 'object',
        properties: {
          queue: { type: 'string' },
          id: { type: 'string' },
          failedReason: { type: 'string' },
          attemptsMade: int,
          attempts: int,
          finishedOn: { type: ['integer', 'null'] },
          timestamp: int,
          tenant: { type: ['string', 'null'] },
          collection: { type: ['string', 'null'] },
        },
      },
    },
    training: {
      type: 'array',
      description: 'train jobs running or queued (up to 20 each), then the latest 5 finished: progress as GET /v1/train/{id} shows it (epoch 0 is LITE\'s MaxSim warm start)',
      items: {
        type: 'object',
        properties: {
          trainId: { type: 'string' },
          tenant: { type: ['string', 'null'] },
          collection: { type: ['string', 'null'] },
          state: { type: 'string', enum: ['running', 'queued', 'completed', 'failed'] },
          stage: { type: ['string', 'null'], description: 'loading, first-stage, training or writing' },
          percent: num,
          epoch: num,
          maxEpochs: num,
          loss: { type: ['number', 'null'], description: 'mean training loss of the current epoch so far' },
          etaSeconds: num,
          artifact: { type: ['string', 'null'], description: 'the trained artifact (completed runs)' },
          error: { type: ['string', 'null'] },
          timestamp: int,
          finishedOn: { type: ['integer', 'null'] },
        },
      },
    },
  },
};

/**
 * Objects listed with their properties are closed (`additionalProperties: false`), so a field the
 * overview gains without a line here fails test/openapi-live.integration.spec.ts.
 */
function closed<T>(s: T): T {
  if (Array.isArray(s)) return s.map(closed) as T;
  if (!s || typeof s !== 'object') return s;
  const o = Object.fromEntries(Object.entries(s).map(([k, v]) => [k, k === 'properties' ? Object.fromEntries(Object.entries(v as object).map(([p, x]) => [p, closed(x)])) : closed(v)]));
  return ('properties' in o && !('additionalProperties' in o) ? { ...o, additionalProperties: false } : o) as T;
}

export function registerAdmin(api: ApiRegistry): void {
  for (const [name, scheme] of Object.entries(ADMIN_SECURITY_SCHEMES)) api.registry.registerComponent('securitySchemes', name, scheme as never);
  const security = OPERATOR_SECURITY;
  api.op('admin', 'get', '/v1/admin/overview', {
    summary: 'Operations overview (what /dashboard shows): queues, throughput, latency percentiles, workers, ingestions, collections, failed jobs',
    security,
    responses: { '200': json('the overview', closed(OVERVIEW)), ...AUTH_ANSWERS },
  });
  api.op('admin', 'post', '/v1/admin/jobs/{queue}/{jobId}/retry', {
    summary: 'Retry a failed job: back to its queue with its attempts counted from zero',
    description: "A pipeline batch's failure record is removed from S3 first, so its ingestion reads `processing` again.",
    security,
    request: { params: z.object({ queue: param.text('queue name'), jobId: z.string().max(512).describe('the job id, URL-encoded (ids contain `~`)') }) },
    responses: {
      '202': json('moved back to the queue', { type: 'object', required: ['queue', 'jobId', 'state', 'previousAttempts'], additionalProperties: false, properties: { queue: { type: 'string' }, jobId: { type: 'string' }, state: { const: 'waiting' }, previousAttempts: int } }),
      '400': json('unknown queue (`path.queue`) or a bad job id (`path.jobId`)', error),
      '404': json('no such job (failed jobs are kept 7 days)', error),
      '409': json('the job is not failed', error),
      ...AUTH_ANSWERS,
    },
  });
}
