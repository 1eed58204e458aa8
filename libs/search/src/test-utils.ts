import { CodecSettingsSchema, mulberry32 } from '@lateral/shared';
import { createCodec, readSegment, writeSegment } from '@lateral/codec';
import { searchSegment, type SearchSegment } from './types';

/** Deterministic test data: mulberry32, so failures reproduce from the seed alone. */
export const rng = mulberry32;

/** A small collection of documents: token ids, unit token vectors, pooled vectors, metadata. */
export interface Corpus {
  dims: number;
  docIds: string[];
  lengths: number[];
  tokenIds: Int32Array;
  /** T x dims, unit rows */
  vectors: Float32Array;
  /** documents x dims, unit rows (normalised mean) */
  docVectors: Float32Array;
  metadata: (Record<string, unknown> | null)[];
}

export interface CorpusOptions {
  documents: number;
  dims: number;
  minLen?: number;
  maxLen?: number;
  /** distinct token ids; ids are drawn Zipf-like so some repeat within documents */
  vocab?: number;
  /** the vectors cluster around this many directions (so an IVF has structure) */
  clusters?: number;
}

export function unitRows(x: Float32Array, rows: number, d: number): Float32Array {
  for (let i = 0; i < rows; i++) {
    let s = 0;
    for (let k = 0; k < d; k++) s += x[i * d + k] ** 2;
    const inv = s > 0 ? 1 / Math.sqrt(s) : 0;
    for (let k = 0; k < d; k++) x[i * d + k] *= inv;
  }
  return x;
}

export function randomUnit(r: () => number, rows: number, d: number): Float32Array {
  const x = new Float32Array(rows * d);
  for (let i = 0; i < x.length; i++) x[i] = r() * 2 - 1;
  return unitRows(x, rows, d);
}

export function makeCorpus(seed: number, opts: CorpusOptions): Corpus {
  const r = rng(seed);
  const { documents, dims } = opts;
  const minLen = opts.minLen ?? 1;
  const maxLen = opts.maxLen ?? 12;
  const vocab = opts.vocab ?? 40;
  const clusters = opts.clusters ?? 6;
  const centers = randomUnit(r, clusters, dims);
  const lengths = Array.from({ length: documents }, () => minLen + Math.floor(r() * (maxLen - minLen + 1)));
  const T = lengths.reduce((a, b) => a + b, 0);
  const tokenIds = new Int32Array(T);
  const vectors = new Float32Array(T * dims);
  for (let t = 0; t < T; t++) {
    tokenIds[t] = 100 + Math.floor(vocab * r() * r()); // skewed: low ids frequent
    const c = tokenIds[t] % clusters;
    for (let k = 0; k < dims; k++) vectors[t * dims + k] = centers[c * dims + k] + 0.6 * (r() * 2 - 1);
  }
  unitRows(vectors, T, dims);
  const docVectors = new Float32Array(documents * dims);
  let row = 0;
  lengths.forEach((m, i) => {
    for (let j = 0; j < m; j++, row++) for (let k = 0; k < dims; k++) docVectors[i * dims + k] += vectors[row * dims + k];
  });
  unitRows(docVectors, documents, dims);
  const metadata = lengths.map((m, i) =>
    i % 7 === 3 ? null : { n: i, len: m, year: 1990 + (i % 30), tag: ['a', 'b', 'c'][i % 3], date: `20${String(10 + (i % 15))}-0${1 + (i % 9)}-1${i % 10}` },
  );
  return { dims, docIds: lengths.map((_, i) => `d${i}`), lengths, tokenIds, vectors, docVectors, metadata };
}

/** The corpus restricted to some documents (in order). */
export function subCorpus(c: Corpus, keep: (doc: number) => boolean): Corpus {
  const d = c.dims;
  const docs = c.lengths.map((_, i) => i).filter(keep);
  const starts = [0];
  c.lengths.forEach((m, i) => starts.push(starts[i] + m));
  const tokenIds: number[] = [];
  const vectors: number[] = [];
  const docVectors: number[] = [];
  for (const i of docs) {
    for (let t = starts[i]; t < starts[i + 1]; t++) {
      tokenIds.push(c.tokenIds[t]);
      for (let k = 0; k < d; k++) vectors.push(c.vectors[t * d + k]);
    }
    for (let k = 0; k < d; k++) docVectors.push(c.docVectors[i * d + k]);
  }
  return {
    dims: d,
    docIds: docs.map((i) => c.docIds[i]),
    lengths: docs.map((i) => c.lengths[i]),
    tokenIds: Int32Array.from(tokenIds),
    vectors: Float32Array.from(vectors),
    docVectors: Float32Array.from(docVectors),
    metadata: docs.map((i) => c.metadata[i]),
  };
}

const fp32 = createCodec(CodecSettingsSchema.parse({ kind: 'fp32' }));

/**
 * Writes documents [cuts[s], cuts[s+1]) of the corpus as real fp32 segments (codec writeSegment,
 * readSegment) and returns their SearchSegments with docBase = cuts[s].
 */
export function segmentsOf(c: Corpus, cuts: number[] = [0, c.lengths.length]): SearchSegment[] {
  const d = c.dims;
  const starts = [0];
  c.lengths.forEach((m, i) => starts.push(starts[i] + m));
  const out: SearchSegment[] = [];
  for (let s = 0; s + 1 < cuts.length; s++) {
    const a = cuts[s], b = cuts[s + 1];
    const tokenOffsets = new Uint32Array(b - a + 1);
    for (let i = a; i < b; i++) tokenOffsets[i - a + 1] = tokenOffsets[i - a] + c.lengths[i];
    const bytes = writeSegment(
      {
        docIds: c.docIds.slice(a, b),
        tokenOffsets,
        tokenIds: c.tokenIds.slice(starts[a], starts[b]),
        vectors: c.vectors.slice(starts[a] * d, starts[b] * d),
        dims: d,
        docVectors: c.docVectors.slice(a * d, b * d),
        metadata: c.metadata.slice(a, b),
      },
      fp32,
    );
    out.push(searchSegment(readSegment(bytes, `seg-${s}`), a));
  }
  return out;
}

/** Random cut points: 0 = c0 < c1 < ... < documents, `parts` segments (some of one document). */
export function randomCuts(r: () => number, documents: number, parts: number): number[] {
  const inner = new Set<number>();
  while (inner.size < Math.min(parts - 1, documents - 1)) inner.add(1 + Math.floor(r() * (documents - 1)));
  return [0, ...[...inner].sort((x, y) => x - y), documents];
}

/** Small-integer vectors: many exact ties between rows, to check tie rules. */
export function intMatrixCorpus(): { corpus: Corpus; q: Float32Array; n: number } {
  const r = rng(99);
  const dims = 3;
  const lengths = [4, 1, 6, 5, 3];
  const T = lengths.reduce((a, b) => a + b, 0);
  const vectors = Float32Array.from({ length: T * dims }, () => Math.floor(r() * 3) - 1);
  const n = 3;
  const q = Float32Array.from({ length: n * dims }, () => Math.floor(r() * 3) - 1);
  return {
    corpus: {
      dims, lengths, vectors,
      docIds: lengths.map((_, i) => `t${i}`),
      tokenIds: new Int32Array(T),
      docVectors: new Float32Array(lengths.length * dims),
      metadata: lengths.map(() => null),
    },
    q, n,
  };
}
