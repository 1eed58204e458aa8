/**
 * The encoder's batch loop as it was before the glue around session.run was optimised (issue 29),
 * frozen: `token-encoder-equivalence.spec.ts` checks that `TokenEncoder` still returns exactly
 * these vectors. Test code only; not exported from the library.
 */
import { resolve } from 'node:path';
import { ort } from '@lateral/kernels';
import type { ModelManifest } from '@lateral/shared';
import { planBatches } from '../batching';
import { readModelDir } from '../model-dir';
import { Tokenizer } from '@huggingface/tokenizers';
import { TextTokenizer, prepareTokenizerJson, type TextKind, type TokenizedText } from '../text-tokenizer';
import type { EncodedText } from '../token-encoder';
import { checkedOutputs } from '../encoder-session';

const DEFAULT_TOKEN_BUDGET = 16_384;
const TOKENIZE_CHUNK = 64;
const yieldToEventLoop = () => new Promise<void>((r) => setImmediate(r));
/** TextTokenizer.encode as it was before issue 29. */
function referenceTokenize(tok: TextTokenizer, text: string, kind: TextKind, maxTokens: number): TokenizedText {
  const m = tok.manifest;
  const id = (t: string | null) => (t === null ? [] : [tok.tokenizer.token_to_id(t)!]);
  const prefix = [...id(m.clsToken), ...id(kind === 'query' ? m.queryMarker : m.docMarker)];
  const suffix = id(m.sepToken);
  const room = Math.max(0, maxTokens - prefix.length - suffix.length);
  let content: number[] | null = null;
  let cut = false;
  const prefixChars = Math.max(4096, room * 32);
  if (text.length > prefixChars) {
    const head = tok.contentIds(text.slice(0, prefixChars));
    if (head.length > room) {
      content = head;
      cut = true;
    }
  }
  content ??= tok.contentIds(text);
  const truncated = cut || content.length > room;
  const kept = truncated ? content.slice(0, room) : content;
  const seq = [...prefix, ...kept, ...suffix];
  if (kind === 'query' && tok.maskId !== null) while (seq.length < maxTokens) seq.push(tok.maskId);
  const ids = Int32Array.from(seq);
  return { ids, length: ids.length, truncated };
}


/**
 * Text -> token vectors with one ONNX Runtime session. Holds the tokenizer, the manifest and the
 * session of one model directory; use `getEncoder` to share one instance per directory per process.
 */
export class ReferenceTokenEncoder {
  readonly dims: number;
  private released = false;

  private constructor(
    readonly dir: string,
    readonly manifest: ModelManifest,
    readonly tokenizer: TextTokenizer,
    private readonly session: ort.InferenceSession,
    readonly executionProvider: 'cpu' | 'cuda',
  ) {
    this.dims = manifest.dims;
  }

  static async load(dir: string): Promise<ReferenceTokenEncoder> {
    const abs = resolve(dir);
    const files = readModelDir(abs);
    // The tokenizer as TextTokenizer.fromJson built it before issue 29 (no WordPiece memo).
    const json = files.tokenizerJson;
    const unk = (json.model as { unk_token?: string } | undefined)?.unk_token ?? '[UNK]';
    const raw = new Tokenizer(prepareTokenizerJson(json), { unk_token: unk, pad_token: files.manifest.padToken, mask_token: files.manifest.maskToken });
    const tokenizer = new TextTokenizer(raw, files.manifest);
    const session = await ort.InferenceSession.create(files.modelPath, { graphOptimizationLevel: 'all', executionProviders: ['cpu'] });
    return new ReferenceTokenEncoder(abs, files.manifest, tokenizer, session, 'cpu');
  }

  /** Document vectors, in input order; skiplist tokens are dropped. */
  async encodeDocuments(texts: string[], opts: { maxTokens?: number; tokenBudget?: number } = {}): Promise<EncodedText[]> {
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
    await this.session.release();
  }

  private async encode(texts: string[], kind: TextKind, maxTokens: number, tokenBudget: number): Promise<EncodedText[]> {
    if (this.released) throw new Error(`encoder for ${this.dir} has been released`);
    const seqs: TokenizedText[] = new Array(texts.length);
    for (let i = 0; i < texts.length; i++) {
      if (i > 0 && i % TOKENIZE_CHUNK === 0) await yieldToEventLoop();
      seqs[i] = referenceTokenize(this.tokenizer, texts[i]!, kind, maxTokens);
    }
    const results: EncodedText[] = new Array(texts.length);
    for (const batch of planBatches(seqs.map((s) => s.length), tokenBudget)) {
      const out = await this.runBatch(batch.map((i) => seqs[i]!), kind);
      batch.forEach((i, j) => (results[i] = out[j]!));
      await yieldToEventLoop();
    }
    return results;
  }

  private async runBatch(seqs: TokenizedText[], kind: TextKind): Promise<EncodedText[]> {
    const m = this.manifest;
    const batch = seqs.length;
    const seqLen = Math.max(1, ...seqs.map((s) => s.length));
    const int64 = m.inputs.dtype === 'int64';
    const ids = int64 ? new BigInt64Array(batch * seqLen) : new Int32Array(batch * seqLen);
    const mask = int64 ? new BigInt64Array(batch * seqLen) : new Int32Array(batch * seqLen);
    const pad = this.tokenizer.padId;
    for (let b = 0; b < batch; b++) {
      const s = seqs[b]!;
      for (let t = 0; t < seqLen; t++) {
        const real = t < s.length;
        const id = real ? s.ids[t]! : pad;
        if (int64) {
          (ids as BigInt64Array)[b * seqLen + t] = BigInt(id);
          (mask as BigInt64Array)[b * seqLen + t] = real ? 1n : 0n;
        } else {
          (ids as Int32Array)[b * seqLen + t] = id;
          (mask as Int32Array)[b * seqLen + t] = real ? 1 : 0;
        }
      }
    }
    const feeds: Record<string, ort.Tensor> = {
      [m.inputs.inputIds]: new ort.Tensor(m.inputs.dtype, ids, [batch, seqLen]),
    };
    if (m.inputs.attentionMask !== null) feeds[m.inputs.attentionMask] = new ort.Tensor(m.inputs.dtype, mask, [batch, seqLen]);
    if (m.inputs.tokenTypeIds !== null) {
      // one segment per sequence: BERT's token type 0 everywhere
      const zeros = int64 ? new BigInt64Array(batch * seqLen) : new Int32Array(batch * seqLen);
      feeds[m.inputs.tokenTypeIds] = new ort.Tensor(m.inputs.dtype, zeros, [batch, seqLen]);
    }
    const fetch = [m.outputs.tokenEmbeddings, ...(m.outputs.tokenWeights ? [m.outputs.tokenWeights] : [])];
    const out = await this.session.run(feeds, fetch);

    const { data, weights } = checkedOutputs(out, m.outputs.tokenEmbeddings, m, batch, seqLen, this.dir);
    const d = m.dims;
    const skip = kind === 'doc' ? this.tokenizer.skipIds : null;
    /** Copies the output row of (b, t) into `dst` at `at`, L2-normalised when the manifest says so. */
    const copyRow = (b: number, t: number, dst: Float32Array, at: number) => {
      const src = (b * seqLen + t) * d;
      if (m.normalize) {
        let n = 0;
        for (let k = 0; k < d; k++) n += data[src + k]! * data[src + k]!;
        const inv = n > 0 ? 1 / Math.sqrt(n) : 0;
        for (let k = 0; k < d; k++) dst[at + k] = data[src + k]! * inv;
      } else dst.set(data.subarray(src, src + d), at);
    };
    const hasCls = this.tokenizer.clsId !== null;
    const results = seqs.map((s, b): EncodedText => {
      const keep: number[] = [];
      for (let t = 0; t < s.length; t++) if (!skip?.has(s.ids[t]!)) keep.push(t);
      const vectors = new Float32Array(keep.length * d);
      const tokenIds = new Int32Array(keep.length);
      const w = weights ? new Float32Array(keep.length) : null;
      keep.forEach((t, r) => {
        tokenIds[r] = s.ids[t]!;
        if (w) w[r] = weights![b * seqLen + t]!;
        copyRow(b, t, vectors, r * d);
      });
      let cls: Float32Array | null = null;
      if (hasCls) copyRow(b, 0, (cls = new Float32Array(d)), 0); // clsToken is always position 0
      return { tokenIds, vectors, weights: w, length: keep.length, truncated: s.truncated, cls };
    });
    for (const t of Object.values(out)) t.dispose?.();
    return results;
  }
}

