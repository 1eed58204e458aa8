import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { decodeHalf } from '@lateral/codec';
import type { ModelManifest } from '@lateral/shared';
import { ModelLoadError } from './errors';

/**
 * A model's static input embedding table (manifest `staticEmbeddings`), read into memory: one
 * context-free row of `dims` values per token id. Side-information codecs predict a token's
 * contextual vector from its row.
 */
export interface StaticEmbeddings {
  /** Values per row. */
  readonly dims: number;
  /** Rows in the table (the vocabulary size). */
  readonly rows: number;
  /** The whole table, rows x dims, float32 (fp16 files are widened once at load). */
  readonly table: Float32Array;
  /** tokenIds.length x dims rows of the given token ids, in order (a new array). RangeError for an id outside the table. */
  lookup(tokenIds: ArrayLike<number>): Float32Array;
}

const BYTES = { fp16: 2, fp32: 4 } as const;

/**
 * Reads the table a model manifest declares (pure file reading, no ONNX). Throws ModelLoadError
 * when the manifest declares none, the file is missing, or its size is not a whole number of rows
 * (naming the expected and actual bytes).
 */
export function loadStaticEmbeddings(modelDir: string, manifest: Pick<ModelManifest, 'name' | 'staticEmbeddings'>): StaticEmbeddings {
  const spec = manifest.staticEmbeddings;
  if (!spec) throw new ModelLoadError(`model '${manifest.name}' (${modelDir}) declares no staticEmbeddings in manifest.json`);
  const path = join(modelDir, spec.file);
  let size: number;
  try {
    size = statSync(path).size;
  } catch {
    throw new ModelLoadError(`${path}: static embedding table (manifest staticEmbeddings.file) not found`);
  }
  const rowBytes = spec.dims * BYTES[spec.dtype];
  const vocab = tokenizerVocabularySize(modelDir);
  if (vocab !== null) {
    const expected = vocab * rowBytes;
    if (size !== expected) {
      throw new ModelLoadError(
        `${path}: static embedding table has ${size} bytes, expected ${expected} ` +
          `(${vocab} token ids of tokenizer.json x ${spec.dims} ${spec.dtype} values x ${BYTES[spec.dtype]} bytes)`,
      );
    }
  } else if (size === 0 || size % rowBytes !== 0) {
    const below = Math.floor(size / rowBytes);
    throw new ModelLoadError(
      `${path}: static embedding table has ${size} bytes, expected a whole number of rows of ${spec.dims} ${spec.dtype} values ` +
        `(${rowBytes} bytes each), e.g. ${Math.max(1, below) * rowBytes} or ${(below + 1) * rowBytes}`,
    );
  }
  const bytes = readFileSync(path);
  if (bytes.byteLength !== size) throw new ModelLoadError(`${path}: expected ${size} bytes, read ${bytes.byteLength} (file changed while reading)`);
  // Typed-array views need an aligned offset; a small Buffer may sit anywhere in Node's pool.
  const aligned = bytes.byteOffset % 4 === 0 ? bytes : Uint8Array.from(bytes);
  const table =
    spec.dtype === 'fp32'
      ? new Float32Array(aligned.buffer, aligned.byteOffset, size / 4)
      : decodeHalf(new Uint16Array(aligned.buffer, aligned.byteOffset, size / 2));
  return staticEmbeddingsFromTable(table, spec.dims);
}

/**
 * Number of token ids of the directory's tokenizer.json (1 + the largest id of the model's
 * vocabulary and the added tokens), or null when there is no tokenizer.json or its vocabulary
 * is not in a form read here (then only whole rows are checked).
 */
function tokenizerVocabularySize(modelDir: string): number | null {
  let json: { model?: { vocab?: unknown }; added_tokens?: { id?: unknown }[] };
  try {
    json = JSON.parse(readFileSync(join(modelDir, 'tokenizer.json'), 'utf8'));
  } catch {
    return null;
  }
  const vocab = json.model?.vocab;
  let max = -1;
  if (Array.isArray(vocab)) {
    max = vocab.length - 1; // Unigram: [[piece, score], ...], id = index
  } else if (vocab && typeof vocab === 'object') {
    for (const id of Object.values(vocab)) if (typeof id === 'number' && id > max) max = id;
  } else {
    return null;
  }
  for (const t of json.added_tokens ?? []) if (typeof t.id === 'number' && t.id > max) max = t.id;
  return max >= 0 ? max + 1 : null;
}

/** Wraps an in-memory rows x dims table (tests, and tables built by code). */
export function staticEmbeddingsFromTable(table: Float32Array, dims: number): StaticEmbeddings {
  if (!Number.isInteger(dims) || dims < 1 || table.length % dims !== 0) throw new RangeError(`a table of ${table.length} values is not rows x ${dims}`);
  const rows = table.length / dims;
  return {
    dims,
    rows,
    table,
    lookup(tokenIds: ArrayLike<number>): Float32Array {
      const out = new Float32Array(tokenIds.length * dims);
      for (let i = 0; i < tokenIds.length; i++) {
        const id = tokenIds[i]!;
        if (!(id >= 0 && id < rows) || !Number.isInteger(id)) throw new RangeError(`token id ${id} is outside the static embedding table (${rows} rows)`);
        out.set(table.subarray(id * dims, (id + 1) * dims), i * dims);
      }
      return out;
    },
  };
}
