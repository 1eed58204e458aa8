import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { QueueName, shardWorkKey } from '@lateral/shared';
import { ObjectStore, startEmbeddedS3, type EmbeddedS3 } from '@lateral/infra';
import { dropShardWorkOfFailedJob } from './shard-rounds';

/**
 * A sharded re-rank or search that fails for good never reaches the parent's own clean-up: the
 * worker's final-failure hook removes its rounds' inputs and shards' partial results, and only
 * those (a real s3rver over HTTP, its own temp folder).
 */
const BUCKET = 'shard-work';
const CREDS = { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' };
let dir: string;
let s3: EmbeddedS3;
let store: ObjectStore;

beforeAll(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'lateral-shard-work-'));
  s3 = await startEmbeddedS3({ dir, bucket: BUCKET, ...CREDS });
  store = new ObjectStore(BUCKET, { endpoint: s3.endpoint, region: 'us-east-1', forcePathStyle: true, ...CREDS });
});

afterAll(async () => {
  store?.destroy();
  await s3?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe('shard work of a failed job', () => {
  it('is removed for the failed search or re-rank alone; other jobs, other queues and unsharded jobs are left as they are', async () => {
    const failed = ['input-r0.json', 'r0-s0.json', 'r0-s1.json'].map((n) => shardWorkKey('search', 't1', 'se-failed', n));
    const other = shardWorkKey('search', 't1', 'se-other', 'r0-s0.json');
    const rerank = shardWorkKey('rerank', 't1', 'rr-failed', 'r0-s1.json');
    const result = 'tenants/t1/search/se-failed/result.json';
    for (const key of [...failed, other, rerank, result]) await store.putJson(key, { key });

    expect(await dropShardWorkOfFailedJob(store, QueueName.search, { tenantId: 't1', searchId: 'se-failed' })).toBe(3);
    for (const key of failed) expect(await store.exists(key), key).toBe(false);
    expect(await store.exists(other)).toBe(true);
    expect(await store.exists(rerank)).toBe(true);
    expect(await store.exists(result)).toBe(true);

    // another queue's job, or one without its ids: nothing listed, nothing removed
    expect(await dropShardWorkOfFailedJob(store, QueueName.encode, { tenantId: 't1', searchId: 'se-other' })).toBe(0);
    expect(await dropShardWorkOfFailedJob(store, QueueName.rerank, { tenantId: 't1' })).toBe(0);
    expect(await store.exists(other)).toBe(true);
    // an unsharded job: an empty prefix
    expect(await dropShardWorkOfFailedJob(store, QueueName.search, { tenantId: 't1', searchId: 'se-unsharded' })).toBe(0);

    expect(await dropShardWorkOfFailedJob(store, QueueName.rerank, { tenantId: 't1', rerankId: 'rr-failed' })).toBe(1);
    expect(await store.exists(rerank)).toBe(false);
  });
});
