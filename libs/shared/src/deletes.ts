import { z } from 'zod';
import { assertResourceId as safe, documentId, resourceId } from './ids';

/** Most ids in one batch delete (the not-found ones come back in the answer and the job's return value). */
export const MAX_DELETE_IDS = 10_000;

/**
 * POST /v1/collections/{id}/documents/delete: exactly one of `ids` (document ids; unknown ones are
 * listed as not found) or `filter` (the search filter language: every live document it accepts).
 * The filter is checked by the API with @lateral/search's compileFilter.
 */
export const DeleteDocumentsSchema = z
  .object({
    ids: z.array(documentId('ids[]')).min(1, 'ids must name at least one document').max(MAX_DELETE_IDS, `ids must name at most ${MAX_DELETE_IDS} documents`).optional(),
    filter: z.unknown().optional(),
  })
  .strict()
  .superRefine((b, ctx) => {
    if ((b.ids === undefined) === (b.filter === undefined)) ctx.addIssue({ code: 'custom', path: [], message: 'give exactly one of ids (document ids) or filter (a search filter)' });
  });
export type DeleteDocuments = z.infer<typeof DeleteDocumentsSchema>;

/** A delete on the commit queue: the request (ids or filter) is in S3 under `requestKey`. */
export const DeletePayloadSchema = z.object({
  op: z.literal('delete'),
  tenantId: resourceId('tenantId'),
  collectionId: resourceId('collectionId'),
  deleteId: resourceId('deleteId'),
  requestKey: z.string().min(1).max(1024),
});
export type DeletePayload = z.infer<typeof DeletePayloadSchema>;

/** What a delete did: the generation holding its tombstones (0 and committed false when nothing was live to delete). */
export interface DeleteResult {
  deleteId: string;
  generation: number;
  committed: boolean;
  /** Live documents deleted. */
  deleted: number;
  /** Requested ids that were not live documents (unknown, or already deleted). */
  notFound: string[];
  /** Live documents after the delete. */
  documents: number;
}

export const deleteKeys = {
  request: (tenantId: string, collectionId: string, id: string) => `tenants/${safe('tenant id', tenantId)}/collections/${safe('collection id', collectionId)}/deletes/${safe('delete id', id)}.json`,
  /** BullMQ forbids ':' in custom ids; '~' never appears in resource ids. */
  job: (tenantId: string, collectionId: string, id: string) => `${safe('tenant id', tenantId)}~${safe('collection id', collectionId)}~delete~${safe('delete id', id)}`,
};
