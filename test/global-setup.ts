import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { TestProject } from 'vitest/node';
import { startEmbeddedRedis, startEmbeddedS3 } from '../libs/infra/src/embedded-services';

declare module 'vitest' {
  export interface ProvidedContext {
    redisUrl: string;
    s3Endpoint: string;
  }
}

/**
 * One real redis-server (from PATH) and one real S3-compatible server for the whole run, on free
 * ports. Each test file isolates itself with its own Redis key prefix and its own bucket.
 */
export default async function setup(project: TestProject) {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'lateral-test-'));
  const redis = await startEmbeddedRedis({ dir: path.join(dir, 'redis') });
  const s3 = await startEmbeddedS3({ dir: path.join(dir, 's3'), bucket: 'lateral-test', accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' });
  project.provide('redisUrl', redis.url);
  project.provide('s3Endpoint', s3.endpoint);
  return async () => {
    await s3.stop();
    await redis.stop();
    rmSync(dir, { recursive: true, force: true });
  };
}
