import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, type Server } from '../apps/all-in-one/src/server';
import { testConfig, until } from './helpers';

/**
 * Two sets of documented examples run against a live server, read from the documents themselves
 * so that they cannot drift:
 *
 * 1. The README's quick start (every ```bash block under "## Quick start"), run by bash itself
 *    with curl and jq, as a user pasting them in one shell at the repository root would: the
 *    first block must be `npm start` (the test's own server stands in for it), `API=` is pointed
 *    at that server, and the steps' answers are checked from their output and from the service.
 *
 * 2. Every command of the API reference's main block (docs/api.md, the ```bash block under
 *    "## Collections, ingestion, re-rank and search") runs against a live server, in order, as a
 * user pasting them would: `$API` is the server's URL, the placeholder ids `ing-…` and `rr-…` are
 * the ids that the earlier commands answered. The shell is read by a small strict interpreter (no
 * curl needed): quotes, `\` line continuations, comments, `VAR=value`, `printf` piped into curl,
 * and curl's -s, -X, -H, -d and --data-binary @-; anything else fails the test, as does a command
 * without an expectation below or an expectation no command met.
 */

// ---- a strict reader of the API reference's shell --------------------------------------------

interface Command {
  /** The command as written (for messages). */
  source: string;
  /** Pipeline stages, each its words after quote removal and expansion. */
  stages: string[][];
}

/** Splits a bash snippet into commands (newline or `;` separated pipelines) and words. */
function parseShell(src: string, vars: Record<string, string>): Command[] {
  const commands: Command[] = [];
  let stages: string[][] = [];
  let words: string[] = [];
  let word: string | null = null;
  let start = 0;
  const expand = (at: number): { value: string; next: number } => {
    const m = /^\$(?:\{([A-Za-z_]\w*)\}|([A-Za-z_]\w*))/.exec(src.slice(at));
    if (!m) throw new Error(`unsupported $ expansion at ${JSON.stringify(src.slice(at, at + 20))}`);
    const name = m[1] ?? m[2];
    if (!(name in vars)) throw new Error(`unknown variable $${name}`);
    return { value: vars[name], next: at + m[0].length };
  };
  const endWord = () => {
    if (word !== null) words.push(word);
    word = null;
  };
  const endStage = () => {
    endWord();
    if (words.length) stages.push(words);
    words = [];
  };
  const endCommand = (at: number) => {
    endStage();
    if (stages.length) commands.push({ source: src.slice(start, at).trim(), stages });
    stages = [];
    start = at + 1;
  };
  let i = 0;
  while (i < src.length) {
    const c = src[i];
    if (c === '\\' && src[i + 1] === '\n') {
      i += 2;
    } else if (c === '\\') {
      word = (word ?? '') + src[i + 1];
      i += 2;
    } else if (c === "'") {
      const close = src.indexOf("'", i + 1);
      if (close < 0) throw new Error('unterminated single quote');
      word = (word ?? '') + src.slice(i + 1, close);
      i = close + 1;
    } else if (c === '"') {
      word = word ?? '';
      i++;
      while (src[i] !== '"') {
        if (i >= src.length) throw new Error('unterminated double quote');
        if (src[i] === '\\' && '$`"\\\n'.includes(src[i + 1])) {
          if (src[i + 1] !== '\n') word += src[i + 1];
          i += 2;
        } else if (src[i] === '$') {
          const e = expand(i);
          word += e.value;
          i = e.next;
        } else if (src[i] === '`') {
          throw new Error('command substitution is not supported');
        } else word += src[i++];
      }
      i++;
    } else if (c === '$') {
      const e = expand(i);
      word = (word ?? '') + e.value;
      i = e.next;
    } else if (c === '#' && word === null) {
      while (i < src.length && src[i] !== '\n') i++;
      if (!words.length && !stages.length) start = i + 1;
    } else if (c === '\n' || c === ';') {
      endCommand(i);
      i++;
    } else if (c === '|') {
      if (src[i + 1] === '|') throw new Error('|| is not supported');
      endStage();
      i++;
    } else if (c === '&' || c === '>' || c === '<' || c === '`' || c === '(' || c === ')') {
      throw new Error(`unsupported shell syntax '${c}' in ${JSON.stringify(src.slice(start, i + 20))}`);
    } else if (c === ' ' || c === '\t') {
      endWord();
      i++;
    } else {
      word = (word ?? '') + c;
      i++;
    }
  }
  endCommand(src.length);
  return commands;
}

/** The section `## <title>` of a markdown document (up to the next `## `). */
function section(doc: string, file: string, title: string): string {
  const found = doc.split(/^## /m).find((s) => s.startsWith(`${title}\n`));
  if (!found) throw new Error(`${file} has no "## ${title}" section`);
  return found;
}

/** Every ```bash block of a section, in order. */
function bashBlocks(text: string): string[] {
  return [...text.matchAll(/```bash\n([\s\S]*?)```/g)].map((m) => m[1]);
}

/** The commands of the API reference's main ```bash block (docs/api.md). */
function apiBlock(doc: string): string {
  const [block] = bashBlocks(section(doc, API_DOC, API_SECTION));
  if (!block) throw new Error(`the "## ${API_SECTION}" section of ${API_DOC} has no \`\`\`bash block`);
  return block;
}

/** `printf FORMAT ARGS...`: %s and %% and the escapes \n \t \\, the format reused while arguments remain. */
function printf(args: string[]): string {
  const [format, ...rest] = args;
  const render = (a: string[]) => {
    let k = 0;
    return format.replace(/%%|%s|\\n|\\t|\\\\/g, (t) => (t === '%s' ? (a[k++] ?? '') : t === '%%' ? '%' : t === '\\n' ? '\n' : t === '\\t' ? '\t' : '\\'));
  };
  if (!format.includes('%s') || rest.length === 0) return render(rest);
  let out = '';
  for (let k = 0; k < rest.length; k += (format.match(/%s/g) ?? []).length) out += render(rest.slice(k));
  return out;
}

interface Request {
  method: string;
  url: string;
  headers: Record<string, string>;
  body?: string;
}

/** curl's arguments as a fetch request (curl defaults: GET, POST with data, form content type). */
function curlRequest(args: string[], stdin: string | undefined): Request {
  const headers: Record<string, string> = {};
  let method: string | undefined;
  let url: string | undefined;
  let body: string | undefined;
  for (let k = 0; k < args.length; k++) {
    const a = args[k];
    const value = () => {
      const v = args[++k];
      if (v === undefined) throw new Error(`curl ${a} needs a value`);
      return v;
    };
    if (a === '-s' || a === '--silent') continue;
    else if (a === '-X' || a === '--request') method = value();
    else if (a === '-H' || a === '--header') {
      const h = value();
      const colon = h.indexOf(':');
      headers[h.slice(0, colon).trim().toLowerCase()] = h.slice(colon + 1).trim();
    } else if (a === '-d' || a === '--data' || a === '--data-binary') {
      const v = value();
      if (v === '@-') {
        if (stdin === undefined) throw new Error(`curl ${a} @- without piped input`);
        // -d @file drops newlines; --data-binary keeps the bytes as they are.
        body = a === '--data-binary' ? stdin : stdin.replace(/[\r\n]/g, '');
      } else if (v.startsWith('@')) throw new Error(`curl ${a} ${v}: only @- is supported`);
      else body = v;
    } else if (a.startsWith('-')) throw new Error(`curl option ${a} is not supported by this test`);
    else if (url === undefined) url = a;
    else throw new Error(`curl: a second URL ${a}`);
  }
  if (!url) throw new Error('curl without a URL');
  if (body !== undefined) headers['content-type'] ??= 'application/x-www-form-urlencoded';
  return { method: method ?? (body !== undefined ? 'POST' : 'GET'), url, headers, body };
}

// ---- what each example must answer ----------------------------------------------------------------

type Body = any; // eslint-disable-line @typescript-eslint/no-explicit-any
interface Ctx {
  server: Server;
  model: string;
  limit: number;
  ingestions: string[];
  reranks: string[];
}
interface Expectation {
  name: string;
  method: string;
  path: RegExp;
  /** Checks the answer; may return a replacement answer (e.g. after polling the same command). */
  check(status: number, body: Body, ctx: Ctx, again: () => Promise<{ status: number; body: Body }>): Promise<void> | void;
}

const EXPECTATIONS: Expectation[] = [
  {
    name: 'liveness',
    method: 'GET',
    path: /^\/v1\/health\/live$/,
    check: (status, body) => {
      expect(status).toBe(200);
      expect(body).toEqual({ status: 'ok', uptimeSeconds: expect.any(Number), eventLoopLagMs: expect.any(Number) });
    },
  },
  {
    name: 'readiness',
    method: 'GET',
    path: /^\/v1\/health\/ready$/,
    check: (status, body, ctx) => {
      expect(status).toBe(200);
      expect(body).toMatchObject({ status: 'ok', redis: { ok: true }, s3: { ok: true }, models: { ok: true, default: ctx.model, missing: [] } });
      expect(Object.keys(body.queues)).toEqual(expect.arrayContaining(['encode', 'compress', 'commit', 'rerank']));
    },
  },
  {
    name: 'create a collection',
    method: 'POST',
    path: /^\/v1\/collections$/,
    check: (status, body, ctx) => {
      expect(status, JSON.stringify(body)).toBe(201);
      // the re-index example's collection, created on the IVF path
      if (body.id === 'papers-ivf') return expect(body).toMatchObject({ search: { layout: 'ivf' } });
      // WARP at 4 bits, the default layout
      expect(body).toMatchObject({ id: 'papers', model: ctx.model, maxDocTokens: ctx.limit, codec: { kind: 'fp16' }, search: { layout: 'warp', bits: 4 } });
    },
  },
  {
    name: 'list collections',
    method: 'GET',
    path: /^\/v1\/collections$/,
    check: (status, body) => {
      expect(status).toBe(200);
      const list = Array.isArray(body) ? body : body.collections;
      expect(list.map((c: Body) => c.id)).toContain('papers');
    },
  },
  {
    name: 'describe a collection',
    method: 'GET',
    path: /^\/v1\/collections\/papers$/,
    check: (status, body) => {
      expect(status).toBe(200);
      expect(body).toMatchObject({ id: 'papers', documents: expect.any(Number), tokens: expect.any(Number) });
      expect(body).toHaveProperty('generation');
      expect(body).toHaveProperty('stages');
    },
  },
  {
    name: 'ingest',
    method: 'POST',
    path: /^\/v1\/collections\/papers\/documents$/,
    check: (status, body, ctx) => {
      expect(status, JSON.stringify(body)).toBe(202);
      expect(body.ingestionId).toMatch(/^ing-/);
      expect(body).toMatchObject({ documents: expect.any(Number), batches: 1, status: `/v1/collections/papers/ingestions/${body.ingestionId}` });
      ctx.ingestions.push(body.ingestionId);
    },
  },
  {
    name: 'ingestion status',
    method: 'GET',
    path: /^\/v1\/collections\/papers\/ingestions\/ing-[\w-]+$/,
    check: async (status, body, ctx, again) => {
      expect(status).toBe(200);
      expect(['processing', 'done']).toContain(body.state);
      expect(Object.keys(body.stages)).toEqual(expect.arrayContaining(['accepted', 'encoded', 'compressed', 'indexed', 'failed']));
      // As a user would: run the same command until it says done, then the other ingestions too.
      const last = await until(async () => {
        const r = await again();
        if (r.body.state === 'failed') throw new Error(JSON.stringify(r.body));
        return r.body.state === 'done' ? r.body : null;
      }, 120_000);
      expect(last.stages.failed).toBe(0);
      for (const id of ctx.ingestions) {
        await until(async () => {
          const r = await fetch(`${ctx.server.url}/v1/collections/papers/ingestions/${id}`).then((x) => x.json() as Promise<Body>);
          return r.state === 'done';
        }, 120_000);
      }
    },
  },
  {
    name: 're-rank, waiting',
    method: 'POST',
    path: /^\/v1\/rerank$/,
    check: (status, body, ctx) => {
      expect([200, 202], JSON.stringify(body)).toContain(status);
      expect(body.id).toMatch(/^rr-/);
      ctx.reranks.push(body.id);
    },
  },
  {
    name: 're-rank status',
    method: 'GET',
    path: /^\/v1\/rerank\/rr-[\w-]+$/,
    check: (status, body) => {
      expect(status).toBe(200);
      expect(body.status, JSON.stringify(body)).toBe('completed');
      const [q] = body.result.results;
      expect(q.queryId).toBe('q1');
      expect(q.missing).toEqual(['nope']);
      expect(q.hits.map((h: Body) => h.id).sort()).toEqual(['d1', 'd2', 'd3']);
      for (const h of q.hits) expect(h).toEqual({ id: expect.any(String), score: expect.any(Number) });
      // "supersonic wing flutter" is d1 ("flutter of a swept wing at supersonic speed").
      expect(q.hits[0].id).toBe('d1');
    },
  },
  {
    name: 'search, waiting',
    method: 'POST',
    path: /^\/v1\/search$/,
    check: (status, body) => {
      expect(status, JSON.stringify(body)).toBe(200);
      expect(body.status).toBe('completed');
      const [q] = body.result.results;
      // only d1 carries metadata.year (1962): the filter keeps it alone, and it holds all three words
      expect(q.hits.map((h: Body) => h.id)).toEqual(['d1']);
      expect(q.hits[0].scoredBy).toBe('bm25');
    },
  },
  {
    name: 'read a document back',
    method: 'GET',
    path: /^\/v1\/collections\/papers\/documents\/d1$/,
    check: (status, body) => {
      expect(status, JSON.stringify(body)).toBe(200);
      expect(body).toMatchObject({ id: 'd1', text: 'flutter of a swept wing at supersonic speed', metadata: { year: 1962 }, truncated: false, tokens: expect.any(Number), generation: expect.any(Number) });
      expect(body.segment.batchId).toMatch(/^ing-/);
    },
  },
  {
    name: 'list document ids',
    method: 'GET',
    path: /^\/v1\/collections\/papers\/documents$/,
    check: (status, body) => {
      expect(status, JSON.stringify(body)).toBe(200);
      expect(body.documents).toEqual(['d1', 'd2']);
      expect(body.nextCursor).toEqual(expect.any(String));
    },
  },
  {
    name: 're-compress',
    method: 'POST',
    path: /^\/v1\/collections\/papers\/recompress$/,
    check: (status, body) => {
      expect(status, JSON.stringify(body)).toBe(202);
      expect(body.codecVersion).toBe(2);
    },
  },
  {
    name: 're-index to WARP',
    method: 'POST',
    path: /^\/v1\/collections\/papers-ivf\/reindex$/,
    check: (status, body) => {
      expect(status, JSON.stringify(body)).toBe(202);
      expect(body).toMatchObject({ collection: 'papers-ivf', search: { layout: 'warp', bits: 4 }, status: '/v1/collections/papers-ivf' });
    },
  },
  {
    name: 'delete',
    method: 'DELETE',
    path: /^\/v1\/collections\/papers$/,
    check: (status) => expect(status).toBe(204),
  },
];

// ---- the test ---------------------------------------------------------------------------------------

const API_DOC = 'docs/api.md';
const API_SECTION = 'Collections, ingestion, re-rank and search';
const block = apiBlock(readFileSync(API_DOC, 'utf8'));
// The product default when it is built (what `npm start` serves); otherwise the GloVe fallback.
const MODEL = existsSync(path.resolve('.cache/models/minilm-l6-384/manifest.json')) ? 'minilm-l6-384' : 'glove-ctx-100d';

describe(`the API reference's examples (${API_DOC}), run as written (default model ${MODEL})`, () => {
  let server: Server;
  const config = testConfig({ DEFAULT_MODEL: MODEL });

  beforeAll(async () => {
    server = await startServer(config, { quiet: true });
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('is valid bash', () => {
    const r = spawnSync('bash', ['-n'], { input: block, encoding: 'utf8' });
    if (r.error) return; // no bash: the interpreter below still reads it
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
  });

  it('answers every command with the documented status and shape', async () => {
    const manifest = JSON.parse(readFileSync(path.resolve(config.MODELS_DIR, MODEL, 'manifest.json'), 'utf8')) as { maxDocTokens: number };
    const ctx: Ctx = { server, model: MODEL, limit: manifest.maxDocTokens, ingestions: [], reranks: [] };
    const commands = parseShell(block, { API: server.url });
    // The block sets API itself; the test points it at this server.
    const assignments = commands.filter((c) => c.stages.length === 1 && c.stages[0].length === 1 && /^[A-Za-z_]\w*=/.test(c.stages[0][0]));
    expect(assignments.map((c) => c.stages[0][0])).toEqual(['API=http://127.0.0.1:8080']);
    const met = new Set<string>();
    let ran = 0;
    for (const cmd of commands) {
      if (assignments.includes(cmd)) continue;
      // Placeholders: the ids that the earlier commands answered.
      const stages = cmd.stages.map((words) =>
        words.map((w) => w.replaceAll('ing-…', ctx.ingestions.at(-1) ?? 'ing-…').replaceAll('rr-…', ctx.reranks.at(-1) ?? 'rr-…')),
      );
      let stdin: string | undefined;
      let req: Request | undefined;
      for (const [k, words] of stages.entries()) {
        const [prog, ...args] = words;
        if (prog === 'printf' && k < stages.length - 1) stdin = printf(args);
        else if (prog === 'curl' && k === stages.length - 1) req = curlRequest(args, stdin);
        else throw new Error(`unsupported command ${prog} in: ${cmd.source}`);
      }
      const r = req!;
      expect(r.url.startsWith(server.url), `${cmd.source}: the URL must start with $API`).toBe(true);
      const u = new URL(r.url);
      const exp = EXPECTATIONS.find((e) => e.method === r.method && e.path.test(u.pathname));
      expect(exp, `no expectation for the documented command: ${cmd.source}`).toBeDefined();
      const send = async () => {
        const res = await fetch(r.url, { method: r.method, headers: r.headers, body: r.body });
        const text = await res.text();
        let body: Body = text;
        try {
          body = text ? JSON.parse(text) : null;
        } catch {
          // not JSON: checked as text
        }
        return { status: res.status, body };
      };
      const first = await send();
      try {
        await exp!.check(first.status, first.body, ctx, send);
      } catch (err) {
        throw new Error(`${API_DOC} command (${exp!.name}) answered ${first.status} ${JSON.stringify(first.body).slice(0, 500)}:\n${cmd.source}\n${(err as Error).message}`);
      }
      met.add(exp!.name);
      ran++;
    }
    expect([...met].sort()).toEqual(EXPECTATIONS.map((e) => e.name).sort());
    expect(ran).toBeGreaterThanOrEqual(EXPECTATIONS.length);
  });
});

// ---- the README's quick start, run by bash ---------------------------------------------------------

const QUICK_START_API = 'API=http://127.0.0.1:8080';
const quickStart = bashBlocks(section(readFileSync('README.md', 'utf8'), 'README.md', 'Quick start'));
const has = (prog: string) => spawnSync('bash', ['-c', `command -v ${prog}`]).status === 0;
const TOOLS = ['bash', 'curl', 'jq'].filter((p) => !has(p));

/** Runs a script with bash (asynchronously: the server answering it lives in this process). */
function runBash(script: string, timeoutMs: number): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', ['-c', script], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('error', reject);
    child.on('close', (status) => {
      clearTimeout(timer);
      resolve({ status, stdout, stderr });
    });
  });
}

describe("the README's quick start, run by bash with curl and jq (default model glove-ctx-100d)", () => {
  let server: Server;

  it('has five steps: `npm start`, then blocks that set API once and are valid bash', () => {
    expect(quickStart).toHaveLength(5);
    expect(quickStart[0].trim()).toBe('npm start');
    expect(quickStart.join('').split('\n').filter((l) => l.startsWith('API='))).toEqual([QUICK_START_API]);
    for (const b of quickStart) expect(spawnSync('bash', ['-n'], { input: b, encoding: 'utf8' }).stderr).toBe('');
  });

  describe.skipIf(TOOLS.length > 0)(`runs against a live service${TOOLS.length ? ` (skipped: no ${TOOLS.join(', ')} on PATH)` : ''}`, () => {
    beforeAll(async () => {
      // The plumbing tests' small model (fast on 2 cores); the quick start names no model.
      server = await startServer(testConfig({ DEFAULT_MODEL: 'glove-ctx-100d' }), { quiet: true });
    });
    afterAll(async () => {
      await server?.stop();
    });

    it('answers every step as the README says', async () => {
      // Steps 2-5 in one shell, as pasted one after the other; each step's output is delimited.
      const steps = quickStart.slice(1).map((b, k) => `echo '@@ step ${k + 2}'\n${b.replace(QUICK_START_API, `API=${server.url}`)}`);
      const r = await runBash(`set -euo pipefail\n${steps.join('\n')}`, 15 * 60_000);
      expect(r.status, `the quick start failed (status ${r.status}):\n${r.stdout.slice(-3000)}\n${r.stderr.slice(-3000)}`).toBe(0);
      const out = Object.fromEntries(r.stdout.split(/^@@ step /m).slice(1).map((s) => [Number(s.slice(0, s.indexOf('\n'))), s.slice(s.indexOf('\n') + 1)]));
      const json = (text: string) => JSON.parse(`[${text.replace(/^ingestion .*$/m, '').replace(/}\s*(?=[{[])/g, '},').replace(/]\s*(?=[{[])/g, '],')}]`) as Body[];

      // 2: the collection, the ingestion done, 1,400 documents
      const [created, ingestion, described] = json(out[2]);
      expect(created).toMatchObject({ id: 'cranfield', model: 'glove-ctx-100d', codec: { kind: 'fp16' } });
      expect(out[2]).toMatch(/^ingestion ing-/m);
      expect(ingestion).toMatchObject({ state: 'done', stages: { indexed: 1400, failed: 0 } });
      expect(described).toMatchObject({ documents: 1400, tokens: expect.any(Number), segments: expect.any(Number), bytesPerToken: expect.any(Number) });

      // 3: search hits and the re-rank of the seven candidates, completed
      const [searched, reranked] = json(out[3]);
      expect(searched).toHaveLength(3);
      for (const h of searched) expect(h).toMatchObject({ id: expect.any(String), score: expect.any(Number), scoredBy: expect.any(String) });
      expect(reranked.status).toBe('completed');
      expect(reranked.hits).toHaveLength(3);
      for (const h of reranked.hits) expect(['1', '2', '12', '29', '51', '184', '486']).toContain(h.id);

      // 4: the judgment set, a completed K-NRM run with held-out figures, a re-rank with its artifact
      const [judgments, trained, trainedHits] = json(out[4]);
      expect(judgments).toMatchObject({ judgmentsId: expect.stringMatching(/^js-/), queries: 225 });
      expect(judgments.trainableQueries).toBeGreaterThanOrEqual(10);
      expect(trained).toMatchObject({ status: 'completed', artifact: expect.stringMatching(/^cranfield\.knrm/), heldOut: { ndcg10: expect.any(Number), maxsimNdcg10: expect.any(Number) } });
      expect(trainedHits).toHaveLength(3);

      // 5: re-compressed to EDEN 4-bit (smaller), scored from the codes
      const [recompress, compressed, fromCodes] = json(out[5]);
      expect(recompress).toEqual({ codecVersion: 2 });
      expect(compressed).toMatchObject({ codec: { kind: 'eden', bits: 4 } });
      expect(compressed.bytesPerToken).toBeLessThan(described.bytesPerToken);
      expect(fromCodes.vectors).toEqual(expect.any(String));
      expect(fromCodes.hits).toHaveLength(3);

      const live = await fetch(`${server.url}/v1/collections/cranfield`).then((x) => x.json() as Promise<Body>);
      expect(live).toMatchObject({ documents: 1400, codecVersion: 2, codec: { kind: 'eden', bits: 4 } });
    }, 20 * 60_000);
  });
});
