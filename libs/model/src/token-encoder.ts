import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import type { ModelManifest } from '@lateral/shared';
import { meanPool } from '@lateral/scoring';
import { planBatches } from './batching';
import { BatchSlots } from './batch-slots';
import { readModelDir } from './model-dir';
import { TextTokenizer, type TextKind, type TokenizedText } from './text-tokenizer';
import { appendL2Normalize, reportInference, type ThreadTensor, type ThreadRunResult } from '@lateral/kernels';
import { checkGraph, checkedOutputs, openSession, type EncoderOptions, type SessionRunner } from './encoder-session';

export type { EncoderLogger, EncoderOptions } from './encoder-session';

export interface EncodedText {
  /** Ids of the kept tokens (documents: skiplist tokens removed), one per vector. */
  tokenIds: Int32Array;
  /** length x dims, row-major. */
  vectors: Float32Array;
  /** Per-token weights when the model has a token_weights output, else null. */
  weights: Float32Array | null;
  length: number;
  truncated: boolean;
  /**
   * The vector of the clsToken position (sequence position 0), normalised like `vectors`; kept
   * here whatever the skiplist drops. null (or absent, in hand-built values) when the manifest has
   * no clsToken. `pooling: 'cls'` pools it.
   */
  cls?: Float32Array | null;
}

export type Pooling = ModelManifest['pooling'];

/**
 * The single dense vector of one encoded text, L2-normalised (a zero vector stays zero):
 * `mean` = the mean of the kept token vectors (`meanPool` of @lateral/scoring; documents have
 * their skiplist tokens dropped already), `cls` = the vector of the clsToken position
 * (`EncodedText.cls`). Documents and queries must be pooled alike: use the model's
 * `manifest.pooling`, or `TokenEncoder.pool`.
 */
export function poolEncoded(e: EncodedText, dims: number, pooling: Pooling): Float32Array {
  if (pooling === 'mean') return meanPool(e.vectors, e.length, dims, true);
  if (!e.cls) throw new RangeError("pooling 'cls' needs EncodedText.cls, the vector of the clsToken position; this text was encoded without a clsToken");
  if (e.cls.length !== dims) throw new RangeError(`EncodedText.cls has ${e.cls.length} values, expected dims = ${dims}`);
  let n = 0;
  for (let k = 0; k < dims; k++) n += e.cls[k]! * e.cls[k]!;
  const inv = n > 0 ? 1 / Math.sqrt(n) : 0;
  return Float32Array.from(e.cls, (v) => v * inv);
}


export interface EncodeDocumentsOptions {
  /** Cap on the sequence length (special tokens included); never above manifest.maxDocTokens. */
  maxTokens?: number;
  /** Upper bound on batchSize x paddedLength for one session.run. */
  tokenBudget?: number;
}

export const DEFAULT_TOKEN_BUDGET = 16_384;
/** Texts tokenized between yields to the event loop, so BullMQ lock renewal is never starved. */
const TOKENIZE_CHUNK = 64;

const yieldToEventLoop = () => new Promise<void>((r) => setImmediate(r));

/**
 * Batches of one encode call in the session thread at once: one running, one waiting there ready,
 * while this thread packs the one after and copies out the one before.
 */
const PIPELINE_DEPTH = 2;

/**
 * Text -> token vectors with one ONNX Runtime session. Holds the tokenizer, the manifest and the
 * session of one model directory; use `getEncoder` to share one instance per directory per process.
 */
export class TokenEncoder {
  readonly dims: number;
  private released = false;

  private constructor(
    readonly dir: string,
    readonly manifest: ModelManifest,
    readonly tokenizer: TextTokenizer,
    private readonly runner: SessionRunner,
    readonly executionProvider: 'cpu' | 'cuda',
    /** The graph output holding the L2-normalised token vectors (appendL2Normalize), or null: runBatch normalises. */
    private readonly normalizedOutput: string | null = null,
  ) {
    this.dims = manifest.dims;
    // PIPELINE_DEPTH batches per session: with several sessions (EncoderOptions.sessions) each one has its next batch ready
    this.docSlots = new BatchSlots(PIPELINE_DEPTH * runner.parallel);
  }

  static async load(dir: string, opts: EncoderOptions): Promise<TokenEncoder> {
    const abs = resolve(dir);
    const files = readModelDir(abs);
    const { manifest } = files;
    const tokenizer = TextTokenizer.fromJson(files.tokenizerJson, manifest, `${abs}/tokenizer.json`);
    // The token vectors are L2-normalised by ONNX Runtime, in a tail appended to the graph (SIMD on
    // the CPU, on the GPU under CUDA), not by JavaScript on this thread; when the graph cannot take
    // the tail (see appendL2Normalize) or the extended graph does not load, the original graph is
    // loaded and runBatch normalises in JavaScript as before.
    let opened: SessionRunner | null = null;
    let normalizedOutput: string | null = null;
    if (manifest.normalize) {
      const tail = appendL2Normalize(readFileSync(files.modelPath), manifest.outputs.tokenEmbeddings);
      if (tail) {
        try {
          opened = await openSession(tail.bytes, files.modelPath, opts);
          normalizedOutput = tail.output;
        } catch {
          // the original graph below, normalised in JavaScript
        }
      }
    }
    const runner = opened ?? (await openSession(files.modelPath, files.modelPath, opts));
    try {
      checkGraph(abs, manifest, tokenizer, runner, files.modelPath);
    } catch (err) {
      void runner.release();
      throw err;
    }
    const provider = runner.provider;
    opts.logger?.info(
      `loaded model ${manifest.name} from ${abs} (dims ${manifest.dims}, ${provider}${normalizedOutput ? ', normalised in the graph' : ''}${runner.parallel > 1 ? `, ${runner.parallel} sessions in threads of their own` : runner.offThread ? ', session in its own thread' : ''})`,
    );
    return new TokenEncoder(abs, manifest, tokenizer, runner, provider, normalizedOutput);
  }

  /**
   * Sequence length of `text` as the model sees it (special tokens included, before query [MASK]
   * padding and before the document skiplist), capped at `maxTokens` when given.
   */
  countTokens(text: string, kind: 'query' | 'doc', maxTokens?: number): number {
    return this.tokenizer.count(text, kind, maxTokens);
  }

  /**
   * The single dense vector of an encoded query or document as the manifest says (`pooling`:
   * mean of the kept token vectors, or the clsToken vector), L2-normalised. See `poolEncoded`.
   */
  pool(encoded: EncodedText): Float32Array {
    return poolEncoded(encoded, this.dims, this.manifest.pooling);
  }

  /** Document vectors, in input order; skiplist tokens are dropped. */
  async encodeDocuments(texts: string[], opts: EncodeDocumentsOptions = {}): Promise<EncodedText[]> {
    const max = Math.min(opts.maxTokens ?? this.manifest.maxDocTokens, this.manifest.maxDocTokens);
    if (!(max >= 1)) throw new RangeError(`maxTokens must be >= 1, got ${opts.maxTokens}`);
    return this.encode(texts, 'doc', max, opts.tokenBudget ?? DEFAULT_TOKEN_BUDGET);
  }

  /** Query vectors, in input order; [MASK]-padded to maxQueryTokens when the manifest says so. */
  async encodeQueries(texts: string[], opts: { tokenBudget?: number } = {}): Promise<EncodedText[]> {
    return this.encode(texts, 'query', this.manifest.maxQueryTokens, opts.tokenBudget ?? DEFAULT_TOKEN_BUDGET);
  }

  async release(): Promise<void> {
    if (this.released) return;
    this.released = true;
    forgetEncoder(this);
    await this.runner.release();
  }

  private async encode(texts: string[], kind: TextKind, maxTokens: number, tokenBudget: number): Promise<EncodedText[]> {
    if (this.released) throw new Error(`encoder for ${this.dir} has been released`);
    const seqs: TokenizedText[] = new Array(texts.length);
    for (let i = 0; i < texts.length; i++) {
      if (i > 0 && i % TOKENIZE_CHUNK === 0) await yieldToEventLoop();
      seqs[i] = this.tokenizer.encode(texts[i]!, kind, maxTokens);
    }
    const results: EncodedText[] = new Array(texts.length);
    const batches = planBatches(seqs.map((s) => s.length), tokenBudget);
    if (!this.runner.offThread) {
      for (const batch of batches) {
        const out = await this.runBatch(batch.map((i) => seqs[i]!), kind);
        batch.forEach((i, j) => (results[i] = out[j]!));
        await yieldToEventLoop();
      }
      return results;
    }
    // Session in its own thread: up to PIPELINE_DEPTH batches posted at once. Each runBatch packs
    // and posts its batch at once and copies its output out when it comes back, so this thread
    // packs batch k+1 and copies out batch k-1 while batch k runs there. Document encodings share
    // the PIPELINE_DEPTH slots with each other, oldest call first (./batch-slots.ts), so that a
    // second encode job's batches wait in line behind the first one's instead of taking turns
    // with them; queries post at once.
    if (kind === 'doc') return this.encodeInLine(seqs, batches, results);
    const pending: Promise<void>[] = [];
    try {
      for (const batch of batches) {
        const done = this.runBatch(batch.map((i) => seqs[i]!), kind).then((out) => batch.forEach((i, j) => (results[i] = out[j]!)));
        done.catch(() => undefined); // awaited below; never an unhandled rejection meanwhile
        pending.push(done);
        if (pending.length >= PIPELINE_DEPTH * this.runner.parallel) await pending.shift();
      }
      while (pending.length > 0) await pending.shift();
    } catch (err) {
      await Promise.allSettled(pending);
      throw err;
    }
    return results;
  }

  /** Session batch slots shared by this encoder's document encodings, oldest call first. */
  private readonly docSlots: BatchSlots;

  /** The documents' batches through the shared slots (see encode); a failed batch stops the call's later ones. */
  private async encodeInLine(seqs: TokenizedText[], batches: number[][], results: EncodedText[]): Promise<EncodedText[]> {
    const call = this.docSlots.enter();
    const pending: Promise<void>[] = [];
    let failed = false;
    try {
      for (const batch of batches) {
        await this.docSlots.acquire(call);
        if (failed) {
          this.docSlots.release();
          break;
        }
        const done = this.runBatch(batch.map((i) => seqs[i]!), 'doc')
          .then((out) => batch.forEach((i, j) => (results[i] = out[j]!)))
          .finally(() => this.docSlots.release());
        done.catch(() => (failed = true)); // awaited below; never an unhandled rejection meanwhile
        pending.push(done);
      }
    } finally {
      this.docSlots.close(call);
    }
    // every batch settled before the call ends, as in encode: no output lands after a failure is thrown
    const settled = await Promise.allSettled(pending);
    for (const r of settled) if (r.status === 'rejected') throw r.reason;
    return results;
  }

  /**
   * Input buffers (ids, mask) kept across batches and grown to the largest batch seen, instead of
   * two fresh arrays per batch. A set is taken for the duration of one session.run; concurrent
   * encode calls each take their own (the pool holds as many sets as ever ran at once).
   */
  private readonly inputPool: InputBuffers[] = [];
  /** 1 for the token ids dropped from documents (manifest skiplist), indexed by id. */
  private skipTable: Uint8Array | null = null;

  private takeInputs(size: number): InputBuffers {
    const int64 = this.manifest.inputs.dtype === 'int64';
    let buf = this.inputPool.pop();
    if (!buf || buf.capacity < size) {
      // Int32 words over the same memory: ids and mask are small non-negative integers, so an int64
      // element is its low word (little-endian) with a zero high word, written once and never again.
      const capacity = Math.max(size, buf?.capacity ?? 0);
      const make = () => (int64 ? new BigInt64Array(capacity) : new Int32Array(capacity));
      const ids = make();
      const mask = make();
      // token type ids: zeros, never written (one set per buffer set: its buffers cross to the session thread together)
      const types = this.manifest.inputs.tokenTypeIds !== null ? make() : null;
      buf = { capacity, ids, mask, types, ids32: new Int32Array(ids.buffer), mask32: new Int32Array(mask.buffer) };
    }
    return buf;
  }

  /** A buffer set back from a run (the session thread hands its buffers back in the result's feeds), for the next batch. */
  private returnInputs(buf: InputBuffers, back: Record<string, ThreadTensor>): void {
    const m = this.manifest.inputs;
    const whole = <T extends BigInt64Array | Int32Array>(name: string | null, old: T | null): T | null => {
      if (name === null || old === null) return old;
      const d = back[name]?.data;
      if (!d || d.buffer.byteLength === 0) return null;
      return (old instanceof BigInt64Array ? new BigInt64Array(d.buffer) : new Int32Array(d.buffer)) as T;
    };
    const ids = whole(m.inputIds, buf.ids);
    const mask = m.attentionMask === null ? buf.mask : whole(m.attentionMask, buf.mask);
    const types = whole(m.tokenTypeIds, buf.types);
    if (!ids || !mask || (m.tokenTypeIds !== null && !types) || ids.buffer.byteLength === 0 || mask.buffer.byteLength === 0) return; // lost: a new set is made
    this.inputPool.push({ capacity: buf.capacity, ids, mask, types, ids32: new Int32Array(ids.buffer), mask32: new Int32Array(mask.buffer) });
  }

  private skipLookup(): Uint8Array {
    if (!this.skipTable) {
      // One entry per token id the tokenizer can produce: a read past the end of a typed array
      // would leave V8's fast path.
      let max = this.tokenizer.vocabSize - 1;
      for (const id of this.tokenizer.skipIds) if (id > max) max = id;
      this.skipTable = new Uint8Array(max + 1);
      for (const id of this.tokenizer.skipIds) this.skipTable[id] = 1;
    }
    return this.skipTable;
  }

  private async runBatch(seqs: TokenizedText[], kind: TextKind): Promise<EncodedText[]> {
    const m = this.manifest;
    const batch = seqs.length;
    let seqLen = 1;
    for (let b = 0; b < batch; b++) if (seqs[b]!.length > seqLen) seqLen = seqs[b]!.length;
    const size = batch * seqLen;
    const int64 = m.inputs.dtype === 'int64';
    const buf = this.takeInputs(size);
    const pad = this.tokenizer.padId;
    // int64: element i is word 2i (low) of the Int32 view; word 2i+1 (high) is always 0.
    const ids32 = buf.ids32;
    const mask32 = buf.mask32;
    const step = int64 ? 2 : 1;
    for (let b = 0; b < batch; b++) {
      const s = seqs[b]!;
      const sIds = s.ids;
      const len = s.length;
      let w = b * seqLen * step;
      for (let t = 0; t < len; t++, w += step) {
        ids32[w] = sIds[t]!;
        mask32[w] = 1;
      }
      for (let t = len; t < seqLen; t++, w += step) {
        ids32[w] = pad;
        mask32[w] = 0;
      }
    }
    const dims = [batch, seqLen];
    const feeds: Record<string, ThreadTensor> = { [m.inputs.inputIds]: { type: m.inputs.dtype, data: buf.ids.subarray(0, size), dims } };
    // The mask buffer goes with the batch even when the graph takes none (it is part of the set that comes back).
    if (m.inputs.attentionMask !== null) feeds[m.inputs.attentionMask] = { type: m.inputs.dtype, data: buf.mask.subarray(0, size), dims };
    // one segment per sequence: BERT's token type 0 everywhere
    if (m.inputs.tokenTypeIds !== null) feeds[m.inputs.tokenTypeIds] = { type: m.inputs.dtype, data: buf.types!.subarray(0, size), dims };
    const embName = this.normalizedOutput ?? m.outputs.tokenEmbeddings;
    const fetch = [embName, ...(m.outputs.tokenWeights ? [m.outputs.tokenWeights] : [])];
    let ran: ThreadRunResult;
    try {
      ran = await this.runner.run(feeds, fetch);
    } catch (err) {
      if (!this.runner.offThread) this.inputPool.push(buf);
      throw err;
    }
    if (this.runner.offThread) this.returnInputs(buf, ran.feeds);
    else this.inputPool.push(buf);
    const out = ran.outputs;
    reportInference({ graph: m.name, ms: ran.end - ran.start, batch, tokens: size });

    const { data, weights } = checkedOutputs(out, embName, m, batch, seqLen, this.dir);
    const d = m.dims;
    const normalize = m.normalize && this.normalizedOutput === null;
    const skip = kind === 'doc' && this.tokenizer.skipIds.size > 0 ? this.skipLookup() : null;
    const hasCls = this.tokenizer.clsId !== null;
    const results: EncodedText[] = new Array(batch);
    for (let b = 0; b < batch; b++) {
      const s = seqs[b]!;
      const sIds = s.ids;
      const len = s.length;
      let kept = len;
      if (skip) for (let t = 0; t < len; t++) kept -= skip[sIds[t]!]!;
      const vectors = new Float32Array(kept * d);
      const tokenIds = new Int32Array(kept);
      const w = weights ? new Float32Array(kept) : null;
      const base = b * seqLen;
      if (normalize) {
        for (let t = 0, r = 0; t < len; t++) {
          const id = sIds[t]!;
          if (skip && skip[id] === 1) continue;
          tokenIds[r] = id;
          if (w) w[r] = weights![base + t]!;
          copyRow(data, (base + t) * d, d, true, vectors, r * d);
          r++;
        }
      } else {
        // Rows ready as they are: each run of kept tokens is one copy (memcpy).
        let r = 0;
        let from = 0;
        for (let t = 0; t <= len; t++) {
          if (t < len && !(skip && skip[sIds[t]!] === 1)) continue;
          if (t > from) {
            vectors.set(data.subarray((base + from) * d, (base + t) * d), r * d);
            for (let u = from; u < t; u++, r++) {
              tokenIds[r] = sIds[u]!;
              if (w) w[r] = weights![base + u]!;
            }
          }
          from = t + 1;
        }
      }
      let cls: Float32Array | null = null;
      if (hasCls) copyRow(data, base * d, d, normalize, (cls = new Float32Array(d)), 0); // clsToken is always position 0
      results[b] = { tokenIds, vectors, weights: w, length: kept, truncated: s.truncated, cls };
    }
    return results;
  }
}

interface InputBuffers {
  capacity: number;
  ids: BigInt64Array | Int32Array;
  mask: BigInt64Array | Int32Array;
  types: BigInt64Array | Int32Array | null;
  ids32: Int32Array;
  mask32: Int32Array;
}

/**
 * Copies the output row at `src` (`d` values) into `dst` at `at`, L2-normalised when `normalize`
 * (the squared norm summed in double precision, each value scaled by 1 / sqrt of it; a zero row
 * stays zero).
 */
function copyRow(data: Float32Array, src: number, d: number, normalize: boolean, dst: Float32Array, at: number): void {
  if (!normalize) {
    dst.set(data.subarray(src, src + d), at);
    return;
  }
  // Four partial sums break the chain of dependent additions (~1.4x faster). A float32 squared is
  // exact in a double, so only the order of the additions differs from one running sum: at most
  // an ulp of the double norm, which the float32 results almost never show (none on the test
  // corpora; the equivalence spec allows 1e-6).
  let n0 = 0;
  let n1 = 0;
  let n2 = 0;
  let n3 = 0;
  let k = 0;
  for (const end = d - 3; k < end; k += 4) {
    const x0 = data[src + k]!;
    const x1 = data[src + k + 1]!;
    const x2 = data[src + k + 2]!;
    const x3 = data[src + k + 3]!;
    n0 += x0 * x0;
    n1 += x1 * x1;
    n2 += x2 * x2;
    n3 += x3 * x3;
  }
  for (; k < d; k++) n0 += data[src + k]! * data[src + k]!;
  const n = n0 + n1 + (n2 + n3);
  const inv = n > 0 ? 1 / Math.sqrt(n) : 0;
  for (let k = 0; k < d; k++) dst[at + k] = data[src + k]! * inv;
}

const encoders = new Map<string, Promise<TokenEncoder>>();
/** Resolved entries of `encoders`, so release() can forget its own entry synchronously. */
const loaded = new Map<string, TokenEncoder>();

/**
 * The process-wide encoder of a model directory: loaded lazily on first use, once; concurrent
 * callers share the same promise. Options of the first call win. A failed load is forgotten so a
 * later call can try again; so is a released encoder.
 */
export function getEncoder(dir: string, opts: EncoderOptions): Promise<TokenEncoder> {
  const key = resolve(dir);
  let p = encoders.get(key);
  if (!p) {
    const created = TokenEncoder.load(key, opts);
    p = created;
    encoders.set(key, created);
    created.then(
      (enc) => {
        if (encoders.get(key) === created) loaded.set(key, enc);
      },
      () => {
        if (encoders.get(key) === created) encoders.delete(key);
      },
    );
  }
  return p;
}

function forgetEncoder(enc: TokenEncoder): void {
  if (loaded.get(enc.dir) === enc) {
    loaded.delete(enc.dir);
    encoders.delete(enc.dir);
  }
}
