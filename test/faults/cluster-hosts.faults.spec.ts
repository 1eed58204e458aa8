import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes, randomUUID } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig, type Config } from '@lateral/shared';
import { createLogger, createRuntime, redisReachable, requireServices, type Runtime } from '@lateral/infra';
import { loadCranfield } from '../../scripts/lib/cranfield';
import { http, until } from '../helpers';
import { census, liveIdTable, report, retryingUnlessHealth, watchIngestion, type Census, type CensusTarget, type Doc } from './harness';
import { Hosts, namespacesForbidden, type Host, type HostProc } from './netns';

/**
 * A cluster across hosts (issue 27 item 5): every part on a host of its own, made by the test as a
 * Linux network namespace with one address on a bridge (netns.ts): Redis, the S3 server (s3-host.ts:
 * the embedded server behind a TCP proxy on the host's address), the API (apps/api), an encoder
 * (apps/encoder-worker: encode, compress) and two scorers (apps/scorer-worker: index, commit,
 * merge, rerank, search, batch, every shard), each process with its own DATA_DIR. The test reaches
 * the API, Redis and S3 through its own veth into the bridge; nothing leaves the namespaces.
 *
 * Cases, each printing a FAULT line with the documents accepted / searchable once / lost /
 * duplicated and the time to recover:
 * 1. scorer A cut off from every host while it holds a search's job: the search answers from
 *    scorer B (the other holder of the shards) once A's job lock expires, or fails; never a partial
 *    answer called complete (every completed answer equals the answer before the fault, hit for hit);
 * 2. scorer A cut off from Redis alone (it still reaches S3) past its job lock while it holds an
 *    ingestion job (index or commit): B runs the job again, A's late finish is refused, and every
 *    document is committed once;
 * 3. the S3 host slowed during an ingestion: every chunk its proxy relays held 200 ms each way (this
 *    kernel has no sch_netem, so `tc qdisc ... netem delay` is not available: the latency is added
 *    by the proxy in front of the S3 server, per chunk a socket read returned, rather than per
 *    packet on the link);
 * 4. scorer A's host killed (off the switch, then its process SIGKILLed: it sends nothing more)
 *    while it holds an ingestion job and searches keep coming.
 * "While A holds a job" is made certain, not left to chance: scorer B is paused (SIGSTOP) until a
 * job that was not active before shows in an active list (only A can have taken it), the fault
 * is injected, and B resumes (paused for at most 2 s, well under its job lock).
 *
 * Job locks are short here (JOB_LOCK_SECONDS 6, JOB_STALLED_CHECK_SECONDS 2) so that the suite's
 * time goes to the faults; merges are off (MERGE_AFTER_COMMIT=false) for the same reason.
 */

const LOCK_S = 6;
const STALLED_S = 2;
const SCORER_QUEUES = ['index', 'commit', 'merge', 'rerank', 'search', 'batch'];
const ENCODER_QUEUES = ['encode', 'compress'];

const forbidden = namespacesForbidden() ?? (spawnSync('redis-server', ['--version']).status === 0 ? null : 'redis-server is not on PATH');
if (forbidden) console.warn(`SKIPPED test/faults/cluster-hosts.faults.spec.ts: ${forbidden}`);

const cran = loadCranfield(path.resolve('data/cranfield'));
const docsOf = (from: number, n: number, tag: string): Doc[] => cran.docs.slice(from, from + n).map((d) => ({ id: `${tag}-${d.id}`, text: d.text || 'empty' }));
const QUERIES = cran.queries.slice(0, 6).map((q) => ({ id: q.id, text: q.text }));

/** A completed search's answer as one string: per query, its hits' ids and scores in order. */
const answerKey = (body: Record<string, any>): string => // eslint-disable-line @typescript-eslint/no-explicit-any
  JSON.stringify((body.result.results as { queryId: string; hits: { id: string; score: number }[] }[]).map((q) => [q.queryId, q.hits.map((h) => [h.id, h.score])]));

/** A FAULT line's counts: documents accepted, searchable once, lost, duplicated (and ids live twice in the id tables). */
const tally = (accepted: number, c: Census, table?: { repeated: number }) => ({
  accepted,
  searchable: c.searchable,
  lost: c.lost,
  duplicated: c.duplicated,
  wrongText: c.wrongText,
  ...(table ? { idTableRepeated: table.repeated } : {}),
});

interface SearchOutcome {
  /** `answered`: completed and equal to the answer before the fault; `partial`: completed but different; `failed`: an error, said as one. */
  kind: 'answered' | 'partial' | 'failed';
  detail: string;
  at: number;
}

describe.skipIf(!!forbidden)('fault: a cluster across hosts (network namespaces)', () => {
  let hosts: Hosts;
  let rt: Runtime;
  let config: Config;
  let dir: string;
  let apiBase: string;
  let target: CensusTarget;
  let env: NodeJS.ProcessEnv;
  const procs: Record<string, HostProc> = {};
  let baseline: string | undefined;
  let s3Control: HostProc;
  /** Scorer A's way to Redis: a delaying proxy on the Redis host (its link alone can be slowed). */
  let redisProxyA: HostProc;

  const api = (method: string, url: string, body?: unknown) => http(apiBase, method, url, body, {}, retryingUnlessHealth);
  const host = (name: string): Host => hosts.get(name);

  const waitLine = (p: HostProc, re: RegExp, ms: number, what: string) =>
    until(async () => {
      if (p.child.exitCode !== null || p.child.signalCode !== null) throw new Error(`${what} exited before it was up:\n${p.output().slice(-3000)}`);
      return re.test(p.output());
    }, ms, 100).catch((err: Error) => {
      throw new Error(`${what}: ${err.message}\n${p.output().slice(-3000)}`);
    });

  const startApp = (name: string, entry: string, extra: Record<string, string>) => {
    const h = host(name);
    const p = hosts.run(h, [process.execPath, '--import', 'tsx', entry], { ...env, HOST: h.ip, DATA_DIR: path.join(dir, name), ...extra });
    procs[name] = p;
    return p;
  };

  /** Sends `command` to a proxy host (`controlByStdin`) and waits for its `ok` answer. */
  const tell = async (p: HostProc, command: string) => {
    const mark = p.output().length;
    p.child.stdin!.write(`${command}\n`);
    await until(async () => p.output().slice(mark).includes(`ok ${command}`), 10_000, 10);
  };

  const diagnose = () => Object.entries(procs).map(([n, p]) => `--- ${n}:\n${p.output().slice(-1500)}`).join('\n');

  /** Active job ids of `queues` (BullMQ's active lists). */
  const activeJobs = async (queues: string[]): Promise<Set<string>> => {
    const ids = new Set<string>();
    for (const q of queues) for (const id of await rt.redis.lrange(`${config.REDIS_PREFIX}:${q}:active`, 0, -1)) ids.add(`${q}:${id}`);
    return ids;
  };

  /**
   * Pauses scorer B, slows scorer A's link to Redis by `slowAms` each way (when given), runs `start`
   * (if any), waits (at most `waitMs`) for a job of `queues` that was not active before to become
   * active (scorer A took it: B is paused), then runs `fault`, undoes the delay and resumes B. Null
   * when A took nothing within the wait (nothing was injected). A wait for a single job must cover
   * BullMQ's wake-up: a new job wakes one worker blocked on the queue's marker, and when that is
   * paused B (it blocked first), A takes the job only when its own block times out (drainDelay,
   * 5 s). The delay makes A's hold on a short job (a search over 300 documents runs in a few ms)
   * last several round trips, so the fault lands while A holds the job rather than after it
   * finished.
   */
  const whileAHolds = async (queues: string[], fault: () => Promise<void> | void, start?: () => Promise<void>, slowAms = 0, waitMs = 3000): Promise<string | null> => {
    const b = procs['scorer-b'].child;
    b.kill('SIGSTOP');
    try {
      const before = await activeJobs(queues);
      if (slowAms) await tell(redisProxyA, `delay ${slowAms}`);
      await start?.();
      const taken = await until(async () => [...(await activeJobs(queues))].find((id) => !before.has(id)), waitMs, 5).catch(() => null);
      if (taken) await fault();
      return taken ?? null;
    } finally {
      if (slowAms) await tell(redisProxyA, 'delay 0');
      b.kill('SIGCONT');
    }
  };

  /** One exhaustive search of the six queries on `collection`, followed to its end (bounded), classified against the baseline. */
  const searchOnce = async (collection: string, post?: { id: string }): Promise<SearchOutcome> => {
    let r = post ? await http(apiBase, 'GET', `/v1/search/${post.id}?wait=30`) : await http(apiBase, 'POST', '/v1/search?wait=30', { collection, mode: 'exhaustive', topK: 10, queries: QUERIES });
    for (let i = 0; i < 4 && r.status === 202 && r.body?.id; i++) r = await http(apiBase, 'GET', `/v1/search/${r.body.id}?wait=30`);
    const at = Date.now();
    if (r.status === 200 && r.body?.status === 'completed') {
      const got = answerKey(r.body);
      return got === baseline ? { kind: 'answered', detail: 'equal to the answer before the fault', at } : { kind: 'partial', detail: got.slice(0, 500), at };
    }
    return { kind: 'failed', detail: `${r.status} ${JSON.stringify(r.body).slice(0, 300)}`, at };
  };

  const ingest = async (collection: string, docs: Doc[]) => {
    const created = await api('POST', '/v1/collections', { id: collection, shards: 2 });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const ing = await api('POST', `/v1/collections/${collection}/documents`, docs);
    expect(ing.status, JSON.stringify(ing.body)).toBe(202);
    return watchIngestion(api, ing.body.status as string, 240_000, 200);
  };

  const done = (w: ReturnType<typeof watchIngestion>) =>
    w.done.catch((err: Error) => {
      throw new Error(`${err.message}; last status ${JSON.stringify(w.seen.at(-1))}\n${diagnose()}`);
    });

  const indexedAtLeast = (w: ReturnType<typeof watchIngestion>, n: number) =>
    until(async () => ((w.seen.at(-1)?.indexed ?? 0) >= n ? w.seen.at(-1) : null), 180_000, 50);

  const stallsSince = (p: HostProc, mark: number) => (p.output().slice(mark).match(/stalled \(its worker died or lost its lock\)/g) ?? []).length;

  beforeAll(async () => {
    hosts = new Hosts();
    dir = mkdtempSync(path.join(os.tmpdir(), 'lateral-hosts-'));
    for (const name of ['redis', 's3', 'api', 'encoder', 'scorer-a', 'scorer-b']) hosts.add(name);
    const redisUrl = `redis://${host('redis').ip}:6379`;
    env = {
      ...process.env,
      REDIS_URL: redisUrl,
      S3_ENDPOINT: `http://${host('s3').ip}:9000`,
      S3_BUCKET: 'faults',
      REDIS_PREFIX: `h${randomUUID().slice(0, 8)}`,
      PORT: '8080',
      LOG_LEVEL: 'info',
      MODELS_DIR: path.resolve('.cache/models'),
      DEFAULT_MODEL: 'glove-ctx-100d',
      ENCODE_BATCH_DOCUMENTS: '50',
      ADMIN_TOKEN: randomBytes(24).toString('base64url'),
      JOB_LOCK_SECONDS: String(LOCK_S),
      JOB_STALLED_CHECK_SECONDS: String(STALLED_S),
      MERGE_AFTER_COMMIT: 'false',
      METRICS_PORT: '0',
      NODE_ENV: 'production',
    };
    procs.redis = hosts.run(host('redis'), ['redis-server', '--port', '6379', '--bind', host('redis').ip, '--save', '', '--appendonly', 'no', '--protected-mode', 'no', '--maxmemory-policy', 'noeviction'], env);
    s3Control = hosts.run(host('s3'), [process.execPath, '--import', 'tsx', 'test/faults/s3-host.ts'], { ...env, S3_HOST_DIR: path.join(dir, 's3'), S3_HOST_ADDRESS: host('s3').ip, S3_HOST_PORT: '9000' }, { stdin: true });
    procs.s3 = s3Control;
    await until(() => redisReachable(redisUrl, 300), 20_000, 100);
    await waitLine(s3Control, /s3 host ready/, 60_000, 'the S3 host');
    redisProxyA = hosts.run(host('redis'), [process.execPath, '--import', 'tsx', 'test/faults/proxy-host.ts'], { ...env, PROXY_TARGET: `${host('redis').ip}:6379`, PROXY_ADDRESS: host('redis').ip, PROXY_PORT: '6380' }, { stdin: true });
    procs['redis-proxy-a'] = redisProxyA;
    await waitLine(redisProxyA, /proxy ready/, 60_000, "scorer A's Redis proxy");
    const apiProc = startApp('api', 'apps/api/src/main.ts', {});
    const encoder = startApp('encoder', 'apps/encoder-worker/src/main.ts', { WORKER_QUEUES: ENCODER_QUEUES.join(',') });
    const a = startApp('scorer-a', 'apps/scorer-worker/src/main.ts', { WORKER_QUEUES: SCORER_QUEUES.join(','), REDIS_URL: `redis://${host('redis').ip}:6380` });
    const b = startApp('scorer-b', 'apps/scorer-worker/src/main.ts', { WORKER_QUEUES: SCORER_QUEUES.join(',') });
    await Promise.all([
      waitLine(apiProc, /API on http/, 180_000, 'the API'),
      waitLine(encoder, /working on/, 180_000, 'the encoder'),
      waitLine(a, /working on/, 180_000, 'scorer A'),
      waitLine(b, /working on/, 180_000, 'scorer B'),
    ]);
    apiBase = `http://${host('api').ip}:8080`;
    config = loadConfig({ ...(env as Record<string, string>), HOST: hosts.clientIp, DATA_DIR: path.join(dir, 'test') });
    rt = await createRuntime(config, requireServices(config), createLogger('warn'));
    target = { api, config, server: { runtime: rt } };
    // The answer every later search must equal: 300 documents, committed with both scorers up.
    const w = await ingest('q', docsOf(0, 300, 'q'));
    await done(w);
    const r = await http(apiBase, 'POST', '/v1/search?wait=60', { collection: 'q', mode: 'exhaustive', topK: 10, queries: QUERIES });
    expect(r.body?.status, JSON.stringify(r.body).slice(0, 500)).toBe('completed');
    baseline = answerKey(r.body);
    expect(JSON.parse(baseline)).toHaveLength(QUERIES.length);
  }, 400_000);

  afterAll(async () => {
    await rt?.close().catch(() => undefined);
    hosts?.destroy();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('a scorer cut off mid-search: the other holder answers, or the search fails; never a partial answer called complete', async () => {
    const a = host('scorer-a');
    const b = procs['scorer-b'];
    const mark = b.output().length;
    let inFlight: { id: string } | undefined;
    let tCut = 0;
    let taken: string | null = null;
    // The search's jobs (the parent on `search`, a child per shard) are A's when B is paused.
    let attempts = 0;
    for (; attempts < 4 && !taken; attempts++) {
      taken = await whileAHolds(
        ['search', 'shard-0', 'shard-1'],
        () => {
          hosts.isolate(a);
          tCut = Date.now();
        },
        async () => {
          const r = await http(apiBase, 'POST', '/v1/search', { collection: 'q', mode: 'exhaustive', topK: 10, queries: QUERIES });
          expect(r.status).toBe(202);
          inFlight = { id: r.body.id as string };
        },
        150,
        15_000,
      );
      if (!taken) await searchOnce('q', inFlight); // A finished it before it could be cut: let it end, try again
    }
    expect(taken, 'scorer A never held a job of the search').toBeTruthy();
    // While A is away: the search in flight, and new ones (B alone can answer them).
    const during: SearchOutcome[] = [];
    const inFlightOutcome = searchOnce('q', inFlight);
    for (let i = 0; i < 3; i++) during.push(await searchOnce('q'));
    const first = await inFlightOutcome;
    // Held past the lock and a stalled check, so A's job is handed over whatever the timing.
    await until(async () => Date.now() - tCut > (LOCK_S + 2 * STALLED_S + 1) * 1000, 60_000, 100);
    hosts.heal();
    const tHealed = Date.now();
    const after: SearchOutcome[] = [];
    for (let i = 0; i < 2; i++) after.push(await searchOnce('q'));
    const all = [first, ...during, ...after];
    const c = await census(target, 'q', docsOf(0, 300, 'q'));
    report('hosts-scorer-cut-mid-search', {
      ...tally(300, c),
      heldJob: taken,
      attempts,
      inFlight: first.kind,
      cutToInFlightAnswerMs: first.at - tCut,
      duringCut: { answered: during.filter((o) => o.kind === 'answered').length, failed: during.filter((o) => o.kind === 'failed').length, partial: during.filter((o) => o.kind === 'partial').length },
      afterHeal: { answered: after.filter((o) => o.kind === 'answered').length, failed: after.filter((o) => o.kind === 'failed').length, partial: after.filter((o) => o.kind === 'partial').length },
      partialCalledComplete: all.filter((o) => o.kind === 'partial').length,
      stalledJobsTakenByB: stallsSince(b, mark),
      cutMs: tHealed - tCut,
    });
    expect(all.filter((o) => o.kind === 'partial'), 'a completed answer that differs from the answer before the fault').toEqual([]);
    expect(['answered', 'failed'], first.detail).toContain(first.kind);
    expect(during.map((o) => o.kind)).toEqual(['answered', 'answered', 'answered']);
    expect(after.map((o) => o.kind)).toEqual(['answered', 'answered']);
    expect(stallsSince(b, mark), 'scorer B took over the job A held').toBeGreaterThan(0);
    expect(c).toMatchObject({ listed: 300, searchable: 300, duplicated: 0, lost: 0, wrongText: 0 });
  }, 300_000);

  it('a scorer cut off from Redis past its job lock: its job runs once in effect', async () => {
    const a = host('scorer-a');
    const b = procs['scorer-b'];
    const docs = docsOf(300, 600, 'w');
    const w = await ingest('w', docs);
    await indexedAtLeast(w, 50);
    const mark = b.output().length;
    const markA = procs['scorer-a'].output().length;
    let tCut = 0;
    let taken: string | null = null;
    for (let attempt = 0; attempt < 20 && !taken && !w.seen.some((s) => s.state === 'done'); attempt++) {
      taken = await whileAHolds(['index', 'commit'], () => {
        hosts.cut(a, host('redis'));
        tCut = Date.now();
      });
      if (!taken) await new Promise((r) => setTimeout(r, 300));
    }
    expect(taken, 'scorer A never held an index or commit job while the ingestion ran').toBeTruthy();
    const indexedAtCut = w.seen.at(-1)?.indexed ?? 0;
    await until(async () => Date.now() - tCut > (LOCK_S + 2 * STALLED_S + 1) * 1000 && stallsSince(b, mark) > 0, (LOCK_S + 4 * STALLED_S + 20) * 1000, 100).catch(() => undefined);
    hosts.heal();
    const tHealed = Date.now();
    await done(w);
    const tDone = Date.now();
    const c = await census(target, 'w', docs);
    const table = await liveIdTable(target, 'w');
    const lateA = procs['scorer-a'].output().slice(markA);
    report('hosts-scorer-cut-from-redis', {
      ...tally(docs.length, c, table),
      heldJob: taken,
      indexedAtCut,
      cutMs: tHealed - tCut,
      stalledJobsTakenByB: stallsSince(b, mark),
      lateFinishesRefusedOnA: (lateA.match(/[Mm]issing lock|lock .*(lost|renew)/g) ?? []).length,
      healToDoneMs: tDone - tHealed,
      cutToDoneMs: tDone - tCut,
    });
    expect(stallsSince(b, mark), 'scorer B took over the job A held').toBeGreaterThan(0);
    expect(w.earlyDone).toBe(false);
    expect(c).toEqual({ listed: docs.length, searchable: docs.length, duplicated: 0, lost: 0, wrongText: 0, collectionDocuments: docs.length, manifestDocuments: docs.length });
    expect(table).toEqual({ live: docs.length, repeated: 0 });
  }, 300_000);

  it('the S3 host slowed by 200 ms per chunk each way during an ingestion', async () => {
    const docs = docsOf(900, 400, 's');
    const w = await ingest('s', docs);
    await indexedAtLeast(w, 50);
    const stats = async () => {
      const mark = s3Control.output().length;
      s3Control.child.stdin!.write('stats\n');
      const line = await until(async () => /stats (\d+) (\d+)/.exec(s3Control.output().slice(mark)), 10_000, 20);
      return { delayedChunks: Number(line[1]), connections: Number(line[2]) };
    };
    const before = await stats();
    s3Control.child.stdin!.write('delay 200\n');
    const tSlow = Date.now();
    const indexedAtSlow = w.seen.at(-1)?.indexed ?? 0;
    // 15 s of a slow S3, or until the ingestion ends.
    await until(async () => Date.now() - tSlow > 15_000 || w.seen.some((s) => s.state === 'done'), 30_000, 100);
    const indexedWhileSlow = (w.seen.at(-1)?.indexed ?? 0) - indexedAtSlow;
    s3Control.child.stdin!.write('delay 0\n');
    const tFast = Date.now();
    const slowed = await stats();
    await done(w);
    const tDone = Date.now();
    const c = await census(target, 's', docs);
    report('hosts-s3-slow', {
      ...tally(docs.length, c),
      delayPerChunkEachWayMs: 200,
      slowMs: tFast - tSlow,
      chunksDelayed: slowed.delayedChunks - before.delayedChunks,
      indexedBeforeSlow: indexedAtSlow,
      indexedWhileSlow,
      fastToDoneMs: tDone - tFast,
      slowToDoneMs: tDone - tSlow,
    });
    expect(slowed.delayedChunks - before.delayedChunks, 'the slow window met S3 traffic').toBeGreaterThan(0);
    expect(w.earlyDone).toBe(false);
    expect(c).toEqual({ listed: docs.length, searchable: docs.length, duplicated: 0, lost: 0, wrongText: 0, collectionDocuments: docs.length, manifestDocuments: docs.length });
  }, 300_000);

  it('a whole scorer host killed mid-ingestion while searches come: nothing lost, nothing twice, searches answered by the survivor', async () => {
    const a = host('scorer-a');
    const b = procs['scorer-b'];
    const docs = docsOf(1300, 100, 'k').concat(docsOf(0, 300, 'k2'));
    const w = await ingest('k', docs);
    await indexedAtLeast(w, 50);
    const mark = b.output().length;
    let tKill = 0;
    let taken: string | null = null;
    for (let attempt = 0; attempt < 20 && !taken && !w.seen.some((s) => s.state === 'done'); attempt++) {
      taken = await whileAHolds(['index', 'commit'], async () => {
        tKill = Date.now();
        await hosts.kill(a);
      });
      if (!taken) await new Promise((r) => setTimeout(r, 300));
    }
    expect(taken, 'scorer A never held an index or commit job while the ingestion ran').toBeTruthy();
    const searches: SearchOutcome[] = [];
    // Searches until the ingestion is done (bounded), and one after.
    for (let i = 0; i < 30 && !w.seen.some((s) => s.state === 'done' || s.state === 'failed'); i++) searches.push(await searchOnce('q'));
    await done(w);
    const tDone = Date.now();
    // The ingestion can finish before B takes the held job over: a commit from the head commits
    // the batches before it, so B's next commit can make A's held commit unnecessary. B must still
    // take the held job over once its lock lapses (and find it made): wait for that, as the
    // cut-from-Redis case does, instead of assuming it comes before the ingestion's end.
    await until(async () => stallsSince(b, mark) > 0, (LOCK_S + 4 * STALLED_S + 20) * 1000, 100).catch(() => undefined);
    searches.push(await searchOnce('q'));
    const c = await census(target, 'k', docs);
    const table = await liveIdTable(target, 'k');
    const firstAnswer = searches.find((o) => o.kind === 'answered');
    report('hosts-scorer-host-killed', {
      ...tally(docs.length, c, table),
      heldJob: taken,
      searches: { answered: searches.filter((o) => o.kind === 'answered').length, failed: searches.filter((o) => o.kind === 'failed').length, partial: searches.filter((o) => o.kind === 'partial').length },
      stalledJobsTakenByB: stallsSince(b, mark),
      killToFirstAnswerMs: firstAnswer ? firstAnswer.at - tKill : null,
      killToDoneMs: tDone - tKill,
    });
    expect(searches.filter((o) => o.kind === 'partial'), 'a completed answer that differs from the answer before the fault').toEqual([]);
    expect(searches.at(-1)!.kind).toBe('answered');
    expect(stallsSince(b, mark), 'scorer B took over the job A held').toBeGreaterThan(0);
    expect(w.earlyDone).toBe(false);
    expect(c).toEqual({ listed: docs.length, searchable: docs.length, duplicated: 0, lost: 0, wrongText: 0, collectionDocuments: docs.length, manifestDocuments: docs.length });
    expect(table).toEqual({ live: docs.length, repeated: 0 });
  }, 300_000);
});
