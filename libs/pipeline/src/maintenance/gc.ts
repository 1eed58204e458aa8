import { batchInfoKey, s3Keys, type SegmentRef } from '@lateral/shared';
import type { GenerationRepository, Logger, ObjectStore } from '@lateral/infra';

/**
 * What a committed merge stopped referencing: written by the merge job beside the generation it
 * committed (`gc/{generation}.json`), removed by collectGarbage once that generation is the oldest
 * kept one or older (no kept generation lists the inputs any more) and the grace period has passed.
 */
export interface GarbageRecord {
  /** The generation that replaced the inputs. */
  generation: number;
  committedAt: string;
  /** Segments, their indexes, raw fp16 batches and the batches' documents and info. */
  objects: string[];
}

/** Settings of garbage collection (KEEP_GENERATIONS, GC_GRACE_SECONDS). */
export interface GcSettings {
  /** Newest generations whose objects are kept (their segments stay readable for requests still on them). */
  keepGenerations: number;
  /** Seconds an object stays after the generation that stopped referencing it was committed. */
  graceSeconds: number;
}

export const gcKeys = {
  prefix: (tenantId: string, collectionId: string) => `${s3Keys.collectionPrefix(tenantId, collectionId)}gc/`,
  record: (tenantId: string, collectionId: string, generation: number) => `${s3Keys.collectionPrefix(tenantId, collectionId)}gc/${String(generation).padStart(10, '0')}.json`,
  /**
   * Written for each batch a committed merge replaced: a commit job of that batch replayed later
   * (a stalled job run again) must not bring the merged-away segment back. Removed with its objects.
   */
  mergedAway: (tenantId: string, collectionId: string, ingestBatchId: string) => `${s3Keys.collectionPrefix(tenantId, collectionId)}merged-away/${ingestBatchId}.json`,
};

/**
 * Every object of a committed segment's batch that a merge makes unreferenced: segment, index, head,
 * raw vectors, documents and info; with `warp` (collections with `search.layout` 'warp') its
 * search layout too.
 */
export function segmentObjects(tenantId: string, collectionId: string, ref: SegmentRef, opts: { warp?: boolean } = {}): string[] {
  return [
    ref.key,
    s3Keys.segmentIndex(tenantId, collectionId, ref.batchId, ref.codecVersion),
    s3Keys.segmentHead(tenantId, collectionId, ref.batchId, ref.codecVersion),
    ...(opts.warp ? [s3Keys.searchLayout(tenantId, collectionId, ref.batchId, ref.codecVersion, ref.warpEpoch ?? 0)] : []),
    s3Keys.rawVectors(tenantId, collectionId, ref.batchId),
    s3Keys.batchDocuments(tenantId, collectionId, ref.batchId),
    batchInfoKey(tenantId, collectionId, ref.batchId),
    gcKeys.mergedAway(tenantId, collectionId, ref.batchId),
  ];
}

/**
 * Removes the objects of the garbage records whose generation no kept generation predates (the
 * `keepGenerations` newest ones are all at or after it, so none of them lists the replaced
 * segments) and whose generation was committed at least `graceSeconds` ago (readers still on an
 * older generation finish first). Only objects a committed merge replaced are ever removed: a batch
 * still on its way to a commit, or a merge's output that lost its commit, is never listed.
 * Returns the number of objects removed.
 */
export async function collectGarbage(
  deps: { store: Pick<ObjectStore, 'list' | 'getJson' | 'delete'>; generations: Pick<GenerationRepository, 'manifest'>; logger: Logger },
  tenantId: string,
  collectionId: string,
  settings: GcSettings,
  now = Date.now(),
): Promise<number> {
  const current = await deps.generations.manifest(tenantId, collectionId);
  if (!current) return 0;
  const oldestKept = Math.max(1, current.generation - settings.keepGenerations + 1);
  let removed = 0;
  for (const { key } of await deps.store.list(gcKeys.prefix(tenantId, collectionId))) {
    const rec = await deps.store.getJson<GarbageRecord>(key);
    if (!rec || rec.generation > oldestKept) continue;
    if (now - Date.parse(rec.committedAt) < settings.graceSeconds * 1000) continue;
    for (const object of rec.objects) await deps.store.delete(object);
    await deps.store.delete(key); // last: a crash before it repeats the (idempotent) deletes
    removed += rec.objects.length;
  }
  if (removed > 0) deps.logger.info(`garbage collection of ${collectionId}: ${removed} objects of merged segments removed`);
  return removed;
}
