/**
 * `npm run bench -- latency [--requests N] [--docs N] [--candidates N] [--warmup N] [--gap-ms N] [--json] [--help]`
 *
 * Where a request that waits for its answer spends its time (issue 31 item 1). The all-in-one
 * service (API, workers, the in-process S3 server and its redis-server) is started as a child on
 * a fresh DATA_DIR, as `npm run bench -- load` does; `--docs` Cranfield documents (default 300)
 * are ingested with glove-ctx-100d; then `--requests` (default 200) searches in BM25 mode, as many
 * in XTR mode and as many re-ranks of `--candidates` (default 50) ids run one at a time with
 * `?wait=30`, after `--warmup` (default 10) of each, `--gap-ms` (default 0: back to back) apart
 * (an idle gap lets the previous job's garbage collection finish outside the next request). Each answer's `Server-Timing` header splits
 * the server's time into parts (server-timing.ts in libs/http-api); the client's clock gives the rest:
 *   http      arrival -> auth middleware, body read, JSON parse (http, parse, json)
 *   auth      API key middleware and Nest's routing and guard (auth, route)
 *   enqueue   back-pressure check, validation and collection lookup, quota, request to S3, job added
 *             (backpressure, validate, quota, request, enqueue)
 *   pickup    job added -> the worker's handler starts
 *   job       the handler's own time (the processor: request, collection, manifest, scoring, result)
 *   handback  the handler's end -> the API has the result (completion event, state reads, result read)
 *   response  what the client measures beyond the server's total: serialising and sending the
 *             answer, the connection, and the client's parse
 * and `overhead` = the client's total - job. Printed: p50 / p99 of each part per request kind,
 * and a SHA-256 of every answer's hits (ids and scores) per kind, equal across runs of the same
 * code and data when results are exact. With --json the last line is one JSON object.
 */
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadCranfield } from '../lib/cranfield';
import { intFlag, parseCliOrExit } from '../lib/cli';
import { ingest, recreateCollection } from '../lib/client';
import { startService } from './load';

const ROOT = path.resolve(__dirname, '..', '..');
const COLLECTION = 'bench-latency';

const USAGE = `usage: npm run bench -- latency [--requests N] [--docs N] [--candidates N] [--warmup N] [--gap-ms N] [--json] [--help]
  --requests N    timed requests of each kind (search bm25, search xtr, re-rank), one at a time (default 200)
  --docs N        Cranfield documents ingested (default 300)
  --candidates N  candidate ids per re-rank (default 50)
  --warmup N      untimed requests of each kind first (default 10)
  --gap-ms N      idle milliseconds between timed requests (default 0: back to back)
  --json          the last line of output is one JSON object
  --help          this text`;

/** The parts reported, each the sum of Server-Timing metrics (see the header comment). */
export const PARTS: Record<string, string[]> = {
  http: ['http', 'parse', 'json'],
  auth: ['auth', 'route'],
  enqueue: ['backpressure', 'validate', 'quota', 'request', 'enqueue'],
  pickup: ['pickup'],
  job: ['job'],
  handback: ['handback', 'result'],
};

/** `a;dur=1.5, b;dur=2, sent;desc="123.5"` -> { durations: { a: 1.5, b: 2 }, at: { sent: 123.5 } }. */
export function parseServerTiming(header: string | null): { durations: Record<string, number>; at: Record<string, number> } {
  const durations: Record<string, number> = {};
  const at: Record<string, number> = {};
  for (const item of (header ?? '').split(',')) {
    const [name, ...params] = item.trim().split(';');
    const dur = params.map((p) => /^\s*dur=([\d.]+)\s*$/.exec(p)?.[1]).find((x) => x !== undefined);
    const desc = params.map((p) => /^\s*desc="?([\d.]+)"?\s*$/.exec(p)?.[1]).find((x) => x !== undefined);
    if (name && dur !== undefined) durations[name] = (durations[name] ?? 0) + Number(dur);
    else if (name && desc !== undefined) at[name] = Number(desc);
  }
  return { durations, at };
}

function quantile(xs: number[], q: number): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))];
}
const r2 = (x: number) => Math.round(x * 100) / 100;

interface Kind {
  name: string;
  path: string;
  bodies: string[];
}

export async function runLatencyBench(argv: string[]): Promise<Record<string, unknown> | undefined> {
  // The whole command line is read before the service starts: an unknown flag or a bad value exits 2 with the usage, --help prints it and exits 0.
  const { values, requests, nDocs, nCandidates, warmup, gapMs } = parseCliOrExit(
    'bench latency',
    USAGE,
    argv,
    {
      requests: { type: 'string', default: '200' },
      docs: { type: 'string', default: '300' },
      candidates: { type: 'string', default: '50' },
      warmup: { type: 'string', default: '10' },
      'gap-ms': { type: 'string', default: '0' },
      json: { type: 'boolean', default: false },
    },
    {},
    ({ values }) => ({
      values,
      requests: intFlag('requests', values.requests),
      nDocs: intFlag('docs', values.docs),
      nCandidates: intFlag('candidates', values.candidates),
      warmup: intFlag('warmup', values.warmup, 0),
      gapMs: intFlag('gap-ms', values['gap-ms'], 0),
    }),
  );
  const say = (s: string) => (values.json ? console.error(s) : console.log(s));

  const cran = loadCranfield(path.join(ROOT, 'data/cranfield'));
  const docs = cran.docs.slice(0, nDocs).map((d) => ({ id: d.id, text: d.text || 'empty' }));
  const queries = cran.queries;
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'lateral-bench-latency-'));
  const service = await startService(dataDir);
  try {
    say(`service ${service.url} (pid ${service.child.pid}); ingesting ${docs.length} Cranfield documents (glove-ctx-100d)`);
    await recreateCollection(service.url, COLLECTION, 'glove-ctx-100d');
    await ingest(service.url, COLLECTION, docs, { progress: false });
    const search = (mode: string) => queries.map((q) => JSON.stringify({ collection: COLLECTION, queries: [{ id: q.id, text: q.text }], topK: 10, mode: { name: mode } }));
    const kinds: Kind[] = [
      { name: 'search-bm25', path: '/v1/search?wait=30', bodies: search('bm25') },
      { name: 'search-xtr', path: '/v1/search?wait=30', bodies: search('xtr') },
      {
        name: 'rerank',
        path: '/v1/rerank?wait=30',
        bodies: queries.map((q, i) =>
          JSON.stringify({ collection: COLLECTION, queries: [{ id: q.id, text: q.text, candidates: Array.from({ length: Math.min(nCandidates, docs.length) }, (_, k) => docs[(i * 7 + k) % docs.length].id) }], topK: 10 }),
        ),
      },
    ];
    const now = () => performance.timeOrigin + performance.now();
    const call = async (k: Kind, i: number) => {
      const t0 = now();
      const res = await fetch(service.url + k.path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: k.bodies[i % k.bodies.length] });
      const body = (await res.json()) as { status?: string; result?: { results: { queryId: string; hits: { id: string; score: number }[] }[] } };
      const t1 = now();
      if (res.status !== 200 || body.status !== 'completed') throw new Error(`${k.name} ${k.path}: ${res.status} ${JSON.stringify(body).slice(0, 500)}`);
      const { durations, at } = parseServerTiming(res.headers.get('server-timing'));
      return { ms: t1 - t0, timing: durations, in: at.arrived - t0, out: t1 - at.sent, hits: body.result!.results.map((r) => [r.queryId, r.hits.map((h) => [h.id, h.score])]) };
    };
    const out: Record<string, unknown> = { bench: 'latency', documents: docs.length, candidates: nCandidates, requests, gapMs, cpus: os.cpus().length, loadavg: os.loadavg().map((x) => r2(x)) };
    const rows: string[] = [];
    const header = `${'kind'.padEnd(12)} ${[...Object.keys(PARTS), 'response', 'overhead', 'total'].map((p) => p.padStart(17)).join('')}`;
    for (const k of kinds) {
      for (let i = 0; i < warmup; i++) await call(k, i);
      const samples: Record<string, number[]> = {};
      const push = (name: string, v: number) => (samples[name] ??= []).push(v);
      const hash = createHash('sha256');
      for (let i = 0; i < requests; i++) {
        if (gapMs > 0) await new Promise((r) => setTimeout(r, gapMs));
        const { ms, timing, hits, in: wayIn, out: wayOut } = await call(k, i);
        // The same query's answer is hashed once (requests cycle through the queries).
        if (i < k.bodies.length) hash.update(JSON.stringify(hits));
        for (const [part, names] of Object.entries(PARTS)) push(part, names.reduce((s, n) => s + (timing[n] ?? 0), 0));
        for (const [n, v] of Object.entries(timing)) push(`server.${n}`, v);
        const serverTotal = timing.total ?? NaN;
        push('response', ms - serverTotal);
        // The response part split: the request's way in (client -> first middleware), the answer's way out (header -> client).
        push('response.in', wayIn);
        push('response.out', wayOut);
        push('overhead', ms - (timing.job ?? 0));
        push('total', ms);
      }
      const stats = Object.fromEntries(Object.entries(samples).map(([n, xs]) => [n, { p50: r2(quantile(xs, 0.5)), p99: r2(quantile(xs, 0.99)), mean: r2(xs.reduce((a, b) => a + b, 0) / xs.length) }]));
      out[k.name] = { ...stats, results_sha256: hash.digest('hex').slice(0, 16) };
      rows.push(`${k.name.padEnd(12)} ${[...Object.keys(PARTS), 'response', 'overhead', 'total'].map((p) => `${stats[p].p50.toFixed(2)} / ${stats[p].p99.toFixed(2)}`.padStart(17)).join('')}`);
      say(`${k.name}: ${requests} requests, server parts (p50/mean ms): ${Object.keys(samples).filter((n) => n.startsWith('server.')).map((n) => `${n.slice(7)} ${stats[n].p50}/${stats[n].mean}`).join(', ')}; response in ${stats['response.in'].p50}/${stats['response.in'].mean}, out ${stats['response.out'].p50}/${stats['response.out'].mean}`);
    }
    say(`\nmilliseconds, p50 / p99 of ${requests} requests each (one at a time${gapMs ? `, ${gapMs} ms apart` : ', back to back'}, ?wait=30; ${docs.length} documents; re-rank of ${nCandidates} candidates; load average ${os.loadavg()[0].toFixed(1)})`);
    say(header);
    for (const r of rows) say(r);
    say(`results: ${kinds.map((k) => `${k.name} ${(out[k.name] as { results_sha256: string }).results_sha256}`).join(', ')}`);
    if (!values.json) console.log(JSON.stringify(out));
    return out;
  } finally {
    await service.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
}
