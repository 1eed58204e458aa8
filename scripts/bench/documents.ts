/**
 * `npm run bench -- documents [--json] [--docs N] [--rounds N]`
 *
 * Reading documents back, through the HTTP API on Cranfield (default 1,400 documents), as ratios
 * measured in the same run:
 * - GET /v1/collections/{id}/documents/{docId}, warm (p50 over 200 ids), against GET
 *   /v1/collections/{id} (describe: also S3 reads and a manifest), and the first, cold call
 *   (it builds the generation's id index from every batch's info.json) against a warm one;
 * - the whole id listing in pages of 1,000 against one describe;
 * - `include: ["text", "metadata"]` on a re-rank (25 queries x 100 candidates, topK 10) and on a
 *   bm25 search (25 queries, topK 10): median time with include / without, alternated.
 */
import path from 'node:path';
import { loadConfig } from '@lateral/shared';
import { startServer } from '../../apps/all-in-one/src/server';
import { loadCranfield, withPlaceholders } from '../lib/cranfield';
import { CliUsageError, intFlag, parseCliOrExit } from '../lib/cli';
import { fetchRetrying, ingest, recreateCollection } from '../lib/client';

const USAGE = `usage: npm run bench -- documents [--docs N (all of Cranfield)] [--rounds N (5, at most 50)] [--json]`;

const median = (xs: number[]) => {
  const v = [...xs].sort((a, b) => a - b);
  return v.length % 2 ? v[(v.length - 1) / 2] : (v[v.length / 2 - 1] + v[v.length / 2]) / 2;
};
const round = (x: number, d = 3) => Math.round(x * 10 ** d) / 10 ** d;

export async function runDocumentsBench(args: string[]): Promise<Record<string, unknown>> {
  const { limit, rounds, json } = parseCliOrExit('bench documents', USAGE, args, { docs: { type: 'string' }, rounds: { type: 'string', default: '5' }, json: { type: 'boolean' } }, {}, ({ values: v }) => {
    const rounds = intFlag('rounds', v.rounds);
    if (rounds > 50) throw new CliUsageError('--rounds: an integer from 1 to 50');
    return { limit: v.docs === undefined ? undefined : intFlag('docs', v.docs), rounds, json: v.json === true };
  });
  const config = loadConfig({ ...process.env, PORT: '0', LOG_LEVEL: 'warn', DATA_DIR: process.env.DATA_DIR ?? '.data/bench' });
  const cran = loadCranfield(path.resolve('data/cranfield'));
  const docs = withPlaceholders(cran.docs.slice(0, limit));
  const server = await startServer(config, { quiet: true });
  const base = server.url;
  const time = async (f: () => Promise<Response>) => {
    const t0 = performance.now();
    const r = await f();
    await r.arrayBuffer();
    if (!r.ok) throw new Error(`HTTP ${r.status}`);
    return performance.now() - t0;
  };
  const post = (url: string, body: unknown) => fetchRetrying(base + url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  try {
    const c = 'bench-documents';
    await recreateCollection(base, c, config.DEFAULT_MODEL);
    await ingest(base, c, docs, { label: 'ingest', progress: !json });
    const ids = docs.map((d) => d.id);
    const pick = Array.from({ length: 200 }, (_, i) => ids[(i * 7919) % ids.length]);
    const describe = () => time(() => fetchRetrying(`${base}/v1/collections/${c}`));
    const getDoc = (id: string) => time(() => fetchRetrying(`${base}/v1/collections/${c}/documents/${encodeURIComponent(id)}`));

    const coldMs = await getDoc(pick[0]);
    const docMs: number[] = [];
    const describeMs: number[] = [];
    for (const id of pick) {
      docMs.push(await getDoc(id));
      describeMs.push(await describe());
    }
    const listMs: number[] = [];
    for (let r = 0; r < rounds; r++) {
      const t0 = performance.now();
      let cursor: string | undefined;
      let n = 0;
      do {
        const page = (await (await fetchRetrying(`${base}/v1/collections/${c}/documents?limit=1000${cursor ? `&cursor=${cursor}` : ''}`)).json()) as { documents: string[]; nextCursor?: string };
        n += page.documents.length;
        cursor = page.nextCursor;
      } while (cursor);
      if (n !== new Set(ids).size) throw new Error(`listing returned ${n} ids, expected ${new Set(ids).size}`);
      listMs.push(performance.now() - t0);
    }

    const queries = cran.queries.slice(0, 25);
    const rerankBody = (include?: string[]) => ({
      collection: c,
      topK: 10,
      ...(include ? { include } : {}),
      queries: queries.map((q, i) => ({ id: q.id, text: q.text, candidates: Array.from({ length: 100 }, (_, k) => ids[(i * 100 + k * 13) % ids.length]) })),
    });
    const searchBody = (include?: string[]) => ({ collection: c, mode: 'bm25', topK: 10, ...(include ? { include } : {}), queries: queries.map((q) => ({ id: q.id, text: q.text })) });
    const alternate = async (url: string, body: (include?: string[]) => unknown) => {
      await time(() => post(url, body(['text', 'metadata']))); // warm-up: loads the generation, the index and the batches
      await time(() => post(url, body()));
      const without: number[] = [];
      const withInclude: number[] = [];
      for (let r = 0; r < rounds; r++) {
        without.push(await time(() => post(url, body())));
        withInclude.push(await time(() => post(url, body(['text', 'metadata']))));
      }
      return { withoutMs: round(median(without), 1), withIncludeMs: round(median(withInclude), 1), ratio: round(median(withInclude) / median(without)) };
    };
    const rerankInclude = await alternate('/v1/rerank?wait=60', rerankBody);
    const searchInclude = await alternate('/v1/search?wait=60', searchBody);

    const result = {
      documents: docs.length,
      model: config.DEFAULT_MODEL,
      getDocument: { warmP50Ms: round(median(docMs), 2), describeP50Ms: round(median(describeMs), 2), ratioToDescribe: round(median(docMs) / median(describeMs)), coldMs: round(coldMs, 1), coldToWarm: round(coldMs / median(docMs), 1) },
      listAll: { pagesOf1000Ms: round(median(listMs), 1), ratioToDescribe: round(median(listMs) / median(describeMs), 2) },
      rerankInclude,
      searchInclude,
    };
    if (!json) {
      console.log(`GET document: p50 ${result.getDocument.warmP50Ms} ms warm = ${result.getDocument.ratioToDescribe}x a collection describe (${result.getDocument.describeP50Ms} ms); first call ${result.getDocument.coldMs} ms (${result.getDocument.coldToWarm}x warm)`);
      console.log(`list all ${docs.length} ids in pages of 1,000: ${result.listAll.pagesOf1000Ms} ms = ${result.listAll.ratioToDescribe}x a describe`);
      console.log(`include text+metadata: re-rank ${rerankInclude.ratio}x (${rerankInclude.withIncludeMs} vs ${rerankInclude.withoutMs} ms), search ${searchInclude.ratio}x (${searchInclude.withIncludeMs} vs ${searchInclude.withoutMs} ms)`);
    }
    return result;
  } finally {
    await server.stop();
  }
}
