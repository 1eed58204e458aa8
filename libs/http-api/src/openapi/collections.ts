/** Collections (collections.controller.ts): create, list, describe, delete, merge, re-compress. Tag `collections`. */
import { z } from 'zod';
import { CodecSettingsSchema, CollectionDescriptionSchema, CollectionListSchema, CollectionSchema, MergePendingSchema, MergeResultSchema, RecompressAcceptedSchema, ReindexAcceptedSchema, ReindexRequestSchema } from '@lateral/shared';
import { CreateCollectionForm, RecompressForm } from './request-forms';
import { errorAnswer, errors, json, param, type ApiRegistry } from './registry';

/** Requests that show the forms; each one is accepted as written (rules.spec.ts). */
export const CREATE_COLLECTION_EXAMPLES = {
  plain: { summary: "the default model and codec (fp16), and the default search layout (WARP, 4 bits)", value: { id: 'papers' } },
  ivf: { summary: "mode xtr over the segment index's IVF alone (no WARP search layout)", value: { id: 'papers-ivf', search: { layout: 'ivf' } } },
  eden: { summary: 'a 4-bit EDEN codec', value: { id: 'papers-eden', codec: { kind: 'eden', bits: 4 } } },
  sharded: { summary: 'two shards, each served through its own queue', value: { id: 'papers-sharded', shards: 2 } },
};
export const REINDEX_EXAMPLES = { warp4: { summary: 'WARP search layouts at 4 bits (the default; an empty object does the same)', value: { search: { layout: 'warp', bits: 4 } } } };
export const RECOMPRESS_EXAMPLES = { int8: { summary: 'int8 codes from the stored raw vectors', value: { codec: { kind: 'int8' } } } };

export function registerCollections(api: ApiRegistry): void {
  const params = z.object({ id: param.id('collection id (400 naming path.id when it does not match)') });
  const query = z.object({ wait: param.wait(api.maxWaitSeconds) });
  const description = api.schema('CollectionDescription', CollectionDescriptionSchema);
  api.schema('CodecSettings', CodecSettingsSchema, 'input');

  api.op('collections', 'get', '/v1/collections', {
    summary: 'List collections (each described as by GET /v1/collections/{id})',
    responses: { '200': json('collections', api.output(CollectionListSchema)), ...errors(503) },
  });
  api.op('collections', 'post', '/v1/collections', {
    summary: 'Create a collection',
    description:
      "400 names the failing field, e.g. `codec.sideInfo` when side information is asked for with a kind other than 'eden' or a model that declares no static input embeddings (manifest `staticEmbeddings`), `codec.poolFactor` outside 1..16, or `codec.poolFactor` above 1 together with `codec.sideInfo` (both fields named); `search.layout` other than 'warp' or 'ivf', `search.bits` other than 2 or 4, or `search.bits` with layout 'ivf'. `search` absent: `{ layout: 'warp', bits: 4 }`.",
    request: { body: { required: true, content: { 'application/json': { schema: api.input(CreateCollectionForm), examples: CREATE_COLLECTION_EXAMPLES } } } },
    responses: { '201': json('created: the stored collection', api.output(CollectionSchema)), ...errors(400, 503), '409': errorAnswer('a collection with this id already exists') },
  });
  api.op('collections', 'get', '/v1/collections/{id}', {
    summary: 'Describe a collection (generation, distinct live documents, tokens, bytes per token, stage counts)',
    description: 'Everything here is read from S3: the current generation is the highest manifest; `stages` sums every ingestion of the collection (see IngestionStatus).',
    request: { params },
    responses: { '200': json('collection', description), ...errors([404, 'no collection with this id'], 503) },
  });
  api.op('collections', 'delete', '/v1/collections/{id}', {
    summary: 'Delete a collection and everything it stores',
    request: { params },
    responses: { '204': { description: 'deleted' }, ...errors([404, 'no collection with this id'], 503) },
  });
  api.op('collections', 'post', '/v1/collections/{id}/merge', {
    summary: 'Merge small segments and drop deleted documents (tiered policy); 200 with what the merge did',
    description:
      "A merge job on the merge queue (one per collection at a time, beside commits and deletes; also asked for after each committed generation with MERGE_AFTER_COMMIT, one pending merge per collection). The tiered policy (MERGE_FACTOR, MERGE_DELETED_FRACTION, MERGE_FLOOR_DOCUMENTS, MERGE_MAX_DOCUMENTS, MERGE_MAX_BYTES) picks the segments on the current generation; their live documents' coded rows, raw vectors and index postings are copied (never re-coded: scores do not change) into one segment with its search index, and only the reference swap is committed, as one generation (deletes and ingests committed meanwhile are carried over). `status`: `merged`, `nothing-to-merge`, `inputs-gone` (the inputs changed before the commit: nothing committed) or `recompressing`. Asking again on the same generation answers the same job. `wait` (default 30 s): longer than that, 202.",
    request: { params, query },
    responses: {
      '200': json('the merge finished', api.output(MergeResultSchema)),
      '202': json('still in the merge queue; ask again (same generation: same job)', api.output(MergePendingSchema)),
      ...errors(400, 404, 503),
    },
  });
  api.op('collections', 'post', '/v1/collections/{id}/reindex', {
    summary: 'Give an IVF collection WARP search layouts (built from the stored codes by a job; searches read the IVF until every layout is committed)',
    description:
      "For a collection created with `search: { layout: 'ivf' }`, or before WARP layouts were the default (its record names no `search`). The request is recorded in the collection (`reindex`) and a job on the merge queue fits a centroid epoch on every segment's tokens (PLAID's rule, or IVF_CENTROIDS) and its residual codec at `bits`, builds each live segment's layout from its codes, commits the segments at that epoch, and only then sets the collection's `search`: until that write mode xtr reads the segment index's IVF, after it WARP's layouts. Segments ingested meanwhile get their layouts from their index jobs. A segment that cannot be read leaves the re-index running (searches stay on the IVF); the next merge job resumes it. 400 names the field (`search.layout` other than 'warp', `search.bits` other than 2 or 4); 409 when the collection already has WARP layouts, is being re-compressed, or is being re-indexed at other bits (the same settings again: 202, the job queued again).",
    request: { params, body: { required: false, content: { 'application/json': { schema: api.input(ReindexRequestSchema), examples: REINDEX_EXAMPLES } } } },
    responses: {
      '202': json('re-index queued: poll the collection (status URL)', api.output(ReindexAcceptedSchema)),
      ...errors(400, 404, 503),
      '409': errorAnswer('not now: the collection already has WARP search layouts, is being re-compressed, or is being re-indexed at other bits'),
    },
  });
  api.op('collections', 'post', '/v1/collections/{id}/recompress', {
    summary: 'Re-compress a collection at new codec settings from its stored raw vectors (no re-encoding); the new generation is committed when every segment is written',
    description:
      "Same codec forms as creation, plus `codec.trained` (a trained AESI codec of this collection: kind 'eden', sideInfo true). 404 when the collection is not there; 409 naming `codec.trained` when the trained codec named is not one of this collection's, and when the settings do not fit the collection's model (`codec.dims` over its dims, side information without its static embedding table) or the trained codec (its code dims), or when a re-compression is running or nothing is committed.",
    request: { params, body: { required: true, content: { 'application/json': { schema: api.input(RecompressForm), examples: RECOMPRESS_EXAMPLES } } } },
    responses: {
      '202': json('re-compression queued: poll the collection (status URL); its codecVersion and codec change when every segment is re-written', api.output(RecompressAcceptedSchema)),
      ...errors(400, 404, 503),
      '409': errorAnswer('not now: a re-compression of this collection is already running (the message names its codec version), or the collection has no committed segments to re-compress'),
    },
  });
}
