import { parentOf, passageId, type Collection, type CollectionManifest, type GroupBy, type HitDocumentFields, type HitField } from '@lateral/shared';
import type { DocumentRepository } from '@lateral/infra';

/** What the hit shaping reads: documents from S3 (only when a request has `include`). */
export interface HitDocumentDeps {
  documents?: Pick<DocumentRepository, 'hitFields' | 'liveSet' | 'pending'>;
}

/** The request fields hit shaping looks at (re-rank and search alike). */
export interface HitShapingRequest {
  topK: number;
  include?: readonly HitField[];
  group?: GroupBy;
}

/** Passages a grouped search looks at per requested hit, so that topK distinct parents are usually found. */
export const GROUP_DEPTH_FACTOR = 8;

interface ShapedHit extends HitDocumentFields {
  id: string;
  score: number;
}

/**
 * How a request's hits are shaped after scoring, decided once per request:
 * - in a collection with passages, a candidate id that is not stored but whose passage `id#0`
 *   is stands for all of its passages (`expandCandidates`);
 * - `group: "parent"` keeps the best-scoring passage of each parent (its id becomes the parent's,
 *   `passage` names it), so processors rank `depth` hits and `finish` cuts to topK;
 * - `include` adds the text and metadata read back from S3 (`DocumentRepository.hitFields`).
 */
export function hitShaping(collection: Pick<Collection, 'passages' | 'tenantId' | 'id'> | null, req: HitShapingRequest, groupedDepth: number) {
  const passages = collection?.passages !== undefined;
  const grouped = req.group === 'parent';
  const parent = (id: string) => (passages ? (parentOf(id) ?? id) : id);
  return {
    /** Hits to rank before grouping and the cut to topK: `groupedDepth` when grouping (re-rank: every candidate; search: topK x GROUP_DEPTH_FACTOR). */
    depth: grouped ? Math.max(req.topK, groupedDepth) : req.topK,

    /**
     * In a collection with passages: a candidate id that is not stored but whose passage `id#0`
     * is stands for all of its passages (replaced in place, before the candidates are resolved).
     */
    async expand(deps: HitDocumentDeps, manifest: CollectionManifest | null, queries: { candidates: unknown[] }[]): Promise<void> {
      if (!passages || !manifest) return;
      if (!deps.documents) throw new Error('a collection with passages needs the document repository to resolve parent candidates');
      const live = await deps.documents.liveSet(manifest);
      for (const q of queries) q.candidates = expandCandidates(q.candidates, (id) => live.has(id));
    },

    /**
     * Groups (when asked), cuts to topK and adds the included fields, in place; re-rank results'
     * `missing` ids that an ingestion still in progress accepted are also listed in `pending`.
     */
    async finish<H extends ShapedHit>(deps: HitDocumentDeps, manifest: CollectionManifest | null, results: { hits: H[]; missing?: string[]; pending?: string[] }[]): Promise<void> {
      const missing = [...new Set(results.flatMap((r) => r.missing ?? []))];
      if (missing.length > 0 && collection && deps.documents) {
        const accepted = await deps.documents.pending(collection.tenantId, collection.id, manifest, missing);
        for (const r of results) {
          const p = (r.missing ?? []).filter((id) => accepted.has(id));
          if (p.length > 0) r.pending = p;
        }
      }
      for (const r of results) {
        if (grouped) {
          const seen = new Set<string>();
          const out: H[] = [];
          for (const h of r.hits) {
            const p = parent(h.id);
            if (seen.has(p)) continue;
            seen.add(p);
            out.push(p === h.id ? h : { ...h, id: p, passage: h.id });
          }
          r.hits = out;
        } else if (passages) {
          r.hits = r.hits.map((h) => {
            const p = parentOf(h.id);
            return p === null ? h : { ...h, parent: p };
          });
        }
        if (r.hits.length > req.topK) r.hits = r.hits.slice(0, req.topK);
      }
      const include = req.include ?? [];
      if (include.length === 0 || !manifest) return;
      if (!deps.documents) throw new Error('hit documents were asked for but this worker has no document repository');
      const ids = results.flatMap((r) => r.hits.map((h) => h.passage ?? h.id));
      const fields = await deps.documents.hitFields(manifest, ids, include);
      for (const r of results) {
        r.hits = r.hits.map((h) => {
          const f = fields.get(h.passage ?? h.id);
          if (!f) return h;
          // a grouped hit is its parent: the passage's text, no `parent` pointer to itself
          const { parent: p, ...rest } = f;
          return { ...h, ...rest, ...(p !== undefined && h.passage === undefined ? { parent: p } : {}) };
        });
      }
    },
  };
}

/** Candidates (ids, `{ id, score }`; others are kept as they are) with each parent id not stored replaced by its stored passages. */
export function expandCandidates<C>(candidates: C[], has: (id: string) => boolean): C[] {
  return candidates.flatMap((c) => {
    const o = c as unknown as { id?: unknown; text?: unknown } | string;
    const id = typeof o === 'string' ? o : o && typeof o === 'object' && o.text === undefined && typeof o.id === 'string' ? o.id : undefined;
    if (id === undefined || has(id) || !has(passageId(id, 0))) return [c];
    const out: C[] = [];
    for (let n = 0; has(passageId(id, n)); n++) out.push((typeof c === 'string' ? passageId(id, n) : { ...(c as object), id: passageId(id, n) }) as C);
    return out;
  });
}
