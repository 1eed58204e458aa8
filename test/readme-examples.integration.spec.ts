import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, type Server } from '../apps/all-in-one/src/server';
import { testConfig, until } from './helpers';

/**
 * Every command of the README's API block (the ```bash block under "## API"), taken from
 * README.md itself so that the examples cannot drift, runs against a live server, in order, as a
 * user pasting them would: `$API` is the server's URL, the placeholder ids `ing-…` and `rr-…` are
 * the ids that the earlier commands answered. The shell is read by a small strict interpreter (no
 * curl needed): quotes, `\` line continuations, comments, `VAR=value`, `printf` piped into curl,
 * and curl's -s, -X, -H, -d and --data-binary @-; anything else fails the test, as does a command
 * without an expectation below or an expectation no command met.
 */

// ---- a strict reader of the README's shell -------------------------------------------------------

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

/** The commands of the ```bash block under `## API` (up to the next `## `). */
function readmeApiBlock(readme: string): string {
  const section = readme.split(/^## /m).find((s) => s.startsWith('API\n'));
  if (!section) throw new Error('README.md has no "## API" section');
  const m = /```bash\n([\s\S]*?)```/.exec(section);
  if (!m) throw new Error('the "## API" section has no ```bash block');
  return m[1];
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
      expect(body).toMatchObject({ id: 'papers', model: ctx.model, maxDocTokens: ctx.limit, codec: { kind: 'fp16' } });
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
    name: 'delete',
    method: 'DELETE',
    path: /^\/v1\/collections\/papers$/,
    check: (status) => expect(status).toBe(204),
  },
];

// ---- the test ---------------------------------------------------------------------------------------

const readme = readFileSync('README.md', 'utf8');
const block = readmeApiBlock(readme);
// The product default when it is built (what `npm start` serves); otherwise the GloVe fallback.
const MODEL = existsSync(path.resolve('.cache/models/minilm-l6-384/manifest.json')) ? 'minilm-l6-384' : 'glove-ctx-100d';

describe(`the README's API examples, run as written (default model ${MODEL})`, () => {
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
      expect(exp, `no expectation for the README command: ${cmd.source}`).toBeDefined();
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
        throw new Error(`README command (${exp!.name}) answered ${first.status} ${JSON.stringify(first.body).slice(0, 500)}:\n${cmd.source}\n${(err as Error).message}`);
      }
      met.add(exp!.name);
      ran++;
    }
    expect([...met].sort()).toEqual(EXPECTATIONS.map((e) => e.name).sort());
    expect(ran).toBeGreaterThanOrEqual(EXPECTATIONS.length);
  });
});
