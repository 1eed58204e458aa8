import { DeleteDocumentsSchema, PermanentJobError, type DeletePayload, type DeleteResult, type SegmentRef } from '@lateral/shared';
import type { DocPredicate } from '@lateral/search';
import type { CollectionRepository, GenerationRepository, Logger, ObjectStore } from '@lateral/infra';
import type { SegmentIds } from '../segment-ids';
import { storedFilterPredicate } from '../stored-filter';
import type { CommitOutcome } from './merge-schedule';

/** A segment's documents as a filter delete reads them. */
export interface SegmentDocs {
  docIds: readonly string[];
  metadata(i: number): Record<string, unknown> | null;
}

/** What the delete processor touches. */
export interface DeleteDeps {
  store: Pick<ObjectStore, 'getJson'>;
  collections: Pick<CollectionRepository, 'get'>;
  generations: Pick<GenerationRepository, 'manifest' | 'commit'>;
  liveIds: Pick<SegmentIds, 'docIds' | 'live'>;
  /** For deletes by filter: a segment's ids and metadata. */
  segmentDocs: (tenantId: string, collectionId: string, ref: SegmentRef) => Promise<SegmentDocs>;
  logger: Logger;
}

/**
 * A delete, on the commit queue: commits the next generation with the deleted documents'
 * tombstones in its manifest (per segment, the indexes of the deleted documents), so S3 alone
 * says what is live. By ids, the live copy of each id is tombstoned (with any older copy), and
 * ids that are not live are listed as not found; by filter, every live document the filter
 * accepts. The tombstones are computed on the newest generation inside the conditional commit,
 * so a delete and an ingest commit are applied one after the other whatever their order: the one
 * committed later wins (an ingest committed after a delete makes the id live again).
 * Nothing live to delete: no generation is written.
 */
export async function deleteProcessor(deps: DeleteDeps, p: DeletePayload): Promise<DeleteResult> {
  return (await deleteDocuments(deps, p)).result;
}

/** deleteProcessor, with the record and the manifest committed (for the maintenance the worker schedules next: no second read). */
export async function deleteDocuments(deps: DeleteDeps, p: DeletePayload): Promise<CommitOutcome<DeleteResult>> {
  const collection = await deps.collections.get(p.tenantId, p.collectionId);
  if (!collection) throw new PermanentJobError(`collection ${p.tenantId}/${p.collectionId} no longer exists`);
  const raw = await deps.store.getJson<unknown>(p.requestKey);
  if (!raw) throw new PermanentJobError(`delete request missing from S3: ${p.requestKey}`);
  const parsed = DeleteDocumentsSchema.safeParse(raw);
  if (!parsed.success) throw new PermanentJobError(`invalid stored delete request ${p.requestKey}: ${parsed.error.message}`);
  const predicate = storedFilterPredicate(parsed.data.filter);
  const ids = parsed.data.ids ? [...new Set(parsed.data.ids)] : null;
  const manifest = await deps.generations.manifest(p.tenantId, p.collectionId);
  if (!manifest) return { result: { deleteId: p.deleteId, generation: 0, committed: false, deleted: 0, notFound: ids ?? [], documents: 0 }, committed: null };

  let outcome = { deleted: 0, notFound: [] as string[] };
  const result = await deps.generations.commit(p.tenantId, p.collectionId, async (segments, current) => {
    const marks = ids ? await byIds(deps, p, segments, ids) : await byFilter(deps, p, segments, predicate!);
    outcome = { deleted: marks.deleted, notFound: marks.notFound };
    if (marks.deleted === 0) return null;
    const marked = segments.map((s, i) => {
      const add = marks.tombstones.get(i);
      return add ? { ...s, tombstones: [...new Set([...(s.tombstones ?? []), ...add])].sort((a, b) => a - b) } : s;
    });
    const live = await deps.liveIds.live(p.tenantId, p.collectionId, marked);
    return { segments: live.segments, codecVersion: current?.codecVersion ?? collection.codecVersion, documents: live.documents };
  });
  if (result.committed) deps.logger.info(`deleted ${outcome.deleted} documents of ${p.collectionId}: generation ${result.manifest.generation}`);
  return {
    result: {
      deleteId: p.deleteId,
      generation: result.manifest.generation,
      committed: result.committed,
      deleted: outcome.deleted,
      notFound: outcome.notFound,
      documents: result.manifest.documents ?? 0,
    },
    committed: result.committed ? { collection, manifest: result.manifest } : null,
  };
}

interface Marks {
  /** segment position -> document indexes to tombstone */
  tombstones: Map<number, number[]>;
  deleted: number;
  notFound: string[];
}

const mark = (m: Map<number, number[]>, s: number, i: number) => (m.get(s) ?? m.set(s, []).get(s)!).push(i);

/** Every copy of the requested ids; an id whose last copy is live is deleted, the others are not found. */
async function byIds(deps: DeleteDeps, p: DeletePayload, segments: SegmentRef[], ids: string[]): Promise<Marks> {
  const wanted = new Set(ids);
  const seen = new Set<string>();
  const deletedIds = new Set<string>();
  const tombstones = new Map<number, number[]>();
  for (let s = segments.length - 1; s >= 0; s--) {
    const docIds = await deps.liveIds.docIds(p.tenantId, p.collectionId, segments[s]);
    const dead = new Set(segments[s].tombstones ?? []);
    for (let i = docIds.length - 1; i >= 0; i--) {
      const id = docIds[i];
      if (!wanted.has(id) || dead.has(i)) {
        if (wanted.has(id)) seen.add(id);
        continue;
      }
      if (!seen.has(id)) deletedIds.add(id); // its last copy, live
      seen.add(id);
      mark(tombstones, s, i);
    }
  }
  return { tombstones, deleted: deletedIds.size, notFound: ids.filter((id) => !deletedIds.has(id)) };
}

/** Every live document (the last copy of its id, not tombstoned) that the filter accepts. */
async function byFilter(deps: DeleteDeps, p: DeletePayload, segments: SegmentRef[], predicate: DocPredicate): Promise<Marks> {
  const seen = new Set<string>();
  const tombstones = new Map<number, number[]>();
  let deleted = 0;
  for (let s = segments.length - 1; s >= 0; s--) {
    const docs = await deps.segmentDocs(p.tenantId, p.collectionId, segments[s]);
    const dead = new Set(segments[s].tombstones ?? []);
    for (let i = docs.docIds.length - 1; i >= 0; i--) {
      const id = docs.docIds[i];
      if (seen.has(id)) continue; // an older copy: tombstoned by the live-set pass
      seen.add(id);
      if (dead.has(i) || !predicate(docs.metadata(i), id)) continue;
      mark(tombstones, s, i);
      deleted++;
    }
  }
  return { tombstones, deleted, notFound: [] };
}
