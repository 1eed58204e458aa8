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

const int = z.number().int();
const num = z.number().nullable();
/** Every field optional, as the overview leaves a part out when it has nothing to say (a worker without caches). */
const some = <S extends z.ZodRawShape>(shape: S) => z.object(shape).partial();
const percentiles = some({ count: int, p50: num, p95: num, p99: num }).describe('nearest-rank percentiles in ms; null when no job finished in the window');
const latency = some({ total: percentiles, processing: percentiles }).describe('total: enqueued -> finished (what a caller waits); processing: started -> finished (worker time)');
const stringOrNull = z.string().nullable();
const intOrNull = int.nullable();

/** What GET /v1/admin/overview answers (admin.service.ts). Its objects are closed: a field the overview gains without a line here fails test/openapi-live.integration.spec.ts. */
const AdminOverviewSchema = z.object({
  at: int.describe('when this overview was taken (ms since the epoch); overviews are shared for up to 1 s'),
  tenants: z.array(z.string()).describe('every tenant with data in S3 (collections below are of all of them)'),
  throughputFrom: int.describe('start of the first minute of the per-minute series (ms)'),
  queues: z.array(
    some({
      name: z.string(),
      counts: z.record(z.string(), int).describe('waiting, active, completed, failed, delayed, prioritized (BullMQ)'),
      completedPerMinute: z.array(int).length(60).describe('jobs completed per minute over the last hour, oldest first'),
      failedPerMinute: z.array(int).length(60),
    }),
  ),
  latency: z.record(z.string(), some({ '5m': latency, '60m': latency })).describe('per queue (rerank, search), over the last 5 and 60 minutes, from the latest 5,000 completed jobs'),
  workers: z
    .array(
      some({
        id: z.string(),
        process: z.string(),
        host: z.string(),
        pid: int,
        queues: z.array(z.string()),
        concurrency: z.record(z.string(), int),
        executionProvider: z.string(),
        model: z.string(),
        startedAt: int,
        beatAt: int,
        ageMs: int,
        stale: z.boolean(),
        completed: int,
        failed: int,
        active: int,
        jobsPerSecond: z.number(),
        caches: z.record(z.string(), some({ bytes: z.number(), hitRatio: num })).describe("the process's caches (scorer-segments, scorer-disk, ...)"),
      }),
    )
    .describe('worker processes from their heartbeats (every 5 s; stale after 15 s; gone after 120 s)'),
  ingestions: z
    .array(
      some({
        tenant: z.string(),
        collection: z.string(),
        ingestionId: z.string(),
        createdAt: z.string(),
        state: z.enum(['processing', 'done', 'failed']),
        documents: int,
        batches: int,
        stages: some({ accepted: int, encoded: int, compressed: int, indexed: int, committed: int, failed: int }).describe(
          'documents per stage: accepted, encoded (raw vectors), compressed (segment), indexed (search index built), committed (in the current generation), failed',
        ),
        docsPerSecond: num.describe('null: a done ingestion this API process never saw running'),
        etaSeconds: intOrNull.describe('null when nothing moved over the last minute'),
        failures: z.array(some({ batchId: z.string(), stage: z.string(), error: z.string() })),
      }),
    )
    .describe('running ingestions (oldest first), then the latest 5 done'),
  collections: z.array(
    some({
      tenant: z.string(),
      id: z.string(),
      model: z.string(),
      codec: z.string(),
      codecVersion: int,
      recompressing: stringOrNull,
      generation: int,
      segments: int,
      documents: int,
      tokens: int,
      segmentBytes: int,
      s3Bytes: int.describe('every object under the collection in S3 (re-listed every 30 s)'),
      bytesPerToken: num,
      shards: int.min(1).describe('shards the segments are split into (`shards` at creation; 1 when not given), each served through its queue `shard-<i>`'),
      degradedSegments: int.min(0).describe('segments of the current generation that scorers could not read (checksum, decoding, missing object); re-rank and search answer without them'),
      unavailableSegments: z
        .array(z.object({ key: z.string(), object: z.enum(['segment', 'index']), segment: z.string(), reason: z.string(), documents: int, generation: int, detectedAt: z.string() }))
        .describe('those segments: the object that failed, why, the documents it holds, and when it was first seen'),
    }),
  ),
  failedJobs: z
    .array(some({ queue: z.string(), id: z.string(), failedReason: z.string(), attemptsMade: int, attempts: int, finishedOn: intOrNull, timestamp: int, tenant: stringOrNull, collection: stringOrNull }))
    .describe('the latest 20 failed jobs across queues, newest first'),
  training: z
    .array(
      some({
        trainId: z.string(),
        tenant: stringOrNull,
        collection: stringOrNull,
        state: z.enum(['running', 'queued', 'completed', 'failed']),
        stage: stringOrNull.describe('loading, first-stage, training or writing'),
        percent: num,
        epoch: num,
        maxEpochs: num,
        loss: num.describe('mean training loss of the current epoch so far'),
        etaSeconds: num,
        artifact: stringOrNull.describe('the trained artifact (completed runs)'),
        error: stringOrNull,
        timestamp: int,
        finishedOn: intOrNull,
      }),
    )
    .describe("train jobs running or queued (up to 20 each), then the latest 5 finished: progress as GET /v1/train/{id} shows it (epoch 0 is LITE's MaxSim warm start)"),
});
const RetriedSchema = z.object({ queue: z.string(), jobId: z.string(), state: z.literal('waiting'), previousAttempts: int });

export function registerAdmin(api: ApiRegistry): void {
  for (const [name, scheme] of Object.entries(ADMIN_SECURITY_SCHEMES)) api.registry.registerComponent('securitySchemes', name, scheme as never);
  const security = OPERATOR_SECURITY;
  api.op('admin', 'get', '/v1/admin/overview', {
    summary: 'Operations overview (what /dashboard shows): queues, throughput, latency percentiles, workers, ingestions, collections, failed jobs',
    security,
    responses: { '200': json('the overview', api.output(AdminOverviewSchema)), ...AUTH_ANSWERS },
  });
  api.op('admin', 'post', '/v1/admin/jobs/{queue}/{jobId}/retry', {
    summary: 'Retry a failed job: back to its queue with its attempts counted from zero',
    description: "A pipeline batch's failure record is removed from S3 first, so its ingestion reads `processing` again.",
    security,
    request: { params: z.object({ queue: param.text('queue name'), jobId: z.string().max(512).describe('the job id, URL-encoded (ids contain `~`)') }) },
    responses: {
      '202': json('moved back to the queue', api.output(RetriedSchema)),
      '400': json('unknown queue (`path.queue`) or a bad job id (`path.jobId`)', error),
      '404': json('no such job (failed jobs are kept 7 days)', error),
      '409': json('the job is not failed', error),
      ...AUTH_ANSWERS,
    },
  });
}
