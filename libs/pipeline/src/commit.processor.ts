import { PermanentJobError, QueueName, type Collection, type JobPayload, type JobResults, type SegmentRef } from '@lateral/shared';
import { SegmentCorruptError, crc32c, readSegment } from '@lateral/codec';
import type { CodecArtifactRepository, CollectionRepository, GenerationRepository, Logger, ObjectStore } from '@lateral/infra';
import { logIngestionIfFinished } from './job-logs';

/** What the commit processor touches. */
export interface CommitDeps {
  store: Pick<ObjectStore, 'get'>;
  collections: Pick<CollectionRepository, 'get' | 'update'>;
  generations: Pick<GenerationRepository, 'commit' | 'recordPending' | 'pending' | 'clearPending'>;
  codecs: Pick<CodecArtifactRepository, 'get'>;
  liveIds: Pick<SegmentIds, 'remember' | 'count'>;
  logger: Logger;
}

/**
 * Makes a written segment part of the collection's next generation (S3 conditional write, see
 * GenerationRepository). Idempotent: a replayed job whose segment is already listed, same key and
 * checksum, writes no generation. Segments of a re-compression are only recorded; the one that
 * completes the set commits them all at once, so a collection is never scored with half of its
 * segments at one codec and half at another.
 */
export async function commitProcessor(deps: CommitDeps, p: JobPayload<QueueName.commit>): Promise<JobResults[QueueName.commit]> {
  const collection = await deps.collections.get(p.tenantId, p.collectionId);
  if (!collection) throw new PermanentJobError(`collection ${p.tenantId}/${p.collectionId} no longer exists`);
  const bytes = await deps.store.get(p.segmentKey);
  if (!bytes) throw new PermanentJobError(`segment missing from S3: ${p.segmentKey}`);
  // Verifies every section's checksum before the segment becomes visible to readers.
  const artifact = await deps.codecs.get(p.tenantId, p.collectionId, p.codecVersion);
  let seg;
  try {
    seg = readSegment(bytes, p.segmentKey, artifact);
  } catch (err) {
    // Retrying the commit cannot repair the object (only its compress job writes it): fail for good.
    if (err instanceof SegmentCorruptError) throw new PermanentJobError(err.message);
    throw err;
  }
  deps.liveIds.remember(p.segmentKey, seg.docIds);
  const ref: SegmentRef = {
    batchId: p.batchId,
    codecVersion: p.codecVersion,
    key: p.segmentKey,
    documents: seg.documents,
    tokens: seg.tokens,
    bytes: bytes.byteLength,
    checksum: crc32c(bytes).toString(16).padStart(8, '0'),
  };
  if (collection.pending && collection.pending.codecVersion === p.codecVersion) return commitRecompression(deps, collection, p, ref);

  const result = await deps.generations.commit(p.tenantId, p.collectionId, async (segments, current) => {
    const i = segments.findIndex((s) => s.batchId === p.batchId);
    if (i >= 0 && segments[i].key === ref.key && segments[i].checksum === ref.checksum) return null; // already committed
    if (i >= 0) segments[i] = ref;
    else segments.push(ref);
    return { segments, codecVersion: current?.codecVersion ?? collection.codecVersion, documents: await deps.liveIds.count(p.tenantId, p.collectionId, segments) };
  });
  // The ingestion's one summary line, when this commit completed it (a log failure never fails the commit).
  if (result.committed) await logIngestionIfFinished(deps.store, deps.logger, p, result.manifest).catch((err: Error) => deps.logger.debug(`ingestion summary skipped: ${err.message}`));
  return { generation: result.manifest.generation, committed: result.committed };
}

async function commitRecompression(deps: CommitDeps, collection: Collection, p: JobPayload<QueueName.commit>, ref: SegmentRef): Promise<JobResults[QueueName.commit]> {
  const pending = collection.pending!;
  await deps.generations.recordPending(p.tenantId, p.collectionId, p.codecVersion, ref);
  const written = await deps.generations.pending(p.tenantId, p.collectionId, p.codecVersion);
  if (!pending.batches.every((b) => written.has(b))) return { generation: 0, committed: false };
  // Two last jobs can both see the set complete: the second finds the version committed and changes nothing.
  const result = await deps.generations.commit(p.tenantId, p.collectionId, (segments, current) =>
    current?.codecVersion === p.codecVersion
      ? null
      : {
          // Every re-compressed batch at once; batches ingested meanwhile keep their own version.
          segments: segments.map((s) => written.get(s.batchId) ?? s),
          codecVersion: p.codecVersion,
          documents: current?.documents,
        },
  );
  // Re-read: the collection record may have changed while the segments were written.
  const latest = (await deps.collections.get(p.tenantId, p.collectionId)) ?? collection;
  if (latest.pending?.codecVersion === p.codecVersion) {
    await deps.collections.update({ ...latest, codec: pending.codec, codecVersion: p.codecVersion, pending: undefined });
  }
  await deps.generations.clearPending(p.tenantId, p.collectionId, p.codecVersion);
  if (result.committed) deps.logger.info(`re-compressed ${p.collectionId} to codec v${p.codecVersion}: generation ${result.manifest.generation}`);
  return { generation: result.manifest.generation, committed: result.committed };
}

/**
 * Document ids per segment key, for the distinct live-document count of a generation. Segments
 * are immutable, so each one is read once per process (the commit being made remembers its own).
 */
export class SegmentIds {
  private readonly ids = new Map<string, string[]>();

  constructor(private readonly load: (tenantId: string, collectionId: string, ref: SegmentRef) => Promise<string[]>) {}

  remember(key: string, docIds: string[]): void {
    this.ids.set(key, docIds);
  }

  /** Distinct document ids over `segments` (an id in several segments counts once). */
  async count(tenantId: string, collectionId: string, segments: SegmentRef[]): Promise<number> {
    await Promise.all(segments.filter((s) => !this.ids.has(s.key)).map(async (s) => this.ids.set(s.key, await this.load(tenantId, collectionId, s))));
    const all = new Set<string>();
    for (const s of segments) for (const id of this.ids.get(s.key)!) all.add(id);
    return all.size;
  }
}
