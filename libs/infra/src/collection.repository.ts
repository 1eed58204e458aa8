import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import {
  STAGES,
  redisKeys,
  s3Keys,
  type Collection,
  type CollectionManifest,
  type SegmentRef,
  type Stage,
} from '@lateral/shared';
import type { ObjectStore } from './object-store';

/**
 * Collections, their committed manifests (generations) and per-stage document counters.
 * The collection record and every manifest generation live in S3 (the source of truth);
 * Redis holds the current generation pointer, the collection list and the counters.
 */
export class CollectionRepository {
  constructor(private readonly store: ObjectStore, private readonly redis: Redis, private readonly prefix: string) {}

  async create(c: Collection): Promise<void> {
    await this.store.putJson(s3Keys.collection(c.tenantId, c.id), c);
    await this.redis.sadd(redisKeys.collections(this.prefix, c.tenantId), c.id);
  }

  async get(tenantId: string, id: string): Promise<Collection | null> {
    return this.store.getJson<Collection>(s3Keys.collection(tenantId, id));
  }

  async update(c: Collection): Promise<void> {
    await this.store.putJson(s3Keys.collection(c.tenantId, c.id), c);
  }

  async list(tenantId: string): Promise<string[]> {
    return (await this.redis.smembers(redisKeys.collections(this.prefix, tenantId))).sort();
  }

  async delete(tenantId: string, id: string): Promise<number> {
    const ingestions = await this.redis.smembers(redisKeys.ingestions(this.prefix, tenantId, id));
    const keys = [
      redisKeys.collectionStats(this.prefix, tenantId, id),
      redisKeys.generation(this.prefix, tenantId, id),
      redisKeys.ingestions(this.prefix, tenantId, id),
      ...ingestions.map((i) => redisKeys.ingestion(this.prefix, tenantId, id, i)),
    ];
    await this.redis.multi().srem(redisKeys.collections(this.prefix, tenantId), id).del(...keys).exec();
    return this.store.deletePrefix(s3Keys.collectionPrefix(tenantId, id));
  }

  // ---- generations -------------------------------------------------------------------------

  async currentGeneration(tenantId: string, id: string): Promise<number> {
    return Number((await this.redis.get(redisKeys.generation(this.prefix, tenantId, id))) ?? 0);
  }

  async manifest(tenantId: string, id: string, generation?: number): Promise<CollectionManifest | null> {
    const g = generation ?? (await this.currentGeneration(tenantId, id));
    if (g === 0) return null;
    return this.store.getJson<CollectionManifest>(s3Keys.manifest(tenantId, id, g));
  }

  /**
   * Commits a change to the segment list as a new generation. The new manifest object is written
   * to S3 under the next generation number before the pointer moves, under a Redis lock, so
   * readers see either the old generation or the new one, never a partial list. `change` may
   * return null when there is nothing to commit.
   */
  async commit(
    tenantId: string,
    id: string,
    change: (segments: SegmentRef[], codecVersion: number) => { segments: SegmentRef[]; codecVersion: number } | null,
  ): Promise<CollectionManifest> {
    return this.withLock(redisKeys.manifestLock(this.prefix, tenantId, id), async () => {
      const current = await this.manifest(tenantId, id);
      const prev = current ?? { segments: [] as SegmentRef[], codecVersion: 1, generation: 0 };
      const next = change([...prev.segments], prev.codecVersion);
      // null: nothing to change (e.g. the same commit already made by a concurrent job).
      if (next === null && current) return current;
      if (next === null) throw new Error(`nothing to commit for ${tenantId}/${id} and no manifest yet`);
      const manifest: CollectionManifest = {
        tenantId,
        collectionId: id,
        generation: prev.generation + 1,
        codecVersion: next.codecVersion,
        committedAt: new Date().toISOString(),
        segments: next.segments,
      };
      await this.store.putJson(s3Keys.manifest(tenantId, id, manifest.generation), manifest);
      await this.redis.set(redisKeys.generation(this.prefix, tenantId, id), String(manifest.generation));
      return manifest;
    });
  }

  private async withLock<T>(key: string, fn: () => Promise<T>, ttlMs = 30_000): Promise<T> {
    const token = randomUUID();
    const deadline = Date.now() + 60_000;
    while ((await this.redis.set(key, token, 'PX', ttlMs, 'NX')) !== 'OK') {
      if (Date.now() > deadline) throw new Error(`could not take lock ${key} within 60 s`);
      await new Promise((r) => setTimeout(r, 25 + Math.random() * 50));
    }
    try {
      return await fn();
    } finally {
      // Release only our own lock.
      await this.redis.eval("if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end", 1, key, token);
    }
  }

  // ---- counters ----------------------------------------------------------------------------

  async startIngestion(tenantId: string, id: string, ingestionId: string, documents: number, batches: number): Promise<void> {
    const key = redisKeys.ingestion(this.prefix, tenantId, id, ingestionId);
    await this.redis
      .multi()
      .hset(key, { accepted: documents, encoded: 0, compressed: 0, indexed: 0, failed: 0, batches, createdAt: new Date().toISOString() })
      .sadd(redisKeys.ingestions(this.prefix, tenantId, id), ingestionId)
      .hincrby(redisKeys.collectionStats(this.prefix, tenantId, id), 'accepted', documents)
      .exec();
  }

  async count(tenantId: string, id: string, ingestionId: string | null, stage: Stage, n: number): Promise<void> {
    const m = this.redis.multi().hincrby(redisKeys.collectionStats(this.prefix, tenantId, id), stage, n);
    if (ingestionId) m.hincrby(redisKeys.ingestion(this.prefix, tenantId, id, ingestionId), stage, n);
    await m.exec();
  }

  /** Adds tokens / bytes to the collection's totals (shown by the API and the dashboard). */
  async addTotals(tenantId: string, id: string, fields: Record<string, number>): Promise<void> {
    const m = this.redis.multi();
    for (const [f, n] of Object.entries(fields)) m.hincrby(redisKeys.collectionStats(this.prefix, tenantId, id), f, n);
    await m.exec();
  }

  async ingestion(tenantId: string, id: string, ingestionId: string): Promise<Record<string, number | string> | null> {
    const h = await this.redis.hgetall(redisKeys.ingestion(this.prefix, tenantId, id, ingestionId));
    if (!h || Object.keys(h).length === 0) return null;
    const out: Record<string, number | string> = { createdAt: h.createdAt ?? '' };
    for (const s of [...STAGES, 'batches']) out[s] = Number(h[s] ?? 0);
    return out;
  }

  async stats(tenantId: string, id: string): Promise<Record<string, number>> {
    const h = await this.redis.hgetall(redisKeys.collectionStats(this.prefix, tenantId, id));
    return Object.fromEntries(Object.entries(h).map(([k, v]) => [k, Number(v)]));
  }
}
