import { z } from 'zod';
import { s3Keys } from './keys';
import type { SegmentRef } from './collection';

/**
 * A segment of a generation that a scorer could not read: its object (the segment, or its search
 * index) failed its checksum or decoding, or is missing from S3. Re-rank and search answer from
 * the other segments and name it (`degraded: true`, `unavailableSegments`); the collection's
 * record of such segments (`degraded.json`, below) is what GET /v1/collections/{id} and the
 * operations overview show.
 */
export const UnavailableSegmentSchema = z.object({
  key: z.string().describe('the S3 key of the object that failed (the segment, or its search index)'),
  object: z.enum(['segment', 'index']).describe('which object failed: the segment itself or its search index'),
  segment: z.string().describe("the segment's S3 key (equal to key when object is segment)"),
  reason: z.string().describe('why: the checksum or decoding error naming the section, or that the object is missing'),
  documents: z.number().int().min(0).describe('live documents of the generation held by that segment (not served while it is unavailable)'),
});
export type UnavailableSegment = z.infer<typeof UnavailableSegmentSchema>;

/** An entry of a collection's degraded record: an unavailable segment, when and in which generation it was first seen. */
export const DegradedSegmentSchema = UnavailableSegmentSchema.extend({
  generation: z.number().int().min(0).describe('the generation being served when it was detected'),
  detectedAt: z.string().describe('when a scorer first failed to read it (ISO 8601)'),
});
export type DegradedSegment = z.infer<typeof DegradedSegmentSchema>;

/** `tenants/{t}/collections/{c}/degraded.json`: written by scorers, read by the API. */
export interface DegradedRecord {
  tenantId: string;
  collectionId: string;
  updatedAt: string;
  segments: DegradedSegment[];
}

export const degradedRecordKey = (tenantId: string, collectionId: string) => `${s3Keys.collectionPrefix(tenantId, collectionId)}degraded.json`;

/**
 * The record's entries that concern `segments` (the current generation's) and still hold live
 * documents: segments merged or rewritten away, or whose documents were all replaced or deleted
 * since, no longer degrade anything.
 */
export function currentDegradedSegments(record: DegradedRecord | null, segments: readonly Pick<SegmentRef, 'key' | 'documents' | 'tombstones'>[]): DegradedSegment[] {
  if (!record) return [];
  const live = new Set(segments.filter((s) => s.documents - (s.tombstones?.length ?? 0) > 0).map((s) => s.key));
  return record.segments.filter((s) => live.has(s.segment));
}
