import path from 'node:path';
import { expect } from 'vitest';
import type { WarpSearchStats } from '@lateral/shared';
import type { Server } from '../apps/all-in-one/src/server';
import { loadCranfield } from '../scripts/lib/cranfield';
import { http, until } from './helpers';

/** A completed search's result, as the WARP specs read it. */
export type WarpSpecResult = {
  generation: number;
  results: { queryId: string; hits: { id: string; score: number; scoredBy: string; explain?: unknown[] }[]; reason?: string }[];
  stats?: { warp?: WarpSearchStats };
  timings: { searchMs: number };
  degraded?: true;
  unavailableSegments?: { key: string; object: string; segment: string; reason: string; documents: number }[];
};

/**
 * What the WARP integration specs (warp-search, warp-routing) share: the same 300 Cranfield
 * documents (each with a `year` from its position), the first 10 queries, and the calls on the
 * all-in-one server `server()` returns (started in the spec's beforeAll): ingest and wait until the
 * ingestion is done, search and wait until completed (`wait=240`: exact XTR and exhaustive searches
 * take over a minute on a loaded machine; the spec's RERANK_MAX_WAIT_SECONDS must allow it), and the
 * top-k overlap of two results.
 */
export function warpBed(server: () => Server) {
  const cran = loadCranfield(path.resolve('data/cranfield'));
  const docs = cran.docs.filter((d) => d.text.length > 0).slice(0, 300);
  const yearOf = (i: number) => 1950 + (i % 10);
  const items = docs.map((d, i) => ({ id: d.id, text: d.text, metadata: { year: yearOf(i) } }));
  const queries = cran.queries.slice(0, 10).map((q) => ({ id: q.id, text: q.text }));
  const api = (method: string, url: string, body?: unknown) => http(server().url, method, url, body);
  const ingest = async (collectionId: string, batch: { id: string; text: string }[]) => {
    const ing = await api('POST', `/v1/collections/${collectionId}/documents`, batch);
    expect(ing.status, JSON.stringify(ing.body)).toBe(202);
    await until(async () => (await api('GET', ing.body.status)).body.state === 'done', 180_000);
  };
  const search = async (collectionId: string, body: Record<string, unknown>): Promise<WarpSpecResult> => {
    const r = await api('POST', '/v1/search?wait=240', { collection: collectionId, queries, ...body });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body.status, JSON.stringify(r.body)).toBe('completed');
    return r.body.result as WarpSpecResult;
  };
  /** Share of `a`'s hits, over all queries, that `b` also returns for the same query. */
  const overlap = (a: WarpSpecResult, b: WarpSpecResult) =>
    a.results.reduce((s, r, qi) => s + r.hits.filter((h) => b.results[qi].hits.some((x) => x.id === h.id)).length, 0) / a.results.reduce((s, r) => s + r.hits.length, 0);
  return { docs, yearOf, items, queries, api, ingest, search, overlap };
}
