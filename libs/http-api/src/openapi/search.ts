/** Search and re-rank (search.controller.ts, rerank.controller.ts): tags `search` and `rerank`. */
import { z } from 'zod';
import { RerankHitSchema, RerankStatusSchema, SCORER_NAMES, SEARCH_MODES, SearchStatusSchema } from '@lateral/shared';
import { RerankRequestForm, SearchRequestForm } from './request-forms';
import { errorAnswer, errors, json, location, param, type ApiRegistry } from './registry';

/** Requests that show the forms; each one is accepted as written (rules.spec.ts). */
export const SEARCH_EXAMPLES = {
  xtr: { summary: 'XTR over the token IVF', value: { collection: 'papers', queries: [{ id: 'q1', text: 'supersonic wing flutter' }], mode: { name: 'xtr', kPrime: 1000, nprobe: 32 }, topK: 10 } },
  filtered: {
    summary: 'BM25 with a metadata filter',
    value: {
      collection: 'papers',
      queries: [{ id: 'q1', text: 'heat transfer' }],
      mode: 'bm25',
      filter: { must: [{ key: 'year', range: { gte: 1960 } }], must_not: [{ key: 'kind', match: { any: ['draft', 'retracted'] } }] },
    },
  },
  hybrid: { summary: 'hybrid fusion, re-ranked with MaxSim', value: { collection: 'papers', queries: [{ id: 'q1', text: 'shock wave' }], mode: { name: 'hybrid', base: 'xtr', fusion: 'linear', lambda: 0.5, normalization: 'minmax' }, rerank: { scorer: 'maxsim', depth: 100 } } },
};
export const RERANK_EXAMPLES = {
  ids: { summary: 'candidate ids of a collection', value: { collection: 'papers', queries: [{ id: 'q1', text: 'supersonic wing flutter', candidates: ['d1', 'd2', 'd3'] }], topK: 2 } },
  hybrid: { summary: 'first-stage scores fused with MaxSim', value: { collection: 'papers', queries: [{ id: 'q1', text: 'heat transfer', candidates: [{ id: 'd1', score: 12.5 }, { id: 'd2', score: 9.1 }] }], scorer: { name: 'hybrid', lambda: 0.5 } } },
};

export function registerSearch(api: ApiRegistry): void {
  const wait = z.object({ wait: param.wait(api.maxWaitSeconds) });
  const job = z.object({ id: param.id() });
  const searchStatus = api.schema('SearchStatus', SearchStatusSchema);
  const rerankStatus = api.schema('RerankStatus', RerankStatusSchema);
  api.schema('RerankHit', RerankHitSchema);
  const polled = '(completed or failed, or still queued / running when `wait` ran out)';
  const expired: [number, string] = [404, 'unknown job id, or its result expired (kept 24 hours)'];

  api.op('search', 'post', '/v1/search', {
    summary: `Search a whole collection (modes: ${SEARCH_MODES.join(', ')}). Answers 202 with a job id, or 200 with the result when it finishes within \`wait\`.`,
    description:
      "Every committed segment is searched with its own index and the per-segment lists are merged exactly (XTR: per query token top-k' over the token IVF, missing similarities imputed by the global k'-th score; BM25 with global statistics; dense and ME-BERT over pooled vectors; exhaustive MaxSim, the reference). `filter` (Qdrant-like `must` / `should` / `must_not` of `{ key, match: { value } | { any: [...] } | range: { gt, gte, lt, lte } | is_empty | exists }`, nestable) applies before ranking. `rerank` re-scores the top `depth` hits with any re-rank scorer. `explain` returns, per hit and query token, the matched document token and its similarity (xtr, exhaustive). 400 names a bad mode, parameter or filter path; a query of only stop words or punctuation gets empty hits with a `reason`; a collection with no committed generation answers empty hits with `generation: 0`.",
    request: { query: wait, body: { required: true, content: { 'application/json': { schema: api.input(SearchRequestForm), examples: SEARCH_EXAMPLES } } } },
    responses: {
      '200': json('finished within wait', searchStatus),
      '202': { ...json('queued', searchStatus), headers: location('GET /v1/search/{id}') },
      ...errors(400, [404, 'no collection with this id'], 413, 415, 503),
    },
  });
  api.op('search', 'get', '/v1/search/{id}', {
    summary: 'Status and result of a search job',
    request: { params: job, query: wait },
    responses: { '200': json(`status ${polled}`, searchStatus), ...errors(400, expired, 503) },
  });
  api.op('rerank', 'post', '/v1/rerank', {
    summary: `Re-rank candidates of one or more queries (scorers: ${SCORER_NAMES.join(', ')}). Answers 202 with a job id, or 200 with the result when it finishes within \`wait\`.`,
    request: { query: wait, body: { required: true, content: { 'application/json': { schema: api.input(RerankRequestForm), examples: RERANK_EXAMPLES } } } },
    responses: {
      '200': json('finished within wait', rerankStatus),
      '202': { ...json('queued', rerankStatus), headers: location('GET /v1/rerank/{id}') },
      ...errors(400, [404, 'no collection with this id, or no trained head of the artifact named'], 413, 415, 503),
      '409': errorAnswer("`model` is not the collection's model (leave it out, or name the collection's)"),
    },
  });
  api.op('rerank', 'get', '/v1/rerank/{id}', {
    summary: 'Status and result of a re-rank job; missing candidate ids are listed per query',
    request: { params: job, query: wait },
    responses: { '200': json(`status ${polled}`, rerankStatus), ...errors(400, expired, 503) },
  });
}
