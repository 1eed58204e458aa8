import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { segmentShard, type CollectionManifest } from '@lateral/shared';
import { loadCranfield } from '../scripts/lib/cranfield';
import { http, until } from './helpers';
import { startCluster, type Cluster } from './faults/harness';

/**
 * Shards (issue 10 item 4) across processes: a collection of 2 shards, a coordinator (the API
 * process, working on the rerank and search queues but holding no shard: SCORER_SHARDS=none) and
 * scorer processes started as `npm run start:scorer` runs them. Re-rank and search answered by two
 * scorers holding one shard each must equal, to the bit, what one scorer holding both answers;
 * a re-rank equals that of the same documents in a collection of one shard (its tie-break is the
 * candidate's position, whatever the segments); a shard whose only scorer is gone waits in its
 * queue and completes once a scorer holding it starts (fail-over is BullMQ's).
 */

const ROOT = path.resolve('.');
const SCORER_ENTRY = 'apps/scorer-worker/src/main.ts';
const children = new Set<ChildProcess>();
process.once('exit', () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
});

interface Scorer {
  child: ChildProcess;
  output: () => string;
  kill9(): Promise<void>;
}

async function startScorer(cluster: Cluster, shards: string): Promise<Scorer> {
  const env: NodeJS.ProcessEnv = { ...process.env, ...cluster.vars, LOG_LEVEL: 'info', WORKER_QUEUES: 'search', SCORER_SHARDS: shards, METRICS_PORT: '0', NODE_ENV: 'production' };
  const child = spawn(process.execPath, ['--import', 'tsx', SCORER_ENTRY], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(child);
  let out = '';
  child.stdout!.on('data', (b: Buffer) => (out += b.toString()));
  child.stderr!.on('data', (b: Buffer) => (out += b.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  await until(async () => {
    if (child.exitCode !== null) throw new Error(`scorer exited ${child.exitCode} before working:\n${out.slice(-3000)}`);
    return /working on/.test(out);
  }, 90_000);
  return {
    child,
    output: () => out,
    kill9: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
  };
}

type Hits = { id: string; score: number; scoredBy?: string; explain?: unknown }[];

describe('shards: two scorer processes holding one shard each answer what one holding both answers', () => {
  let cluster: Cluster;
  const cran = loadCranfield(path.resolve('data/cranfield'));
  const docs = cran.docs.filter((d) => d.text.length > 0).slice(0, 200);
  const queries = cran.queries.slice(0, 4).map((q, i) => ({ id: `q${i}`, text: q.text }));
  // Every candidate id in a different order per query, plus ids that are not stored.
  const candidates = (qi: number) => [...docs.map((d) => d.id).filter((_, i) => (i + qi) % 3 !== 0), 'nope', ...docs.map((d) => d.id).filter((_, i) => (i + qi) % 3 === 0)].reverse();
  let manifest: CollectionManifest;

  beforeAll(async () => {
    cluster = await startCluster({ env: { SCORER_SHARDS: 'none', ENCODE_BATCH_DOCUMENTS: '20', MERGE_FACTOR: '3' }, workers: 1 });
    for (const [id, shards] of [['split', 2], ['whole', 1]] as const) {
      // fp16: both collections hold the same vectors (an EDEN codec is fitted per collection, so scores would differ between them).
      const c = await cluster.api('POST', '/v1/collections', { id, shards, codec: { kind: 'fp16' } });
      expect(c.status, JSON.stringify(c.body)).toBe(201);
      const ing = await cluster.api('POST', `/v1/collections/${id}/documents`, docs.map((d) => ({ id: d.id, text: d.text })));
      expect(ing.status, JSON.stringify(ing.body)).toBe(202);
      await until(async () => (await cluster.api('GET', ing.body.status)).body.state === 'done', 240_000, 250);
    }
    // The merges MERGE_FACTOR 3 asks for after the commits: wait until the segment count settles.
    let last = -1;
    await until(async () => {
      const n = (await cluster.api('GET', '/v1/collections/split')).body.segments as number;
      const settled = n === last;
      last = n;
      return settled && n <= 8;
    }, 120_000, 3000);
    manifest = (await cluster.server.runtime.generations.manifest('default', 'split'))!;
  }, 480_000);
  afterAll(async () => {
    await cluster?.stop();
  });

  it('rejects shards over COLLECTION_MAX_SHARDS with a 400 naming the field and the limit', async () => {
    const r = await cluster.api('POST', '/v1/collections', { id: 'toomany', shards: 9 });
    expect(r.status).toBe(400);
    expect(JSON.stringify(r.body)).toContain('shards');
    expect(JSON.stringify(r.body)).toContain('8');
    const z = await cluster.api('POST', '/v1/collections', { id: 'zero', shards: 0 });
    expect(z.status).toBe(400);
    expect(JSON.stringify(z.body)).toContain('shards');
  });

  it('records each segment in a shard, both shards hold documents, and merges keep segments within their shard', async () => {
    const split = (await cluster.api('GET', '/v1/collections/split')).body;
    expect(split.shards).toBe(2);
    expect(split.documents).toBe(docs.length);
    const perShard = [0, 0];
    for (const s of manifest.segments) {
      expect(s.shard, JSON.stringify(s)).toBeTypeOf('number');
      perShard[segmentShard(s, 2)] += s.documents - (s.tombstones?.length ?? 0);
    }
    expect(perShard[0]).toBeGreaterThan(0);
    expect(perShard[1]).toBeGreaterThan(0);
    const merged = manifest.segments.filter((s) => s.batches && s.batches.length > 1);
    expect(merged.length, 'MERGE_FACTOR 3 merged some segments').toBeGreaterThan(0);
    // Each merged segment stays in the shard its input batches were committed to (read from the
    // earlier generations that still list the batches' own segments).
    const shardOfBatch = new Map<string, number>();
    for (let g = 1; g < manifest.generation; g++) {
      const m = await cluster.server.runtime.generations.manifest('default', 'split', g).catch(() => null);
      for (const s of m?.segments ?? []) if (!s.batches) shardOfBatch.set(s.batchId, segmentShard(s, 2));
    }
    let checked = 0;
    for (const s of merged) {
      for (const b of s.batches!) {
        if (!shardOfBatch.has(b)) continue;
        expect(shardOfBatch.get(b), `batch ${b} of ${s.key}`).toBe(s.shard);
        checked++;
      }
    }
    expect(checked).toBeGreaterThan(0);
    const overview = await http(cluster.server.url, 'GET', '/v1/admin/overview', undefined, { authorization: `Bearer ${cluster.vars.ADMIN_TOKEN}` });
    expect(overview.status).toBe(200);
    const row = (overview.body.collections as { id: string; shards: number | null }[]).find((c) => c.id === 'split');
    expect(row?.shards).toBe(2);
    // The shard queues' job counts are reported beside the others (health, and lateral_queue_jobs on /metrics).
    const health = await cluster.api('GET', '/v1/health');
    expect(Object.keys(health.body.queues)).toEqual(expect.arrayContaining(['rerank', 'search', 'shard-0', 'shard-1']));
  });

  const rerank = async (collection: string, scorer: unknown = 'maxsim', topK = 60) => {
    const body = { collection, scorer, topK, queries: queries.map((q, qi) => ({ ...q, candidates: scorer === 'maxsim' ? candidates(qi) : candidates(qi).map((id, k) => ({ id, score: (k * 7919) % 101 })) })) };
    const r = await cluster.api('POST', '/v1/rerank?wait=60', body);
    expect(r.status, JSON.stringify(r.body).slice(0, 2000)).toBe(200);
    return r.body.result as { generation: number; results: { queryId: string; hits: Hits; missing: string[] }[] };
  };
  const search = async (body: Record<string, unknown>) => {
    const r = await cluster.api('POST', '/v1/search?wait=60', { collection: 'split', queries, ...body });
    expect(r.status, JSON.stringify(r.body).slice(0, 2000)).toBe(200);
    expect(r.body.status).toBe('completed');
    return r.body.result as { generation: number; results: { queryId: string; hits: Hits; reason?: string }[] };
  };
  const SEARCHES: Record<string, Record<string, unknown>> = {
    xtr: { mode: { name: 'xtr', kPrime: 40, nprobe: 8 }, topK: 20 },
    xtrExplain: { mode: { name: 'xtr', kPrime: 40, nprobe: 8 }, topK: 5, explain: true },
    bm25: { mode: 'bm25', topK: 20 },
    dense: { mode: 'dense', topK: 20 },
    exhaustive: { mode: 'exhaustive', topK: 20, explain: true },
    hybrid: { mode: { name: 'hybrid', base: 'xtr', lambda: 0.5, depth: 30, kPrime: 40, nprobe: 8 }, topK: 15 },
    rrf: { mode: { name: 'hybrid', base: 'dense', fusion: 'rrf', depth: 30 }, topK: 15 },
    secondStage: { mode: 'bm25', topK: 10, rerank: { scorer: 'maxsim', depth: 25 } },
  };
  const runAll = async () => ({
    maxsim: await rerank('split'),
    hybrid: await rerank('split', { name: 'hybrid', base: 'maxsim', lambda: 0.3 }),
    searches: Object.fromEntries(await Promise.all(Object.entries(SEARCHES).map(async ([k, b]) => [k, await search(b)] as const))),
  });

  let apart: Awaited<ReturnType<typeof runAll>>;

  it('answers re-rank and every search mode with one scorer per shard, and a shard without a scorer waits for one', async () => {
    const s0 = await startScorer(cluster, '0');
    let s1 = await startScorer(cluster, '1');
    apart = await runAll();
    for (const r of apart.maxsim.results) {
      expect(r.missing).toEqual(['nope']);
      expect(r.hits).toHaveLength(60);
    }
    for (const [k, r] of Object.entries(apart.searches)) for (const q of r.results) expect(q.hits.length, k).toBeGreaterThan(0);
    // The parents merged their shards' partial results and removed them (and the rounds' inputs); the
    // results stay (a small one in the job's return value, a large one under result.json: INLINE_JOB_BYTES).
    for (const kind of ['rerank', 'search']) {
      const objects = (await cluster.server.runtime.store.list(`tenants/default/${kind}/`)).map((o) => o.key);
      expect(objects.filter((k) => k.includes('/shards/')), kind).toEqual([]);
    }
    // Shard 1's only scorer is gone: the re-rank's child for shard 1 waits in its queue ...
    await s1.kill9();
    const pending = await cluster.api('POST', '/v1/rerank?wait=3', { collection: 'split', scorer: 'maxsim', topK: 60, queries: queries.map((q, qi) => ({ ...q, candidates: candidates(qi) })) });
    expect(pending.status, JSON.stringify(pending.body)).toBe(202);
    // ... and completes when a scorer holding shard 1 starts.
    s1 = await startScorer(cluster, '1');
    const done = await until(async () => {
      const r = await cluster.api('GET', `/v1/rerank/${pending.body.rerankId ?? pending.body.id}?wait=10`);
      return r.body.status === 'completed' ? r.body : null;
    }, 120_000, 500);
    expect(done.result.results).toEqual(apart.maxsim.results);
    await s0.kill9();
    await s1.kill9();
  }, 300_000);

  it('one scorer holding both shards answers exactly the same, and a re-rank equals the collection of one shard', async () => {
    const both = await startScorer(cluster, '0,1');
    try {
      const together = await runAll();
      expect(together.maxsim.generation).toBe(apart.maxsim.generation);
      expect(together.maxsim.results).toEqual(apart.maxsim.results);
      expect(together.hybrid.results).toEqual(apart.hybrid.results);
      for (const k of Object.keys(SEARCHES)) expect(together.searches[k].results, k).toEqual(apart.searches[k].results);
      // The collection of one shard (same documents, scored in one job): the same ranking.
      const whole = await rerank('whole');
      expect(whole.results).toEqual(apart.maxsim.results);
      const wholeHybrid = await rerank('whole', { name: 'hybrid', base: 'maxsim', lambda: 0.3 });
      expect(wholeHybrid.results).toEqual(apart.hybrid.results);
      // BM25 with global statistics: the same scores as over one shard (ids may tie differently only on equal scores).
      const wb = await cluster.api('POST', '/v1/search?wait=60', { collection: 'whole', queries, mode: 'bm25', topK: 20 });
      const scores = (r: { results: { hits: Hits }[] }) => r.results.map((q) => q.hits.map((h) => h.score));
      expect(scores(wb.body.result)).toEqual(scores(apart.searches.bm25));
      // A delete with two shards: gone from re-rank and search once acknowledged.
      const victim = apart.maxsim.results[0].hits[0].id;
      const del = await cluster.api('DELETE', `/v1/collections/split/documents/${encodeURIComponent(victim)}?wait=30`);
      expect([200, 202]).toContain(del.status);
      await until(async () => (await rerank('split')).results[0].missing.includes(victim), 60_000, 500);
      const after = await search(SEARCHES.dense);
      for (const q of after.results) expect(q.hits.map((h) => h.id)).not.toContain(victim);
      // Documents read back as before.
      const doc = await cluster.api('GET', `/v1/collections/split/documents/${encodeURIComponent(apart.maxsim.results[1].hits[0].id)}`);
      expect(doc.status).toBe(200);
    } finally {
      await both.kill9();
    }
  }, 300_000);
});
