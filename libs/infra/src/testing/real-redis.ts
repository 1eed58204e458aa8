import os from 'node:os';
import path from 'node:path';
import { mkdtempSync, rmSync } from 'node:fs';
import { Redis } from 'ioredis';
import { startEmbeddedRedis } from '../embedded-services';

/** A redis-server of its own in a temporary folder and a client to it, for specs against real Redis; `stop` ends both and removes the folder. */
export async function startRealRedis(prefix: string): Promise<{ redis: Redis; stop: () => Promise<void> }> {
  const dir = mkdtempSync(path.join(os.tmpdir(), prefix));
  const server = await startEmbeddedRedis({ dir });
  const redis = new Redis(server.url);
  return {
    redis,
    stop: async () => {
      redis.disconnect();
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
