import { mkdtempSync, readFileSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Tokenizer } from '@huggingface/tokenizers';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { ModelManifestSchema } from '@lateral/shared';
import { ModelLoadError, ModelShapeError, TokenEncoder, getEncoder, planBatches, type EncodedText } from './index';
import { writeTinyTransformer } from './testing/tiny-transformer';

const cpu = { executionProvider: 'cpu' as const, intraOpThreads: 1 };
let root: string;
let tinyDir: string;
let enc: TokenEncoder;

function newTinyDir(name: string, opts: Parameters<typeof writeTinyTransformer>[1] = {}): string {
  const dir = join(root, name);
  writeTinyTransformer(dir, opts);
  return dir;
}

function rowNorm(e: EncodedText, r: number, d: number): number {
  let n = 0;
  for (let k = 0; k < d; k++) n += e.vectors[r * d + k]! ** 2;
  return Math.sqrt(n);
}

function maxAbsDiff(a: Float32Array, b: Float32Array): number {
  expect(a.length).toBe(b.length);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i]! - b[i]!));
  return m;
}

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'lateral-model-'));
  tinyDir = newTinyDir('tiny');
  enc = await TokenEncoder.load(tinyDir, cpu);
});

afterAll(async () => {
  await enc?.release();
  rmSync(root, { recursive: true, force: true });
});

describe('tiny transformer model directory', () => {
  it('writes a manifest valid under ModelManifestSchema and a tokenizer.json @huggingface/tokenizers loads', () => {
    const manifest = ModelManifestSchema.parse(JSON.parse(readFileSync(join(tinyDir, 'manifest.json'), 'utf8')));
    expect(manifest.dims).toBe(32);
    const tok = new Tokenizer(JSON.parse(readFileSync(join(tinyDir, 'tokenizer.json'), 'utf8')), { unk_token: '[UNK]' });
    expect(tok.encode('Flow AIR', { add_special_tokens: false }).tokens).toEqual(['flow', 'air']);
  });
});

describe('TextTokenizer', () => {
  it('round-trips text through ids (lowercased, punctuation split, unknown words -> [UNK])', () => {
    const t = enc.tokenizer;
    const ids = t.contentIds('The Boundary layer, over a FLAT plate.');
    // decode skips special tokens, so the unknown "flat" ([UNK]) disappears
    expect(t.decode(ids)).toBe('the boundary layer, over a plate.');
    const unk = t.tokenizer.token_to_id('[UNK]');
    expect(ids.filter((id) => id === unk)).toHaveLength(1); // "flat" is not in the tiny vocabulary
    expect(t.tokenizer.encode('wing-body', { add_special_tokens: false }).tokens).toEqual(['wing', '-', 'body']);
  });

  it('adds [CLS] marker ... [SEP] per manifest and pads queries with [MASK]', () => {
    const t = enc.tokenizer;
    const id = (s: string) => t.tokenizer.token_to_id(s)!;
    const d = t.encode('shock wave', 'doc', 64);
    expect(Array.from(d.ids)).toEqual([id('[CLS]'), id('[D]'), id('shock'), id('wave'), id('[SEP]')]);
    const q = t.encode('shock wave', 'query', 32);
    expect(q.length).toBe(32);
    expect(Array.from(q.ids.slice(0, 5))).toEqual([id('[CLS]'), id('[Q]'), id('shock'), id('wave'), id('[SEP]')]);
    expect(new Set(q.ids.slice(5))).toEqual(new Set([id('[MASK]')]));
  });
});

describe('planBatches', () => {
  it('groups by length under the token budget, covering every index once', () => {
    const lengths = [5, 60, 7, 30, 31, 2, 64, 64, 10];
    const batches = planBatches(lengths, 128);
    expect(batches.flat().sort((a, b) => a - b)).toEqual(lengths.map((_, i) => i));
    for (const b of batches) expect(b.length * Math.max(...b.map((i) => lengths[i]!))).toBeLessThanOrEqual(128);
    expect(planBatches([500], 128)).toEqual([[0]]); // a text longer than the budget still gets a batch
    expect(() => planBatches([1], 0)).toThrow(RangeError);
  });
});

describe('TokenEncoder on the tiny transformer', () => {
  it('truncates documents to min(maxTokens, manifest.maxDocTokens) and counts tokens', async () => {
    const long = Array.from({ length: 100 }, (_, i) => (i % 2 ? 'flow' : 'air')).join(' ');
    const [a, b, c] = await enc.encodeDocuments([long, long, 'air flow'], { maxTokens: 20 });
    expect(a!.length).toBe(20);
    expect(a!.truncated).toBe(true);
    expect(a!.tokenIds[19]).toBe(enc.tokenizer.tokenizer.token_to_id('[SEP]'));
    expect(b!.vectors).toEqual(a!.vectors);
    expect(c!.truncated).toBe(false);
    const [capped] = await enc.encodeDocuments([long], { maxTokens: 10_000 });
    expect(capped!.length).toBe(enc.manifest.maxDocTokens);
    expect(enc.countTokens(long, 'doc')).toBe(103); // 100 words + [CLS] [D] [SEP]
    expect(enc.countTokens(long, 'doc', 20)).toBe(20);
    expect(enc.countTokens('air flow', 'query')).toBe(5);
  });

  it('gives the same vectors for a text alone and padded inside a batch (mask respected)', async () => {
    const short = 'shock wave over the wing';
    const longer = 'laminar and turbulent boundary layer flow over a flat plate at high mach number with heat transfer';
    const [alone] = await enc.encodeDocuments([short]);
    const batched = await enc.encodeDocuments([longer, short, 'cone', longer + ' ' + longer]);
    expect(batched[1]!.length).toBe(alone!.length);
    expect(maxAbsDiff(batched[1]!.vectors, alone!.vectors)).toBeLessThan(1e-5);
    // and results come back in input order whatever the batching
    const split = await enc.encodeDocuments([longer, short, 'cone', longer + ' ' + longer], { tokenBudget: 40 });
    split.forEach((r, i) => expect(maxAbsDiff(r.vectors, batched[i]!.vectors)).toBeLessThan(1e-5));
    const [q1] = await enc.encodeQueries([short]);
    const qs = await enc.encodeQueries([longer, short]);
    expect(maxAbsDiff(qs[1]!.vectors, q1!.vectors)).toBeLessThan(1e-5);
  });

  it('L2-normalises output vectors when manifest.normalize is true', async () => {
    const [d] = await enc.encodeDocuments(['pressure distribution on a cylinder in supersonic flow']);
    for (let r = 0; r < d!.length; r++) expect(rowNorm(d!, r, enc.dims)).toBeCloseTo(1, 5);
  });

  it('drops skiplist tokens from documents but not from queries', async () => {
    const comma = enc.tokenizer.tokenizer.token_to_id(',')!;
    const dot = enc.tokenizer.tokenizer.token_to_id('.')!;
    const [d] = await enc.encodeDocuments(['lift, drag.']);
    expect(Array.from(d!.tokenIds)).not.toContain(comma);
    expect(Array.from(d!.tokenIds)).not.toContain(dot);
    expect(d!.length).toBe(5); // [CLS] [D] lift drag [SEP]
    expect(d!.vectors.length).toBe(5 * enc.dims);
    const [q] = await enc.encodeQueries(['lift, drag.']);
    expect(Array.from(q!.tokenIds)).toContain(comma);
    expect(q!.length).toBe(32);
  });

  it('reads token_weights when the manifest names them', async () => {
    const dir = newTinyDir('weights', { tokenWeights: true });
    const e = await TokenEncoder.load(dir, cpu);
    try {
      const [d] = await e.encodeDocuments(['lift, drag.']);
      expect(d!.weights).not.toBeNull();
      expect(d!.weights!.length).toBe(d!.length);
      for (const w of d!.weights!) expect(Math.abs(w)).toBeLessThanOrEqual(1);
      expect((await enc.encodeDocuments(['lift']))[0]!.weights).toBeNull();
    } finally {
      await e.release();
    }
  });

  it('feeds int32 inputs when manifest.inputs.dtype is int32, with the same vectors', async () => {
    const e = await TokenEncoder.load(newTinyDir('int32', { inputDtype: 'int32' }), cpu);
    try {
      const text = ['shock wave over the wing', 'air'];
      const [a, b] = [await e.encodeDocuments(text), await enc.encodeDocuments(text)];
      a.forEach((r, i) => expect(maxAbsDiff(r.vectors, b[i]!.vectors)).toBeLessThan(1e-6));
    } finally {
      await e.release();
    }
  });

  it('throws ModelShapeError naming both shapes when the manifest lies about dims', async () => {
    const dir = newTinyDir('liar', { manifest: { dims: 100 } });
    const e = await TokenEncoder.load(dir, cpu);
    try {
      const err = await e.encodeDocuments(['air flow']).catch((x: unknown) => x);
      expect(err).toBeInstanceOf(ModelShapeError);
      expect((err as Error).message).toMatch(/'last_hidden_state' has shape \[1,5,32\].*declares dims 100.*\[batch, seq, 100\]/);
    } finally {
      await e.release();
    }
  });

  it('throws ModelLoadError naming the missing file or the bad field', async () => {
    const noTok = newTinyDir('no-tokenizer');
    unlinkSync(join(noTok, 'tokenizer.json'));
    await expect(TokenEncoder.load(noTok, cpu)).rejects.toThrow(ModelLoadError);
    await expect(TokenEncoder.load(noTok, cpu)).rejects.toThrow(/tokenizer\.json/);

    const badManifest = newTinyDir('bad-manifest');
    const m = JSON.parse(readFileSync(join(badManifest, 'manifest.json'), 'utf8'));
    writeFileSync(join(badManifest, 'manifest.json'), JSON.stringify({ ...m, dims: -3 }));
    await expect(TokenEncoder.load(badManifest, cpu)).rejects.toThrow(/manifest\.json.*field 'dims'/);

    const badToken = newTinyDir('bad-token', { manifest: { queryMarker: '[QUERY]' } });
    await expect(TokenEncoder.load(badToken, cpu)).rejects.toThrow(/'queryMarker'.*\[QUERY\]/);

    const badOutput = newTinyDir('bad-output', { manifest: { outputs: { tokenEmbeddings: 'hidden', tokenWeights: null } } });
    await expect(TokenEncoder.load(badOutput, cpu)).rejects.toThrow(/outputs\.tokenEmbeddings.*hidden.*last_hidden_state/);
  });

  it('falls back to CPU with a warning when CUDA is unavailable', async () => {
    const warn = vi.fn();
    const e = await TokenEncoder.load(tinyDir, { executionProvider: 'cuda', logger: { info: () => {}, warn } });
    try {
      if (e.executionProvider === 'cpu') expect(warn).toHaveBeenCalledWith(expect.stringMatching(/falling back to CPU/));
      expect((await e.encodeQueries(['lift']))[0]!.length).toBe(32);
    } finally {
      await e.release();
    }
  });
});

describe('getEncoder', () => {
  it('loads one session per model directory and shares it between concurrent callers', async () => {
    const dir = newTinyDir('shared');
    const spy = vi.spyOn(TokenEncoder, 'load');
    const [a, b] = await Promise.all([getEncoder(dir, cpu), getEncoder(dir + '/', cpu)]);
    const c = await getEncoder(dir, cpu);
    expect(a).toBe(b);
    expect(c).toBe(a);
    expect(spy).toHaveBeenCalledTimes(1);
    await a.release();
    const d = await getEncoder(dir, cpu);
    expect(d).not.toBe(a);
    expect(spy).toHaveBeenCalledTimes(2);
    await d.release();
    spy.mockRestore();
  });

  it('forgets a failed load so a later call can retry', async () => {
    const dir = join(root, 'missing');
    await expect(getEncoder(dir, cpu)).rejects.toThrow(ModelLoadError);
    const fixed = newTinyDir('missing');
    const e = await getEncoder(fixed, cpu);
    expect(e.dims).toBe(32);
    await e.release();
  });
});

describe('long and empty texts', () => {
  it('truncates a huge document without tokenizing all of it, with the same result', async () => {
    const words = Array.from({ length: 200_000 }, (_, i) => (i % 3 ? 'flow' : 'air'));
    const huge = words.join(' ');
    const [a] = await enc.encodeDocuments([huge], { maxTokens: 30 });
    const [b] = await enc.encodeDocuments([words.slice(0, 40).join(' ')], { maxTokens: 30 });
    expect(a!.truncated).toBe(true);
    expect(Array.from(a!.tokenIds)).toEqual(Array.from(b!.tokenIds));
    expect(maxAbsDiff(a!.vectors, b!.vectors)).toBeLessThan(1e-5);
  });

  it('encodes empty and punctuation-only documents', async () => {
    const [e, p] = await enc.encodeDocuments(['', '...']);
    expect(e!.length).toBe(3); // [CLS] [D] [SEP]
    expect(p!.length).toBe(3);
  });
});

describe('where the session runs (EncoderOptions.inferenceThread)', () => {
  it('in its own thread (the default) and on the calling thread give the same vectors; batch buffers are reused', async () => {
    const dir = newTinyDir('threads', { seed: 11, tokenWeights: true });
    const inline = await TokenEncoder.load(dir, { ...cpu, inferenceThread: false });
    const threaded = await TokenEncoder.load(dir, cpu);
    try {
      const texts = Array.from({ length: 90 }, (_, i) => `the flow over a wing ${'at mach three '.repeat(i % 7)}, number ${i}.`);
      for (const tokenBudget of [16_384, 200, 1]) {
        const [a, b] = await Promise.all([inline.encodeDocuments(texts, { tokenBudget }), threaded.encodeDocuments(texts, { tokenBudget })]);
        for (let i = 0; i < texts.length; i++) {
          expect(Array.from(b[i]!.tokenIds)).toEqual(Array.from(a[i]!.tokenIds));
          expect(maxAbsDiff(b[i]!.vectors, a[i]!.vectors)).toBe(0);
          expect(Array.from(b[i]!.weights!)).toEqual(Array.from(a[i]!.weights!));
          expect(maxAbsDiff(b[i]!.cls!, a[i]!.cls!)).toBe(0);
        }
      }
      const [q] = await threaded.encodeQueries(['lift']);
      const [r] = await inline.encodeQueries(['lift']);
      expect(maxAbsDiff(q!.vectors, r!.vectors)).toBe(0);
      // the input buffer sets came back from the thread: at most one per batch in flight at once (2), not one per batch
      const pool = (threaded as unknown as { inputPool: unknown[] }).inputPool;
      expect(pool.length).toBeGreaterThan(0);
      expect(pool.length).toBeLessThanOrEqual(2);
    } finally {
      await inline.release();
      await threaded.release();
    }
  });

  it('several sessions (EncoderOptions.sessions): the same vectors as one, batches spread over every session, side by side', async () => {
    const dir = newTinyDir('threads-pool', { seed: 14, tokenWeights: true });
    const one = await TokenEncoder.load(dir, cpu);
    const logs: string[] = [];
    const two = await TokenEncoder.load(dir, { ...cpu, sessions: 3, logger: { info: (m) => logs.push(m), warn: (m) => logs.push(m) } });
    // every session got the graph with its normalisation tail (the in-memory bytes are copied per session, not moved once)
    expect(logs.join('\n')).toMatch(/normalised in the graph, 3 sessions in threads of their own/);
    try {
      type Run = (feeds: unknown, fetches: readonly string[]) => Promise<unknown>;
      const runner = (two as unknown as { runner: { parallel: number; load: readonly number[]; runners: { run: Run }[] } }).runner;
      expect(runner.parallel).toBe(3);
      // count each session's runs, and the most runs in flight at once over all of them
      const perSession = [0, 0, 0];
      let inFlight = 0;
      let most = 0;
      runner.runners.forEach((r, k) => {
        const run = r.run.bind(r);
        r.run = async (feeds, fetches) => {
          perSession[k]!++;
          most = Math.max(most, ++inFlight);
          try {
            return await run(feeds, fetches);
          } finally {
            inFlight--;
          }
        };
      });
      const texts = Array.from({ length: 120 }, (_, i) => `the flow over a wing ${'at mach three '.repeat(i % 9)}, number ${i}.`);
      const [a, b] = await Promise.all([one.encodeDocuments(texts, { tokenBudget: 96 }), two.encodeDocuments(texts, { tokenBudget: 96 })]);
      for (let i = 0; i < texts.length; i++) {
        expect(Array.from(b[i]!.tokenIds)).toEqual(Array.from(a[i]!.tokenIds));
        expect(maxAbsDiff(b[i]!.vectors, a[i]!.vectors)).toBe(0);
        expect(Array.from(b[i]!.weights!)).toEqual(Array.from(a[i]!.weights!));
      }
      const [q] = await two.encodeQueries(['lift']);
      const [r] = await one.encodeQueries(['lift']);
      expect(maxAbsDiff(q!.vectors, r!.vectors)).toBe(0);
      for (const n of perSession) expect(n).toBeGreaterThan(0);
      expect(most).toBeGreaterThan(1);
      expect(most).toBeLessThanOrEqual(6); // PIPELINE_DEPTH (2) per session
      expect(runner.load).toEqual([0, 0, 0]);
    } finally {
      await one.release();
      await two.release();
    }
    await expect(TokenEncoder.load(dir, { ...cpu, sessions: 0 })).rejects.toThrow(/sessions must be a whole number >= 1, got 0/);
    await expect(TokenEncoder.load(dir, { ...cpu, sessions: 2, inferenceThread: false })).rejects.toThrow(/need the session thread/);
  });

  it('concurrent document calls run their batches oldest call first, with the vectors of a call alone; a query does not wait behind them', async () => {
    const dir = newTinyDir('threads-order', { seed: 13 });
    const e = await TokenEncoder.load(dir, cpu);
    try {
      const vocab = (JSON.parse(readFileSync(join(dir, 'tokenizer.json'), 'utf8')) as { model: { vocab: Record<string, number> } }).model.vocab;
      const textsA = Array.from({ length: 30 }, (_, i) => `cat ${i} ${'lift and drag '.repeat(i % 5)}`);
      const textsB = Array.from({ length: 30 }, (_, i) => `dog ${i} ${'boundary layer '.repeat(i % 4)}`);
      const aloneA = await e.encodeDocuments(textsA, { tokenBudget: 64 });
      const aloneB = await e.encodeDocuments(textsB, { tokenBudget: 64 });
      type Run = (feeds: Record<string, { data: ArrayLike<number | bigint> }>, fetches: readonly string[]) => Promise<unknown>;
      const runner = (e as unknown as { runner: { run: Run } }).runner;
      const run = runner.run.bind(runner);
      const runs: string[] = [];
      const has = (data: ArrayLike<number | bigint>, id: number) => Array.from(data).some((x) => Number(x) === id);
      // which text set each batch the session runs belongs to: A's hold "cat", B's "dog", the query "fox"
      runner.run = (feeds, fetches) => {
        const ids = feeds.input_ids!.data;
        runs.push(has(ids, vocab.cat!) ? 'A' : has(ids, vocab.dog!) ? 'B' : has(ids, vocab.fox!) ? 'q' : '?');
        return run(feeds, fetches);
      };
      const order: string[] = [];
      const a = e.encodeDocuments(textsA, { tokenBudget: 64 }).then((r) => (order.push('A'), r));
      const b = e.encodeDocuments(textsB, { tokenBudget: 64 }).then((r) => (order.push('B'), r));
      const q = e.encodeQueries(['fox']).then(() => order.push('query'));
      const [ra, rb] = await Promise.all([a, b, q]);
      runner.run = run;
      for (let i = 0; i < textsA.length; i++) expect(maxAbsDiff(ra[i]!.vectors, aloneA[i]!.vectors)).toBe(0);
      for (let i = 0; i < textsB.length; i++) expect(maxAbsDiff(rb[i]!.vectors, aloneB[i]!.vectors)).toBe(0);
      const docRuns = runs.filter((r) => r !== 'q');
      expect(docRuns.length).toBeGreaterThan(4);
      // every batch of A ran before any of B (they did not take turns), and the query was not queued behind them
      expect(docRuns.lastIndexOf('A')).toBeLessThan(docRuns.indexOf('B'));
      expect(runs.indexOf('q')).toBeGreaterThanOrEqual(0);
      expect(runs.indexOf('q')).toBeLessThan(3);
      expect(order).toEqual(['query', 'A', 'B']);
    } finally {
      await e.release();
    }
  });

  it('a failed batch fails the call (after the batches in flight settle), and the encoder goes on', async () => {
    const dir = newTinyDir('threads-fail', { seed: 12 });
    const e = await TokenEncoder.load(dir, cpu);
    try {
      const runner = (e as unknown as { runner: { run: (...a: unknown[]) => Promise<unknown> } }).runner;
      const run = runner.run.bind(runner);
      let calls = 0;
      runner.run = (...a: unknown[]) => (++calls === 2 ? Promise.reject(new Error('boom')) : run(...a));
      const texts = Array.from({ length: 40 }, (_, i) => `text number ${i} ${'word '.repeat(i)}`);
      await expect(e.encodeDocuments(texts, { tokenBudget: 64 })).rejects.toThrow('boom');
      expect(calls).toBeGreaterThan(2); // the pipeline had posted more than the failed batch
      runner.run = run;
      expect((await e.encodeDocuments(texts, { tokenBudget: 64 })).length).toBe(40);
    } finally {
      await e.release();
    }
  });
});
