import type { UnavailableSegment } from '@lateral/shared';
import type { CollectionView } from './collection-view';

/**
 * A query's candidates that were not scored, split in two: `unavailable`, live in the generation
 * but held by a segment that cannot be read (named by the view), and `missing`, the others (not
 * live documents). `unavailable` is present only when there are some.
 */
export function splitUnavailable(missing: string[], view: Pick<CollectionView, 'unavailableIds'> | null | undefined): { missing: string[]; unavailable?: string[] } {
  const bad = view?.unavailableIds;
  if (!bad || bad.length === 0) return { missing };
  const set = new Set(bad);
  const unavailable = missing.filter((id) => set.has(id));
  return unavailable.length === 0 ? { missing } : { missing: missing.filter((id) => !set.has(id)), unavailable };
}

/** `degraded: true` and the unavailable segments, for a result computed without some segments; nothing when there are none. */
export function degradedFields(unavailable: UnavailableSegment[] | undefined): { degraded?: true; unavailableSegments?: UnavailableSegment[] } {
  return unavailable && unavailable.length > 0 ? { degraded: true, unavailableSegments: unavailable } : {};
}
