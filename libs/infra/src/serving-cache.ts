import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { redisKeys, type Collection, type CollectionManifest } from '@lateral/shared';
import type { CollectionRepository } from './collection.repository';
import type { GenerationRepository } from './generations.repository';

interface Entry {
  token: string;
  at: number;
  collection?: Promise<Collection | null>;
  manifest?: Promise<CollectionManifest | null>;
}

/**
 * The collection record and current manifest that every search and re-rank reads, kept in memory
 * instead of read from S3 each time (issue 31 item 2). S3 stays the truth; Redis holds, per
 * collection, a random token (redisKeys.servingVersion) that every change replaces: the
 * repositories call `bump` after each write of a record (create, update, delete) and each commit
 * of a generation (ingest, delete, merge, re-compression), before the change is acknowledged. A
 * read costs one Redis GET: an entry is served only when it was loaded under the token Redis
 * holds now, and a token is always read before the S3 read it guards, so a change acknowledged
 * before a read began (its bump done) is never hidden by an older entry. Tokens are never reused
 * (random), so a Redis that lost its data cannot make an old entry look current: a missing token
 * is minted again and the next read goes to S3. When Redis does not answer, reads go to S3
 * uncached. Entries also expire after `maxAgeMs`, and callers get copies (they may mutate them).
 */
export class ServingCache {
  private readonly entries = new Map<string, Entry>();

  constructor(
    private readonly redis: Pick<Redis, 'get' | 'set'>,
    private readonly prefix: string,
    private readonly collections: Pick<CollectionRepository, 'get'>,
    private readonly generations: Pick<GenerationRepository, 'manifest'>,
    private readonly opts: { maxEntries?: number; maxAgeMs?: number } = {},
  ) {}

  /** Replaces the collection's token: every process's entry for it is stale from now on. */
  static async bump(redis: Pick<Redis, 'set'>, prefix: string, tenantId: string, id: string): Promise<void> {
    await redis.set(redisKeys.servingVersion(prefix, tenantId, id), randomUUID());
  }

  /** The collection's record (null: none), as CollectionRepository.get reads it. */
  collection(tenantId: string, id: string): Promise<Collection | null> {
    return this.read(tenantId, id, 'collection', () => this.collections.get(tenantId, id));
  }

  /** The current generation's manifest (null: none yet), as GenerationRepository.manifest reads it. */
  manifest(tenantId: string, id: string): Promise<CollectionManifest | null> {
    return this.read(tenantId, id, 'manifest', () => this.generations.manifest(tenantId, id));
  }

  /** The token Redis holds now (minted when missing), or null when Redis does not answer. */
  private async token(tenantId: string, id: string): Promise<string | null> {
    const key = redisKeys.servingVersion(this.prefix, tenantId, id);
    try {
      const now = await this.redis.get(key);
      if (now) return now;
      const minted = randomUUID();
      if (await this.redis.set(key, minted, 'NX')) return minted;
      return await this.redis.get(key);
    } catch {
      return null;
    }
  }

  private async read<K extends 'collection' | 'manifest'>(tenantId: string, id: string, part: K, load: () => NonNullable<Entry[K]>): Promise<Awaited<NonNullable<Entry[K]>>> {
    const token = await this.token(tenantId, id);
    if (token === null) return load() as Promise<Awaited<NonNullable<Entry[K]>>>;
    const k = `${tenantId}/${id}`;
    let e = this.entries.get(k);
    if (!e || e.token !== token || Date.now() - e.at > (this.opts.maxAgeMs ?? 60_000)) {
      e = { token, at: Date.now() };
      this.entries.delete(k);
      this.entries.set(k, e);
      // Oldest first (insertion order): a bounded map.
      while (this.entries.size > (this.opts.maxEntries ?? 10_000)) this.entries.delete(this.entries.keys().next().value!);
    }
    const entry = e;
    let p = entry[part];
    if (!p) {
      p = load() as NonNullable<Entry[K]>;
      entry[part] = p;
      // A failed read is not kept: the next one tries S3 again.
      p.catch(() => {
        if (entry[part] === p) delete entry[part];
      });
    }
    return structuredClone(await p) as Awaited<NonNullable<Entry[K]>>;
  }
}
