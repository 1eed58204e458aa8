import { PermanentJobError, QueueName, redisKeys, type JobPayload, type JobResults, type SegmentRef } from '@lateral/shared';
import { crc32c, readSegment } from '@lateral/codec';
import type { PipelineContext } from './context';

/**
 * Commits a written segment to the collection's manifest as a new generation. Re-running it for
 * the same batch replaces that batch's entry, so a retried job never lists a segment twice.
 * Segments of a re-compression are only recorded; the last one commits them all at once, so a
 * collection is never scored with half of its segments at one codec and half at another.
 */
export async function indexProcessor(ctx: PipelineContext, p: JobPayload<QueueName.index>): Promise<JobResults[QueueName.index]> {
  const collection = await ctx.collections.get(p.tenantId, p.collectionId);
  if (!collection) throw new PermanentJobError(`collection ${p.tenantId}/${p.collectionId} no longer exists`);
  const bytes = await ctx.store.get(p.segmentKey);
  if (!bytes) throw new PermanentJobError(`segment missing from S3: ${p.segmentKey}`);
  // Verifies every section's checksum before the segment becomes visible to readers.
  const seg = readSegment(bytes, p.segmentKey, await ctx.codecs.get(p.tenantId, p.collectionId, p.codecVersion));
  const ref: SegmentRef = {
    batchId: p.batchId,
    codecVersion: p.codecVersion,
    key: p.segmentKey,
    documents: seg.documents,
    tokens: seg.tokens,
    bytes: bytes.byteLength,
    checksum: crc32c(bytes).toString(16).padStart(8, '0'),
  };

  const pending = collection.pending;
  if (pending && pending.codecVersion === p.codecVersion) {
    const key = redisKeys.recompress(ctx.config.REDIS_PREFIX, p.tenantId, p.collectionId, p.codecVersion);
    await ctx.redis.hset(key, p.batchId, JSON.stringify(ref));
    const written = await ctx.redis.hgetall(key);
    if (!pending.batches.every((b) => written[b])) return { generation: await ctx.collections.currentGeneration(p.tenantId, p.collectionId) };
    // Under the manifest lock; two last jobs can both see the set complete, the second finds the
    // commit already made and changes nothing.
    const manifest = await ctx.collections.commit(p.tenantId, p.collectionId, (segments, codecVersion) =>
      codecVersion === p.codecVersion
        ? null
        : {
            // Every re-compressed batch at once; batches ingested meanwhile keep their own version.
            segments: segments.map((s) => (written[s.batchId] ? (JSON.parse(written[s.batchId]) as SegmentRef) : s)),
            codecVersion: p.codecVersion,
          },
    );
    // Re-read: the collection record may have changed while the segments were written.
    const latest = (await ctx.collections.get(p.tenantId, p.collectionId)) ?? collection;
    if (latest.pending?.codecVersion === p.codecVersion) {
      await ctx.collections.update({ ...latest, codec: pending.codec, codecVersion: p.codecVersion, pending: undefined });
    }
    await ctx.redis.del(key);
    ctx.logger.info(`re-compressed ${p.collectionId} to codec v${p.codecVersion}: generation ${manifest.generation}`);
    return { generation: manifest.generation };
  }

  const manifest = await ctx.collections.commit(p.tenantId, p.collectionId, (segments, codecVersion) => {
    const i = segments.findIndex((s) => s.batchId === p.batchId);
    if (i >= 0) segments[i] = ref;
    else segments.push(ref);
    return { segments, codecVersion };
  });
  await ctx.collections.count(p.tenantId, p.collectionId, p.ingestionId, 'indexed', p.documents);
  return { generation: manifest.generation };
}
