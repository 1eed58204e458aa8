import { PermanentJobError, QueueName, type JobPayload, type JobResults } from '@lateral/shared';
import { crc32c, readSegment } from '@lateral/codec';
import type { PipelineContext } from './context';

/**
 * Commits a written segment to the collection's manifest as a new generation. Re-running it for
 * the same batch replaces that batch's entry, so a retried job never lists a segment twice.
 */
export async function indexProcessor(ctx: PipelineContext, p: JobPayload<QueueName.index>): Promise<JobResults[QueueName.index]> {
  const collection = await ctx.collections.get(p.tenantId, p.collectionId);
  if (!collection) throw new PermanentJobError(`collection ${p.tenantId}/${p.collectionId} no longer exists`);
  const bytes = await ctx.store.get(p.segmentKey);
  if (!bytes) throw new PermanentJobError(`segment missing from S3: ${p.segmentKey}`);
  // Verifies every section's checksum before the segment becomes visible to readers.
  const seg = readSegment(bytes, p.segmentKey);
  const ref = {
    batchId: p.batchId,
    key: p.segmentKey,
    documents: seg.documents,
    tokens: seg.tokens,
    bytes: bytes.byteLength,
    checksum: crc32c(bytes).toString(16).padStart(8, '0'),
  };
  const manifest = await ctx.collections.commit(p.tenantId, p.collectionId, (segments, codecVersion) => {
    if (p.codecVersion !== codecVersion) {
      // A segment of another codec version belongs to a re-compression in flight; it is committed by that run.
      return { segments, codecVersion };
    }
    const i = segments.findIndex((s) => s.batchId === p.batchId);
    if (i >= 0) segments[i] = ref;
    else segments.push(ref);
    return { segments, codecVersion };
  });
  await ctx.collections.count(p.tenantId, p.collectionId, p.ingestionId, 'indexed', p.documents);
  return { generation: manifest.generation };
}
