import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TokenEncoder, type EncodedText } from './token-encoder';
import { ReferenceTokenEncoder } from './testing/token-encoder-reference';
import { writeTinyTransformer } from './testing/tiny-transformer';

/**
 * The encoder's optimised glue (reused buffers, typed loops, the tokenizer's fast paths) returns
 * what the frozen reference implementation (the encoder before issue 29) returns: token ids,
 * weights, lengths bit for bit, vectors and cls within 1e-6 (the L2 norm is now summed in four
 * partial sums, which may move a value by an ulp; none moved on Cranfield: all 1,398 documents
 * with the tiny model, the first 60 with minilm-l6-384).
 */
const bytes = (a: Float32Array | Int32Array | null | undefined) => (a ? Buffer.from(a.buffer, a.byteOffset, a.byteLength) : null);

/** Normalised vectors: the norm's partial sums are added in another order (<= 1 ulp of a double). */
function maxAbsDiff(a: Float32Array, b: Float32Array): number {
  expect(a.length).toBe(b.length);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i]! - b[i]!));
  return m;
}

function expectSame(got: EncodedText[], want: EncodedText[]): void {
  expect(got.length).toBe(want.length);
  for (let i = 0; i < want.length; i++) {
    const g = got[i]!;
    const w = want[i]!;
    expect({ i, length: g.length, truncated: g.truncated }).toEqual({ i, length: w.length, truncated: w.truncated });
    expect(bytes(g.tokenIds)!.equals(bytes(w.tokenIds)!)).toBe(true);
    expect(maxAbsDiff(g.vectors, w.vectors)).toBeLessThanOrEqual(1e-6);
    expect(g.weights === null).toBe(w.weights === null);
    if (w.weights) expect(bytes(g.weights)!.equals(bytes(w.weights)!)).toBe(true);
    expect(g.cls == null).toBe(w.cls == null);
    if (w.cls) expect(maxAbsDiff(g.cls!, w.cls)).toBeLessThanOrEqual(1e-6);
  }
}

// Cranfield records, roughly (the .T/.A/.B/.W markers dropped): real text of real lengths.
const cranfield = resolve(__dirname, '../../../data/cranfield/cran.all.1400');
const corpus = existsSync(cranfield)
  ? readFileSync(cranfield, 'utf8')
      .split(/^\.I /m)
      .slice(1, 121)
      .map((r) => r.replace(/^\.[TABW]$/gm, ' ').replace(/\s+/g, ' ').trim())
  : Array.from({ length: 120 }, (_, i) => `the flow over a flat plate at mach ${i}, with heat transfer (laminar) and shock waves`.repeat(1 + (i % 4)));
const unusual = ['Café naïve Über ﬁne', '東京 flow 流れ', 'tab\tnew\nline\rreturn', 'nul\u0000 zero\u200bwidth \ufffd soft\u00adhyphen', 'ΣΊΣΥΦΟΣ final sigma ς', '\u{1F600} emoji 𝔘'];
// Cut points of the truncated-prefix path: double spaces, tabs and newlines, long words, a long text with few tokens.
const cuts = [
  'flow  over\ta  wing\n'.repeat(60),
  'supersonic'.repeat(40) + ' ' + 'the flow '.repeat(200),
  ' '.repeat(900) + 'flow',
  'a,b;c.'.repeat(150),
  'flow '.repeat(64) + 'x'.repeat(700),
];
const texts = [...corpus, '', '.', ',,, ; !', 'a', 'the boundary layer', ...unusual, ...cuts, 'x '.repeat(3000)];
const queries = ['what is the flow over a wing?', '', ...unusual, 'heat transfer in hypersonic flow', 'shock. wave, boundary; layer', 'a '.repeat(80)];

let root: string;
beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), 'lateral-equiv-'));
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

const models = resolve(__dirname, '../../../.cache/models');
const variants: { name: string; dir: () => string; skip?: boolean }[] = [
  { name: 'tiny transformer, int64', dir: () => (writeTinyTransformer(join(root, 'a'), { seed: 7 }), join(root, 'a')) },
  { name: 'tiny transformer, int32, token weights', dir: () => (writeTinyTransformer(join(root, 'b'), { seed: 8, tokenWeights: true, inputDtype: 'int32' }), join(root, 'b')) },
  { name: 'tiny transformer, normalize false', dir: () => (writeTinyTransformer(join(root, 'c'), { seed: 9, manifest: { normalize: false, clsToken: null } }), join(root, 'c')) },
  ...['glove-ctx-100d', 'minilm-l6-384'].map((m) => ({ name: m, dir: () => join(models, m), skip: !existsSync(join(models, m, 'model.onnx')) })),
];

describe.each(variants)('TokenEncoder equals the reference encoder: $name', ({ dir, skip }) => {
  it.skipIf(skip)('documents and queries, several token budgets', async () => {
    const d = dir();
    const enc = await TokenEncoder.load(d, { executionProvider: 'cpu', intraOpThreads: 1 });
    const ref = await ReferenceTokenEncoder.load(d);
    try {
      const docs = enc.manifest.name.startsWith('minilm') ? texts.slice(0, 16).concat(texts.slice(-17)) : texts;
      for (const tokenBudget of [16_384, 700, 1]) {
        expectSame(await enc.encodeDocuments(docs, { tokenBudget }), await ref.encodeDocuments(docs, { tokenBudget }));
      }
      expectSame(await enc.encodeDocuments(docs, { maxTokens: 9 }), await ref.encodeDocuments(docs, { maxTokens: 9 }));
      expectSame(await enc.encodeQueries(queries), await ref.encodeQueries(queries));
      expectSame(await enc.encodeQueries(queries, { tokenBudget: 40 }), await ref.encodeQueries(queries, { tokenBudget: 40 }));
      // concurrent calls on one encoder each get their own input buffers
      const [x, y, z] = await Promise.all([
        enc.encodeDocuments(docs, { tokenBudget: 700 }),
        enc.encodeDocuments(docs.slice().reverse(), { tokenBudget: 300 }),
        enc.encodeQueries(queries),
      ]);
      expectSame(x, await ref.encodeDocuments(docs, { tokenBudget: 700 }));
      expectSame(y, await ref.encodeDocuments(docs.slice().reverse(), { tokenBudget: 300 }));
      expectSame(z, await ref.encodeQueries(queries));
    } finally {
      await enc.release();
      await ref.release();
    }
  }, 120_000);
});
