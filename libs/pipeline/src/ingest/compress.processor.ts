import { PermanentJobError, QueueName, s3Keys, type JobPayload, type JobResults } from '@lateral/shared';
import { SegmentCorruptError, readSegment } from '@lateral/codec';
import type { CollectionRepository, JobQueues, ObjectStore } from '@lateral/infra';
import { enqueueNext } from '../pipeline';
import { compressRaw, type SegmentWriterDeps } from './segment-writer';

/** What the compress processor touches. */
export interface CompressDeps extends SegmentWriterDeps {
  store: Pick<ObjectStore, 'get' | 'put'>;
  collections: Pick<CollectionRepository, 'get'>;
  queues: Pick<JobQueues, 'add'>;
}

/**
 * Turns a batch's raw fp16 vectors into an immutable segment with the collection's codec.
 * The segment key carries the codec version, so a re-compression never overwrites a live segment.
 */
export async function compressProcessor(deps: CompressDeps, p: JobPayload<QueueName.compress>): Promise<JobResults[QueueName.compress]> {
  const collection = await deps.collections.get(p.tenantId, p.collectionId);
  if (!collection) throw new PermanentJobError(`collection ${p.tenantId}/${p.collectionId} no longer exists`);
  const bytes = await deps.store.get(p.rawKey);
  if (!bytes) throw new PermanentJobError(`raw vectors are missing from S3: ${p.rawKey}`);
  let raw;
  try {
    raw = readSegment(bytes, p.rawKey);
  } catch (err) {
    if (err instanceof SegmentCorruptError) throw new PermanentJobError(err.message);
    throw err;
  }
  const segment = await compressRaw(deps, collection, raw, p.codecVersion, p.rawKey);
  const segmentKey = s3Keys.segment(p.tenantId, p.collectionId, p.batchId, p.codecVersion);
  await deps.store.put(segmentKey, segment);
  const result = { segmentKey, bytes: segment.byteLength };
  await enqueueNext(deps.queues, QueueName.compress, p, result);
  return result;
}
