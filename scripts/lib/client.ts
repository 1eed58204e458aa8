/**
 * A small HTTP client of lateral's API used by the demo, the evaluations, the benchmarks and the
 * fault harness: it ingests a corpus with progress and runs re-rank and search jobs, exactly as any
 * user would, over HTTP. Every request goes through fetchRetrying: a 503 or 429 is retried after
 * its Retry-After, bounded in attempts and total time, with a line on stderr each time it waits.
 */
import { MultiBar, SingleBar, Presets } from 'cli-progress';
import { parseRetryAfter } from '@lateral/shared';

export interface Doc {
  id: string;
  text: string;
}

/** How fetchRetrying retries. Every field has a default. */
export interface RetryPolicy {
  /** Tries in all, the first included (default 8). */
  attempts?: number;
  /** Time from the first try after which no further wait starts (default 120 s): a wait that would end later is not taken. */
  totalMs?: number;
  /** Longest single wait (default 30 s); a longer Retry-After is not honoured: the answer is returned. */
  maxWaitMs?: number;
  /** The wait when the answer has no Retry-After: this, doubled each retry (default 1 s), up to maxWaitMs. */
  fallbackWaitMs?: number;
  /** Which answers to retry (default: 503 and 429). */
  retryable?: (status: number) => boolean;
  /** Where the waiting lines go (default: stderr). */
  log?: (line: string) => void;
  /** Told of each retry (e.g. to count them). */
  onRetry?: (info: { status: number; code: string; waitMs: number; attempt: number; attempts: number; method: string; url: string }) => void;
  /** Waits (tests replace it). */
  sleep?: (ms: number) => Promise<void>;
}

export const DEFAULT_RETRY: Required<Pick<RetryPolicy, 'attempts' | 'totalMs' | 'maxWaitMs' | 'fallbackWaitMs'>> = { attempts: 8, totalMs: 120_000, maxWaitMs: 30_000, fallbackWaitMs: 1000 };

const seconds = (ms: number) => (ms % 1000 === 0 ? String(ms / 1000) : (ms / 1000).toFixed(1));

/**
 * fetch, retrying 503 and 429 answers as their Retry-After asks (delay-seconds or an HTTP date),
 * at most `attempts` tries and `totalMs` in all; each wait prints one line, e.g.
 * `POST /v1/search: 503 overloaded, retrying in 2 s (attempt 2/8)`. The answer that is not
 * retried (success, another error, or the last refusal once a bound is reached) is returned
 * unread. `init` may be a function giving a fresh init per try (a streamed body can be sent once).
 * Network errors are not retried (a refused connection is the caller's to report).
 */
export async function fetchRetrying(url: string | URL, init: RequestInit | (() => RequestInit) = {}, policy: RetryPolicy = {}): Promise<Response> {
  const p = { ...DEFAULT_RETRY, ...policy };
  const retryable = policy.retryable ?? ((s: number) => s === 503 || s === 429);
  const log = policy.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  const sleep = policy.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
  const t0 = Date.now();
  for (let attempt = 1; ; attempt++) {
    const req = typeof init === 'function' ? init() : init;
    const res = await fetch(url, req);
    if (!retryable(res.status)) return res;
    const method = (req.method ?? 'GET').toUpperCase();
    const u = new URL(String(url));
    const where = `${method} ${u.pathname}`;
    const asked = parseRetryAfter(res.headers.get('retry-after'));
    const waitMs = asked ?? Math.min(p.fallbackWaitMs * 2 ** (attempt - 1), p.maxWaitMs);
    const why =
      attempt >= p.attempts ? `after ${attempt} attempts` : waitMs > p.maxWaitMs ? `Retry-After ${seconds(waitMs)} s is over ${seconds(p.maxWaitMs)} s` : Date.now() + waitMs - t0 > p.totalMs ? `${seconds(p.totalMs)} s of retrying spent` : null;
    if (why) {
      log(`${where}: ${res.status}, giving up (${why})`);
      return res;
    }
    const text = await res.text().catch(() => '');
    let code = '';
    try {
      code = String((JSON.parse(text) as { error?: unknown }).error ?? '');
    } catch {
      // not JSON: the status says it
    }
    log(`${where}: ${res.status}${code ? ` ${code}` : ''}, retrying in ${seconds(waitMs)} s (attempt ${attempt + 1}/${p.attempts})`);
    policy.onRetry?.({ status: res.status, code, waitMs, attempt: attempt + 1, attempts: p.attempts, method, url: u.pathname + u.search });
    await sleep(waitMs);
  }
}

async function call(base: string, method: string, url: string, body?: unknown, contentType = 'application/json', policy: RetryPolicy = {}) {
  const res = await fetchRetrying(base + url, { method, headers: body === undefined ? {} : { 'content-type': contentType }, body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body) }, policy);
  const text = await res.text();
  const json = text ? JSON.parse(text) : null;
  if (res.status >= 400) throw new Error(`${method} ${url} -> ${res.status}: ${json?.message ?? text}`);
  return { status: res.status, body: json };
}

/** GET /v1/collections/{id} (the collection's counts, generation and bytes per token). */
export async function getCollection(base: string, id: string): Promise<{ bytesPerToken: number; codecVersion: number; pending?: unknown; segments: number; generation: number; tokens: number } & Record<string, unknown>> {
  return (await call(base, 'GET', `/v1/collections/${id}`)).body;
}

export async function recreateCollection(base: string, id: string, model: string, extra: Record<string, unknown> = {}): Promise<void> {
  const exists = await fetchRetrying(`${base}/v1/collections/${id}`);
  await exists.body?.cancel();
  if (exists.status === 200) await call(base, 'DELETE', `/v1/collections/${id}`);
  await call(base, 'POST', '/v1/collections', { id, model, ...extra });
}

/**
 * The POSTs of `ingest` wait out the collection's back-pressure (503 overloaded while merges catch
 * up, as its Retry-After asks) for up to 30 minutes: on a loaded machine a whole collection's
 * batches outrun the merges for longer than DEFAULT_RETRY's 2 minutes, and giving up there loses the run.
 */
const INGEST_RETRY: RetryPolicy = { attempts: 1000, totalMs: 30 * 60_000 };

/** The ingestion stages a document passes, in order (GET /v1/collections/{id}/ingestions/{ingestionId}). */
const STAGES = ['encoded', 'compressed', 'indexed'] as const;

/**
 * Posts documents in requests of `perRequest` and waits until every one is indexed. Progress: with
 * `stages`, one live line per pipeline stage (a bar each on a terminal; otherwise a line every 10 s
 * and one when a stage completes); else one bar (a terminal) or a line per tenth indexed.
 */
export async function ingest(
  base: string,
  collection: string,
  docs: Doc[],
  /** pollMs: how often the ingestions' status is read while waiting (default 250 ms with `stages`, else 100 ms). */
  opts: { perRequest?: number; label?: string; progress?: boolean; stages?: boolean; pollMs?: number } = {},
): Promise<{ seconds: number; tokens: number }> {
  const t0 = performance.now();
  const per = opts.perRequest ?? 250;
  const show = opts.progress !== false;
  const tty = show && process.stdout.isTTY;
  const label = opts.label ?? collection;
  const secs = () => ((performance.now() - t0) / 1000).toFixed(1);
  const bar = tty && !opts.stages ? new SingleBar({ format: `${label} [{bar}] {percentage}% | {value}/{total} docs indexed | {stage}` }, Presets.shades_classic) : null;
  const multi = tty && opts.stages ? new MultiBar({ format: '    {stage} [{bar}] {value}/{total} documents | {duration_formatted}', hideCursor: true, clearOnComplete: false }, Presets.shades_classic) : null;
  const stageBars = multi ? Object.fromEntries(STAGES.map((st) => [st, multi.create(docs.length, 0, { stage: st.padEnd(10) })])) : null;
  bar?.start(docs.length, 0, { stage: 'uploading' });
  const statuses: string[] = [];
  for (let i = 0; i < docs.length; i += per) {
    const ndjson = docs.slice(i, i + per).map((d) => JSON.stringify(d)).join('\n');
    // A connection lost to a service starved of CPU (a loaded machine) is tried again: the same ids
    // ingested twice are the same documents (the later copy supersedes the earlier).
    let r;
    for (let attempt = 1; ; attempt++) {
      try {
        r = await call(base, 'POST', `/v1/collections/${collection}/documents`, ndjson, 'application/x-ndjson', INGEST_RETRY);
        break;
      } catch (err) {
        if (!(err instanceof TypeError) || attempt >= 5) throw err;
        process.stderr.write(`POST /v1/collections/${collection}/documents: ${err.message} (${String((err as { cause?: unknown }).cause ?? '')}), trying again in 5 s (attempt ${attempt + 1}/5)\n`);
        await new Promise((res) => setTimeout(res, 5000));
      }
    }
    statuses.push(r.body.status);
  }
  if (opts.stages && show) console.log(`    uploaded ${docs.length} documents in ${statuses.length} requests (${secs()} s); the workers encode, compress and index them:`);
  let lastPrinted = -1;
  let lastLine = performance.now();
  const completed = new Set<string>();
  // An ingestion's status once it is done is final (every batch committed: a later generation never
  // un-indexes one), so only the unfinished ones are read again: each read costs the service a
  // collection, a manifest and 3-4 S3 listings, and the first ingestions finish long before the last.
  const last = new Map<string, { state: string; stages: Record<string, number> }>();
  for (;;) {
    await Promise.all(statuses.filter((s) => last.get(s)?.state !== 'done').map((s) => call(base, 'GET', s).then((r) => last.set(s, r.body))));
    const all = statuses.map((s) => last.get(s)!);
    const sum = (k: string) => all.reduce((s, x) => s + Number(x.stages[k]), 0);
    const indexed = sum('indexed');
    const failed = sum('failed');
    bar?.update(indexed, { stage: `encoded ${sum('encoded')}, compressed ${sum('compressed')}` });
    if (stageBars) for (const st of STAGES) stageBars[st].update(sum(st));
    else if (opts.stages && show) {
      for (const st of STAGES)
        if (!completed.has(st) && sum(st) >= docs.length) {
          completed.add(st);
          console.log(`    ${st.padEnd(10)} ${docs.length}/${docs.length} documents at ${secs()} s`);
        }
      if (performance.now() - lastLine >= 10_000 && indexed < docs.length) {
        lastLine = performance.now();
        console.log(`    ${secs()} s: ${STAGES.map((st) => `${st} ${sum(st)}`).join(', ')} of ${docs.length}`);
      }
    } else if (!tty && show && Math.floor((10 * indexed) / docs.length) !== lastPrinted) {
      lastPrinted = Math.floor((10 * indexed) / docs.length);
      console.log(`${label}: ${indexed}/${docs.length} documents indexed`);
    }
    if (failed > 0) {
      bar?.stop();
      multi?.stop();
      throw new Error(`${failed} documents failed to ingest into ${collection}`);
    }
    if (indexed >= docs.length) break;
    await new Promise((r) => setTimeout(r, opts.pollMs ?? (opts.stages ? 250 : 100)));
  }
  bar?.stop();
  multi?.stop();
  const seconds = (performance.now() - t0) / 1000;
  const info = await call(base, 'GET', `/v1/collections/${collection}`);
  return { seconds, tokens: info.body.tokens };
}

export interface RerankHitList {
  queryId: string;
  hits: { id: string; score: number }[];
  missing: string[];
}

/** Submits one asynchronous re-rank job and polls (long-poll) until it is done. */
export async function rerank(base: string, body: Record<string, unknown>): Promise<{ seconds: number; results: RerankHitList[]; vectors?: string }> {
  const t0 = performance.now();
  const submitted = await call(base, 'POST', '/v1/rerank', body);
  let st = submitted.body;
  while (st.status !== 'completed' && st.status !== 'failed') st = (await call(base, 'GET', `/v1/rerank/${submitted.body.id}?wait=30`)).body;
  if (st.status === 'failed') throw new Error(`re-rank job ${submitted.body.id} failed: ${st.error}`);
  return { seconds: (performance.now() - t0) / 1000, results: st.result.results, vectors: st.result.vectors };
}

export interface SearchHitList {
  queryId: string;
  hits: { id: string; score: number; scoredBy: string }[];
  /** Why a query has no hits (only stop words, no committed generation, ...). */
  reason?: string;
}

/**
 * POST /v1/search?wait=`wait` and, when the job is not finished by then, long-polls
 * GET /v1/search/{id} until it is. `ms` is the client's wall clock from the POST until the
 * completed answer (what a user waits for one search).
 */
export async function search(
  base: string,
  body: Record<string, unknown>,
  wait = 60,
): Promise<{ ms: number; results: SearchHitList[]; generation: number; timings?: Record<string, number>; stats?: { warp?: { layoutBytes: number; segments: number; centroids?: number; epochs?: number; queries: { bytesRead: number; ranges: number }[] } } }> {
  const t0 = performance.now();
  let st = (await call(base, 'POST', `/v1/search?wait=${wait}`, body)).body;
  while (st.status !== 'completed' && st.status !== 'failed') st = (await call(base, 'GET', `/v1/search/${st.id}?wait=${Math.min(wait, 30)}`)).body;
  const ms = performance.now() - t0;
  if (st.status === 'failed') throw new Error(`search job ${st.id} failed: ${st.error}`);
  return { ms, results: st.result.results, generation: st.result.generation, timings: st.result.timings, stats: st.result.stats };
}
