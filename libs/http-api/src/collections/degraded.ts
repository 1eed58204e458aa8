import { currentDegradedSegments, degradedRecordKey, type CollectionManifest, type DegradedRecord, type DegradedSegment } from '@lateral/shared';
import type { ObjectStore } from '@lateral/infra';

/**
 * The segments of the collection's current generation that scorers found unreadable (the
 * collection's degraded.json, written by DegradedSegmentsRecorder), or null when there are none.
 * Entries for segments no longer in the generation (merged or re-compressed away) are not shown.
 */
export async function degradedOf(deps: { store: Pick<ObjectStore, 'getJson'> }, tenant: string, id: string, manifest: Pick<CollectionManifest, 'generation' | 'segments'> | null): Promise<{ generation: number; segments: DegradedSegment[] } | null> {
  if (!manifest) return null;
  const record = await deps.store.getJson<DegradedRecord>(degradedRecordKey(tenant, id));
  const segments = currentDegradedSegments(record, manifest.segments);
  return segments.length > 0 ? { generation: manifest.generation, segments } : null;
}
