import { z } from 'zod';
import { s3Keys } from './keys';

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

export const degradedRecordKey = (t: string, c: string) => `${s3Keys.collectionPrefix(t, c)}degraded.json`;

/** The record's entries that concern `segmentKeys` (the current generation's segments): older ones were merged or rewritten away. */
export function currentDegradedSegments(record: DegradedRecord | null, segmentKeys: Iterable<string>): DegradedSegment[] {
  if (!record) return [];
  const keys = new Set(segmentKeys);
  return record.segments.filter((s) => keys.has(s.segment));
}
