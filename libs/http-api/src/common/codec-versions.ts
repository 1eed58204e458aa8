import type { Collection } from '@lateral/shared';

/** Codec versions whose segments count as compressed: every version up to a re-compression in flight. */
export function codecVersions(collection: Pick<Collection, 'codecVersion' | 'pending'>): number[] {
  const top = Math.max(collection.codecVersion, collection.pending?.codecVersion ?? 0);
  return Array.from({ length: top }, (_, i) => i + 1);
}
