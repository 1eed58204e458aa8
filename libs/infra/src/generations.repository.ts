import { s3Keys, type CollectionManifest, type SegmentRef } from '@lateral/shared';
import type { ObjectStore } from './object-store';

/** What a commit changes: the next segment list, its codec version and its distinct live documents. */
export interface GenerationChange {
  segments: SegmentRef[];
  codecVersion: number;
  /** Distinct live document ids of the new generation (default: the sum over its segments). */
  documents?: number;
}

export interface CommitResult {
  manifest: CollectionManifest;
  /** false: the change was already there (a replayed job), no generation was written. */
  committed: boolean;
}

/** Raised when a commit lost the race for the next generation more often than `maxAttempts`. */
export class CommitContentionError extends Error {}

const GENERATION_KEY = /\/manifests\/(\d{10})\.json$/;

/**
 * Generations of a collection, owned in S3 alone: generation g is the object
 * `manifests/{g, 10 digits}.json`, written once with `If-None-Match: *`, and the current
 * generation is the highest manifest in S3. Two committers can never both write generation g:
 * the loser gets 412, re-reads the new current generation, re-applies its change and tries g + 1.
 * No Redis lock or pointer is involved, so losing Redis loses no generation and cannot make one
 * be written twice. Also owns a re-compression's written segments until they commit together.
 *
 * The process keeps, per collection, the highest generation it has seen (a lower bound, since
 * generations only grow): finding the current one lists only the keys after it.
 */
export class GenerationRepository {
  private readonly seen = new Map<string, number>();

  constructor(
    private readonly store: ObjectStore,
    private readonly opts: {
      maxAttempts?: number;
      backoffMs?: number;
      /** Called after a commit (a new generation, or one found already made) before it returns (ServingCache's version bump). */
      onCommit?: (tenantId: string, id: string) => Promise<void>;
    } = {},
  ) {}

  /** The highest committed generation in S3 (0: none yet). */
  async current(tenantId: string, id: string): Promise<number> {
    const k = `${tenantId}/${id}`;
    const known = this.seen.get(k) ?? 0;
    const prefix = s3Keys.manifestPrefix(tenantId, id);
    const after = known > 0 ? s3Keys.manifest(tenantId, id, known) : undefined;
    const key = await this.store.latestKey(prefix, after ? { startAfter: after } : {});
    const g = key ? Number(GENERATION_KEY.exec(key)?.[1] ?? 0) : known;
    if (g > known) this.seen.set(k, g);
    return g;
  }

  /** The manifest of `generation`, or of the current generation; null when there is none. */
  async manifest(tenantId: string, id: string, generation?: number): Promise<CollectionManifest | null> {
    if (generation !== undefined) return generation > 0 ? this.store.getJson<CollectionManifest>(s3Keys.manifest(tenantId, id, generation)) : null;
    const g = await this.current(tenantId, id);
    if (g === 0) return null;
    const m = await this.store.getJson<CollectionManifest>(s3Keys.manifest(tenantId, id, g));
    if (m) return m;
    // The remembered generation is gone: the collection was deleted (and maybe created again).
    this.forget(tenantId, id);
    const again = await this.current(tenantId, id);
    return again > 0 ? this.store.getJson<CollectionManifest>(s3Keys.manifest(tenantId, id, again)) : null;
  }

  /** Drops what this process remembers of a collection (after a delete). */
  forget(tenantId: string, id: string): void {
    this.seen.delete(`${tenantId}/${id}`);
  }

  /**
   * Commits `change` applied to the current generation as the next one. `change` returns null
   * when there is nothing to change (the same commit already made, e.g. by a replayed job): no
   * generation is written. It may be called more than once, each time on the newest segments.
   * An S3 error leaves the previous generation current and is thrown (the job is retried).
   */
  async commit(
    tenantId: string,
    id: string,
    change: (segments: SegmentRef[], current: CollectionManifest | null) => GenerationChange | null | Promise<GenerationChange | null>,
  ): Promise<CommitResult> {
    const attempts = this.opts.maxAttempts ?? 100;
    const backoff = this.opts.backoffMs ?? 20;
    for (let attempt = 0; attempt < attempts; attempt++) {
      const current = await this.manifest(tenantId, id);
      const next = await change([...(current?.segments ?? [])], current);
      if (next === null) {
        if (!current) throw new Error(`nothing to commit for ${tenantId}/${id} and no generation yet`);
        // A replayed commit may follow one whose process died before telling the caches: tell them again.
        await this.opts.onCommit?.(tenantId, id);
        return { manifest: current, committed: false };
      }
      const generation = (current?.generation ?? 0) + 1;
      const manifest: CollectionManifest = {
        tenantId,
        collectionId: id,
        generation,
        codecVersion: next.codecVersion,
        committedAt: new Date().toISOString(),
        segments: next.segments,
        documents: next.documents ?? next.segments.reduce((s, x) => s + x.documents, 0),
      };
      if (await this.store.putJsonIfAbsent(s3Keys.manifest(tenantId, id, generation), manifest)) {
        const k = `${tenantId}/${id}`;
        if (generation > (this.seen.get(k) ?? 0)) this.seen.set(k, generation);
        // A failure here fails the commit (its job is retried: the replay finds it made and tells the caches again).
        await this.opts.onCommit?.(tenantId, id);
        return { manifest, committed: true };
      }
      // Another committer wrote this generation first: re-read and apply the change on top of it.
      await new Promise((r) => setTimeout(r, Math.random() * backoff * Math.min(8, attempt + 1)));
    }
    throw new CommitContentionError(`could not commit a generation of ${tenantId}/${id}: lost the race ${attempts} times`);
  }

  // ---- re-compressions ------------------------------------------------------------------------

  /** Records a re-compression's written segment; idempotent (the same batch overwrites its own record). */
  async recordPending(tenantId: string, id: string, codecVersion: number, ref: SegmentRef): Promise<void> {
    await this.store.putJson(s3Keys.pendingSegment(tenantId, id, codecVersion, ref.batchId), ref);
  }

  /** The written segments of re-compression `codecVersion`, by batch id. */
  async pending(tenantId: string, id: string, codecVersion: number): Promise<Map<string, SegmentRef>> {
    const prefix = s3Keys.pendingPrefix(tenantId, id, codecVersion);
    const keys = await this.store.list(prefix);
    const refs = await Promise.all(keys.map((k) => this.store.getJson<SegmentRef>(k.key)));
    return new Map(refs.filter((r): r is SegmentRef => r !== null).map((r) => [r.batchId, r]));
  }

  async clearPending(tenantId: string, id: string, codecVersion: number): Promise<void> {
    await this.store.deletePrefix(s3Keys.pendingPrefix(tenantId, id, codecVersion));
  }
}
