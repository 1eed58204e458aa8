import type { Collection, CollectionManifest, SegmentRef, UnavailableSegment } from '@lateral/shared';
import { extendGenerationTable, generationTable, generationTableBytes, segmentIdTable, type GenerationTable, type SegmentIdTable } from './id-table';
import { SegmentUnavailableError } from './search-plan';
import { stringBytes, type GenTable, type SegmentStore } from './segment-store';

/** A generation's sorted table of live ids, built from its segments' id tables, and the segments of a request that could not be read. */

/**
 * The unavailable segments of a request (those it needed that failed, and those whose ids are
 * not known, which any candidate may live in), with their live documents; tells the health
 * listener of each object once.
 */
export function unavailableOf(store: SegmentStore, collection: Pick<Collection, 'tenantId' | 'id'>, manifest: CollectionManifest, table: GenTable, failed: [number, SegmentUnavailableError][]): UnavailableSegment[] {
  const bySeg = new Map(failed);
  for (const s of table.unknown ?? []) {
    if (bySeg.has(s)) continue;
    const key = manifest.segments[s].key;
    const b = store.bad.get(key);
    bySeg.set(s, new SegmentUnavailableError(key, 'segment', key, b?.reason ?? `segment ${key} could not be read`));
  }
  const out = [...bySeg.entries()]
    .sort((a, b) => a[0] - b[0])
    .map(([s, err]): UnavailableSegment => {
      const ref = manifest.segments[s];
      const live = table.live[s];
      const documents = table.unknown?.includes(s) ? Math.max(0, ref.documents - (ref.tombstones?.length ?? 0)) : live ? live.reduce((n, x) => n + x, 0) : ref.documents;
      return { key: err.key, object: err.object, segment: ref.key, reason: err.reason, documents };
    });
  for (const u of out) {
    const b = store.bad.get(u.key);
    if (!b || b.reported) continue;
    b.reported = true;
    store.opts.health?.unavailable({ ...u, tenantId: collection.tenantId, collectionId: collection.id, generation: manifest.generation });
  }
  return out;
}

/** The generation's sorted table of live ids (built from the segments' id tables, kept per generation). */
export async function liveTable(store: SegmentStore, collection: Pick<Collection, 'tenantId' | 'id' | 'model'>, manifest: CollectionManifest): Promise<GenTable> {
  const key = tableKey(manifest);
  const coll = `${manifest.tenantId}/${manifest.collectionId}`;
  const table = (await store.lru.get(key, async () => {
    let unknown: number[] = [];
    // A generation that appends segments to (or adds tombstones to) the last one built extends
    // its table with one linear merge; anything else is built from every segment's id table.
    const last = store.lastTable.get(coll);
    const prev = last ? (store.lru.peek(last.key) as GenerationTable | undefined) : undefined;
    let value: GenerationTable | null = null;
    if (last && prev && last.segments.length <= manifest.segments.length && last.segments.every((s, i) => s.key === manifest.segments[i].key)) {
      const added = await Promise.all(manifest.segments.slice(last.segments.length).map((ref) => idTable(store, collection, ref)));
      if (added.every((t) => t !== null)) value = extendGenerationTable(prev, last.segments, manifest.segments, added as SegmentIdTable[]);
    }
    if (!value) {
      const tables = await Promise.all(manifest.segments.map((ref) => idTable(store, collection, ref)));
      // A segment whose ids cannot be known holds none here; the table is not kept (built again, and the segment read again, next time).
      unknown = tables.flatMap((t, i) => (t === null ? [i] : []));
      value = generationTable(manifest.segments, tables.map((t) => t ?? { ids: [], doc: new Uint32Array(0) }));
    }
    if (unknown.length === 0) store.lastTable.set(coll, { key, segments: manifest.segments });
    const out: GenTable = unknown.length > 0 ? { ...value, unknown } : value;
    return { value: out, bytes: generationTableBytes(value) };
  })) as GenTable;
  if (table.unknown) store.lru.delete(key);
  return table;
}

/** The segment's sorted id table: from the segment, or (unreadable) from `segmentIds`; null when neither can tell. */
export async function idTable(store: SegmentStore, collection: Pick<Collection, 'tenantId' | 'id' | 'model'>, ref: SegmentRef): Promise<SegmentIdTable | null> {
  try {
    return (await store.lru.get(`ids:${ref.key}`, async () => {
      let docIds: readonly string[];
      try {
        // Reading ranges, a segment's ids come with its head: building a generation's table does not load every segment's codes.
        docIds = await store.docIdsOf(collection, ref, !!store.opts.rangeReads && !!store.source.readRanges);
      } catch (err) {
        if (!(err instanceof SegmentUnavailableError)) throw err;
        const ids = (await store.opts.segmentIds?.(collection.tenantId, collection.id, ref).catch(() => null)) ?? null;
        if (!ids || ids.length !== ref.documents) throw err;
        docIds = ids;
      }
      const value = segmentIdTable(docIds);
      return { value, bytes: value.ids.length * 12 + stringBytes(value.ids) };
    })) as SegmentIdTable;
  } catch (err) {
    if (err instanceof SegmentUnavailableError) return null;
    throw err;
  }
}

/** The memory cache's key of a generation's id table. */
export function tableKey(manifest: CollectionManifest): string {
  return `gen:${manifest.tenantId}/${manifest.collectionId}/${manifest.generation}/${manifest.committedAt}`;
}
