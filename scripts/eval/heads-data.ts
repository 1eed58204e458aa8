/**
 * The judged collections of `npm run eval -- heads` (heads.ts): each dataset's documents and
 * judged queries encoded once per model (cached under .cache/eval-heads/), with MaxSim over every
 * document as the first stage, and several encoded collections as one TokenSource.
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { resolve, basename, join } from 'node:path';
import type { GemmMaxsim } from '@lateral/kernels';
import { TokenEncoder, type EncodedText } from '@lateral/model';
import { rng, shuffled, type TokenSource } from '@lateral/training';
import { loadRetrievalDataset } from '../lib/retrieval-dataset';

const log = (msg: string) => process.stderr.write(`${msg}\n`);

export interface EncodedSet {
  /** documents' token vectors, CSR (offsets docs + 1) */
  all: Float32Array;
  offsets: Uint32Array;
  queries: { vectors: Float32Array; length: number }[];
}

/**
 * Encodes documents and queries once per (texts, model) and keeps them under
 * .cache/eval-heads/<hash>.bin: later runs (other heads, folds, options) skip the encoder, which
 * was minutes of a row on the loaded 2-core machine (MiniLM over 2,000 Vaswani abstracts).
 */
export async function encodeCached(model: string, docs: { text: string }[], queries: { text: string }[], label: string): Promise<EncodedSet & { seconds: number; cached: boolean }> {
  const te = Date.now();
  const h = createHash('sha256').update(model).update('\0');
  for (const x of docs) h.update(x.text).update('\0');
  h.update('\u0001');
  for (const x of queries) h.update(x.text).update('\0');
  const manifest = JSON.parse(readFileSync(resolve('.cache/models', model, 'manifest.json'), 'utf8')) as unknown;
  h.update(JSON.stringify(manifest));
  const dir = resolve('.cache/eval-heads');
  const file = join(dir, `${model}-${h.digest('hex').slice(0, 16)}.bin`);
  if (existsSync(file)) {
    const buf = readFileSync(file);
    const head = buf.readUInt32LE(0);
    const meta = JSON.parse(buf.subarray(4, 4 + head).toString('utf8')) as { docs: number; tokens: number; d: number; qLengths: number[] };
    let at = 4 + head;
    const f32 = (n: number) => {
      const a = new Float32Array(n);
      Buffer.from(a.buffer).set(buf.subarray(at, at + n * 4));
      at += n * 4;
      return a;
    };
    const offsets = new Uint32Array(meta.docs + 1);
    Buffer.from(offsets.buffer).set(buf.subarray(at, at + offsets.byteLength));
    at += offsets.byteLength;
    const all = f32(meta.tokens * meta.d);
    const qs = meta.qLengths.map((len) => ({ vectors: f32(len * meta.d), length: len }));
    log(`  ${label}: encodings read from ${file}`);
    return { all, offsets, queries: qs, seconds: (Date.now() - te) / 1000, cached: true };
  }
  const enc = await TokenEncoder.load(resolve('.cache/models', model), { executionProvider: 'cpu', intraOpThreads: 2 });
  const d = enc.dims;
  const encoded: EncodedText[] = [];
  for (let i = 0; i < docs.length; i += 256) {
    encoded.push(...(await enc.encodeDocuments(docs.slice(i, i + 256).map((x) => x.text))));
    log(`  ${label}: encoded ${encoded.length}/${docs.length} documents`);
  }
  const qEnc = await enc.encodeQueries(queries.map((q) => q.text));
  const offsets = new Uint32Array(docs.length + 1);
  encoded.forEach((e, i) => (offsets[i + 1] = offsets[i] + e.length));
  const all = new Float32Array(offsets[docs.length] * d);
  encoded.forEach((e, i) => all.set(e.vectors.subarray(0, e.length * d), offsets[i] * d));
  const qs = qEnc.map((e) => ({ vectors: e.vectors.slice(0, e.length * d), length: e.length }));
  const meta = Buffer.from(JSON.stringify({ docs: docs.length, tokens: offsets[docs.length], d, qLengths: qs.map((q) => q.length) }));
  const len = Buffer.alloc(4);
  len.writeUInt32LE(meta.length, 0);
  mkdirSync(dir, { recursive: true });
  writeFileSync(file, Buffer.concat([len, meta, Buffer.from(offsets.buffer), Buffer.from(all.buffer, all.byteOffset, all.byteLength), ...qs.map((q) => Buffer.from(q.vectors.buffer, q.vectors.byteOffset, q.vectors.byteLength))]));
  return { all, offsets, queries: qs, seconds: (Date.now() - te) / 1000, cached: false };
}

/** A judged collection, encoded, with MaxSim over all its documents as the first stage. */
export interface Prepared {
  dataset: string;
  model: string;
  docIds: string[];
  documentsInDataset: number;
  queries: { id: string; text: string }[];
  /** qid -> docid -> gain */
  qrels: Map<string, Map<string, number>>;
  enc: EncodedSet;
  d: number;
  /** per query, MaxSim against every document (row order) */
  maxsim: Float32Array[];
  /** per query, every row by MaxSim, best first */
  topRows: number[][];
  /** per query, row -> gain of its judged documents */
  judgedRows: Map<number, number>[];
  encodeSeconds: number;
}

export async function prepareJudged(dir: string, model: string, maxDocs: number, seed: number, gemm: GemmMaxsim): Promise<Prepared> {
  const ds = loadRetrievalDataset(dir);
  const judgedDocs = new Set<string>();
  const queries = ds.queries.filter((q) => [...(ds.qrels.get(q.id)?.values() ?? [])].some((g) => g > 0));
  for (const q of queries) for (const doc of ds.qrels.get(q.id)!.keys()) judgedDocs.add(doc);
  let docs = ds.docs;
  if (maxDocs > 0 && docs.length > maxDocs) {
    const r = rng(seed);
    const others = shuffled(docs.filter((d) => !judgedDocs.has(d.id)), r);
    const keep = new Set([...docs.filter((d) => judgedDocs.has(d.id)).map((d) => d.id), ...others.slice(0, Math.max(0, maxDocs - judgedDocs.size)).map((d) => d.id)]);
    docs = docs.filter((d) => keep.has(d.id));
  }
  const enc = await encodeCached(model, docs, queries, `${basename(dir)} / ${model}`);
  const d = enc.queries[0].vectors.length / enc.queries[0].length;
  const rowOf = new Map(docs.map((x, i) => [x.id, i]));
  const maxsim: Float32Array[] = [];
  for (let i = 0; i < enc.queries.length; i += 16) maxsim.push(...(await gemm.score(enc.queries.slice(i, i + 16), enc.all, enc.offsets, d)));
  const pool = Array.from({ length: docs.length }, (_, i) => i);
  return {
    dataset: basename(dir),
    model,
    docIds: docs.map((x) => x.id),
    documentsInDataset: ds.docs.length,
    queries,
    qrels: ds.qrels,
    enc,
    d,
    maxsim,
    topRows: maxsim.map((s) => pool.slice().sort((a, b) => s[b] - s[a] || a - b)),
    judgedRows: queries.map((q) => {
      const m = new Map<number, number>();
      for (const [doc, g] of ds.qrels.get(q.id)!) if (rowOf.has(doc)) m.set(rowOf.get(doc)!, g);
      return m;
    }),
    encodeSeconds: enc.seconds,
  };
}

/** Several encoded collections as one TokenSource; `base[k]` is the first row of part k. */
export function concatSources(parts: { all: Float32Array; offsets: Uint32Array }[], d: number): { src: TokenSource; base: number[] } {
  const base: number[] = [];
  const partOf: number[] = [];
  let n = 0;
  parts.forEach((p, k) => {
    base.push(n);
    const docs = p.offsets.length - 1;
    for (let i = 0; i < docs; i++) partOf.push(k);
    n += docs;
  });
  return {
    base,
    src: {
      dims: d,
      doc: (i) => {
        const k = partOf[i];
        const p = parts[k];
        const j = i - base[k];
        return { vectors: p.all.subarray(p.offsets[j] * d, p.offsets[j + 1] * d), length: p.offsets[j + 1] - p.offsets[j] };
      },
    },
  };
}
