import { PermanentJobError, QueueName, assignShard, collectionShards, parentOf, s3Keys, warpEpochOf, warpLayoutToWrite, type Collection, type JobPayload, type JobResults, type SegmentRef } from '@lateral/shared';

/** A commit job that commits a written segment (the commit queue also carries deletes: delete.processor.ts). */
export type SegmentCommitPayload = Extract<JobPayload<QueueName.commit>, { batchId: string }>;
import { SegmentCorruptError, crc32c, readSegment } from '@lateral/codec';
import type { CodecArtifactRepository, CollectionRepository, GenerationRepository, Logger, ObjectStore } from '@lateral/infra';
import { parseSegmentHead } from '@lateral/serving';
import { logIngestionIfFinished } from '../job-logs';
import { gcKeys } from '../maintenance/gc';
import type { CommitOutcome } from '../maintenance/merge-schedule';
import type { SegmentIds } from '../segment-ids';

/** What the commit processor touches. */
export interface CommitDeps {
  store: Pick<ObjectStore, 'get' | 'exists'>;
  collections: Pick<CollectionRepository, 'get' | 'update'>;
  generations: Pick<GenerationRepository, 'commit' | 'recordPending' | 'pending' | 'clearPending'>;
  codecs: Pick<CodecArtifactRepository, 'get'>;
  liveIds: Pick<SegmentIds, 'remember' | 'live'>;
  logger: Logger;
}

/**
 * Makes a written segment part of the collection's next generation (S3 conditional write, see
 * GenerationRepository). Idempotent: a replayed job whose segment is already listed, same key and
 * checksum, writes no generation. Segments of a re-compression are only recorded; the one that
 * completes the set commits them all at once, so a collection is never scored with half of its
 * segments at one codec and half at another.
 */
export async function commitProcessor(deps: CommitDeps, p: SegmentCommitPayload): Promise<JobResults[QueueName.commit]> {
  return (await commitSegment(deps, p)).result;
}

/** commitProcessor, with the record and the manifest committed (for the maintenance the worker schedules next: no second read). */
export async function commitSegment(deps: CommitDeps, p: SegmentCommitPayload): Promise<CommitOutcome<JobResults[QueueName.commit]>> {
  const collection = await deps.collections.get(p.tenantId, p.collectionId);
  if (!collection) throw new PermanentJobError(`collection ${p.tenantId}/${p.collectionId} no longer exists`);
  const seg = (await verifiedByIndex(deps, p)) ?? (await readAndVerify(deps, p));
  deps.liveIds.remember(p.tenantId, p.collectionId, p.segmentKey, seg.docIds);
  let ref: SegmentRef = {
    batchId: p.batchId,
    codecVersion: p.codecVersion,
    key: p.segmentKey,
    documents: seg.documents,
    tokens: seg.tokens,
    bytes: seg.bytes,
    checksum: seg.checksum,
    ...(seg.head ? { head: true } : {}),
  };
  if (collection.pending && collection.pending.codecVersion === p.codecVersion) return commitRecompression(deps, collection, p, ref);

  const mergedAway = (q: SegmentCommitPayload) => deps.store.exists(gcKeys.mergedAway(q.tenantId, q.collectionId, q.batchId));
  const result = await deps.generations.commit(p.tenantId, p.collectionId, async (segments, current) => {
    const warp = warpLayoutToWrite(collection, p.codecVersion);
    if (warp) ref = await withWarpEpoch(deps, p, ref, segments, warp.epoch ?? 0);
    const i = segments.findIndex((s) => s.batchId === p.batchId);
    if (i >= 0 && segments[i].key === ref.key && segments[i].checksum === ref.checksum) return null; // already committed
    if (i >= 0) segments[i] = withTombstones(ref, segments[i]); // the same batch's documents, in the same order
    else if (await mergedAway(p)) return null; // a replayed job: a merge already replaced this batch's segment
    else segments.push(collectionShards(collection) > 1 ? { ...ref, shard: assignShard(segments, collectionShards(collection)) } : ref); // the least-loaded shard
    // Copies of the new segment's ids in earlier segments are tombstoned (the later ingest replaces them).
    const live = await deps.liveIds.live(p.tenantId, p.collectionId, segments, collection.passages ? passageFamily : undefined);
    return { segments: live.segments, codecVersion: current?.codecVersion ?? collection.codecVersion, documents: live.documents };
  });
  // The ingestion's one summary line, when this commit completed it (a log failure never fails the commit).
  if (result.committed) await logIngestionIfFinished(deps.store, deps.logger, p, result.manifest).catch((err: Error) => deps.logger.debug(`ingestion summary skipped: ${err.message}`));
  return { result: { generation: result.manifest.generation, committed: result.committed }, committed: result.committed ? { collection, manifest: result.manifest } : null };
}

/** What the commit needs of a segment: its ids and counts, its size and whole-object CRC-32C (8 hex digits), and whether its head is stored. */
interface CommittedSegment {
  docIds: string[];
  documents: number;
  tokens: number;
  bytes: number;
  checksum: string;
  head: boolean;
}

/**
 * The segment as its index job verified it (`p.verified`: every section's checksum checked on the
 * bytes whose whole-object CRC-32C and size it names, the head stored from the same read), from the
 * small stored head instead of the whole object: the object must still be in S3 and the head's
 * size the verified one. null (the caller reads the segment whole): a job queued without it, or a
 * head that is missing, corrupt or of another object.
 */
async function verifiedByIndex(deps: Pick<CommitDeps, 'store'>, p: SegmentCommitPayload): Promise<CommittedSegment | null> {
  if (!p.verified) return null;
  const [headBytes, present] = await Promise.all([deps.store.get(s3Keys.segmentHead(p.tenantId, p.collectionId, p.batchId, p.codecVersion)), deps.store.exists(p.segmentKey)]);
  if (!present) throw new PermanentJobError(`segment missing from S3: ${p.segmentKey}`);
  const head = headBytes ? parseSegmentHead(headBytes) : null;
  if (!head || head.objectBytes !== p.verified.bytes) return null;
  return { docIds: [...head.docIds], documents: head.documents, tokens: head.tokenOffsets[head.documents], bytes: p.verified.bytes, checksum: p.verified.checksum, head: true };
}

/** The segment read whole, every section's checksum verified before it becomes visible to readers. */
async function readAndVerify(deps: Pick<CommitDeps, 'store' | 'codecs'>, p: SegmentCommitPayload): Promise<CommittedSegment> {
  const bytes = await deps.store.get(p.segmentKey);
  if (!bytes) throw new PermanentJobError(`segment missing from S3: ${p.segmentKey}`);
  const artifact = await deps.codecs.get(p.tenantId, p.collectionId, p.codecVersion);
  let seg;
  try {
    seg = readSegment(bytes, p.segmentKey, artifact);
  } catch (err) {
    // Retrying the commit cannot repair the object (only its compress job writes it): fail for good.
    if (err instanceof SegmentCorruptError) throw new PermanentJobError(err.message);
    throw err;
  }
  return {
    docIds: seg.docIds,
    documents: seg.documents,
    tokens: seg.tokens,
    bytes: bytes.byteLength,
    checksum: crc32c(bytes).toString(16).padStart(8, '0'),
    // The index stage stores the head before enqueueing the commit; a replayed job from before heads were stored finds none.
    head: await deps.store.exists(s3Keys.segmentHead(p.tenantId, p.collectionId, p.batchId, p.codecVersion)),
  };
}

/**
 * A WARP collection's segment names the centroid epoch its index job built its layout at: the
 * newest epoch of the generation it joins (or `from`, a re-index's epoch, when newer) whose layout
 * exists for the batch (an index job that ran before a refit committed built an older one; the
 * next merge job moves it).
 */
async function withWarpEpoch(deps: Pick<CommitDeps, 'store'>, p: SegmentCommitPayload, ref: SegmentRef, segments: readonly SegmentRef[], from = 0): Promise<SegmentRef> {
  const { warpEpoch: _, ...plain } = ref;
  for (let e = Math.max(from, warpEpochOf(segments.filter((s) => s.codecVersion === p.codecVersion))); e > 0; e--) {
    if (await deps.store.exists(s3Keys.searchLayout(p.tenantId, p.collectionId, p.batchId, p.codecVersion, e))) return { ...plain, warpEpoch: e };
  }
  return plain;
}

async function commitRecompression(deps: CommitDeps, collection: Collection, p: SegmentCommitPayload, ref: SegmentRef): Promise<CommitOutcome<JobResults[QueueName.commit]>> {
  const pending = collection.pending!;
  await deps.generations.recordPending(p.tenantId, p.collectionId, p.codecVersion, ref);
  const written = await deps.generations.pending(p.tenantId, p.collectionId, p.codecVersion);
  if (!pending.batches.every((b) => written.has(b))) return { result: { generation: 0, committed: false }, committed: null };
  // Two last jobs can both see the set complete: the second finds the version committed and changes nothing.
  const result = await deps.generations.commit(p.tenantId, p.collectionId, (segments, current) =>
    current?.codecVersion === p.codecVersion
      ? null
      : {
          // Every re-compressed batch at once; batches ingested meanwhile keep their own version.
          // (a re-compressed batch holds the same documents in the same order: its tombstones carry over)
          segments: segments.map((s) => (written.has(s.batchId) ? withTombstones(written.get(s.batchId)!, s) : s)),
          codecVersion: p.codecVersion,
          documents: current?.documents,
        },
  );
  // Re-read: the collection record may have changed while the segments were written.
  let record = (await deps.collections.get(p.tenantId, p.collectionId)) ?? collection;
  if (record.pending?.codecVersion === p.codecVersion) {
    record = { ...record, codec: pending.codec, codecVersion: p.codecVersion, pending: undefined };
    await deps.collections.update(record);
  }
  await deps.generations.clearPending(p.tenantId, p.collectionId, p.codecVersion);
  if (result.committed) deps.logger.info(`re-compressed ${p.collectionId} to codec v${p.codecVersion}: generation ${result.manifest.generation}`);
  // The record as written here (the re-compression done), with the generation it committed.
  return { result: { generation: result.manifest.generation, committed: result.committed }, committed: result.committed ? { collection: record, manifest: result.manifest } : null };
}

/** `ref` carrying `previous`'s tombstones (the same batch written again: same documents, same order). */
function withTombstones(ref: SegmentRef, previous: SegmentRef): SegmentRef {
  const out = previous.tombstones && previous.tombstones.length > 0 ? { ...ref, tombstones: previous.tombstones } : ref;
  // A re-compressed merge output still stands for the batches merged into it, in the same shard.
  const kept = previous.batches && !out.batches ? { ...out, batches: previous.batches } : out;
  return previous.shard !== undefined && kept.shard === undefined ? { ...kept, shard: previous.shard } : kept;
}

/** Passages `d#n` and the document `d` are one family (collections with passages reserve '#'). */
function passageFamily(id: string): string {
  return parentOf(id) ?? id;
}
