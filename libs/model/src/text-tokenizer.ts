import { Tokenizer } from '@huggingface/tokenizers';
import type { ModelManifest } from '@lateral/shared';
import { ModelLoadError } from './errors';

export type TextKind = 'query' | 'doc';

/**
 * The tokenizer.json as the encoder uses it: its own `padding` and `truncation` removed (a Hugging
 * Face export often saves a fixed length, e.g. `padding: { strategy: { Fixed: 128 } }`; lengths are
 * the manifest's business), and the Rust defaults filled in where @huggingface/tokenizers would
 * otherwise misread an omitted field (WordPiece's `continuing_subword_prefix` '##' and
 * `max_input_chars_per_word` 100, an empty `added_tokens`). The input object is not modified.
 */
export function prepareTokenizerJson(json: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...json, padding: null, truncation: null };
  if (!Array.isArray(out.added_tokens)) out.added_tokens = [];
  const model = json.model as Record<string, unknown> | null | undefined;
  if (model && typeof model === 'object' && model.type === 'WordPiece') {
    out.model = {
      ...model,
      continuing_subword_prefix: model.continuing_subword_prefix ?? '##',
      max_input_chars_per_word: model.max_input_chars_per_word ?? 100,
    };
  }
  return out;
}

/** Distinct words whose WordPiece split is remembered (cleared when full). */
const WORD_CACHE_SIZE = 200_000;

/**
 * Remembers the WordPiece split of each pre-tokenized word. @huggingface/tokenizers' WordPiece
 * model splits every word on its own (greedy longest match over the word's characters, nothing
 * shared between words) and allocates a string per candidate substring, so a word's split is a
 * pure function of the word: the memo returns exactly what the model would. Only WordPiece is
 * wrapped (other models keep their own behaviour, e.g. BPE has its own cache).
 */
function memoizeWordPiece(tokenizer: Tokenizer): void {
  const model = (tokenizer as unknown as { model?: { config?: { type?: string }; encode?: (tokens: string[]) => string[] } }).model;
  if (!model || model.config?.type !== 'WordPiece' || typeof model.encode !== 'function') return;
  const encode = model.encode.bind(model);
  const cache = new Map<string, string[]>();
  model.encode = (tokens: string[]): string[] => {
    const out: string[] = [];
    for (const word of tokens) {
      let pieces = cache.get(word);
      if (pieces === undefined) {
        pieces = encode([word]);
        if (cache.size >= WORD_CACHE_SIZE) cache.clear();
        cache.set(word, pieces);
      }
      for (let i = 0; i < pieces.length; i++) out.push(pieces[i]!);
    }
    return out;
  };
}

/** Printable ASCII only (U+0020..U+007E): no control, format, CJK, accented or non-space whitespace character. */
const PRINTABLE_ASCII = /^[\x20-\x7e]*$/;

/**
 * A fast path for @huggingface/tokenizers' BertNormalizer on printable-ASCII text, where three of
 * its per-character steps are the identity: `clean_text` (drops control / format / private-use /
 * surrogate characters, maps whitespace to ' ': in U+0020..U+007E only ' ' is whitespace and none
 * is in those classes), `tokenize_chinese_chars` (no CJK character) and `strip_accents` (NFD of
 * ASCII is itself, no combining mark). Any other text takes the library's own code.
 */
function fastPathBertNormalizer(tokenizer: Tokenizer): void {
  type Step = (text: string) => string;
  const n = (tokenizer as unknown as { normalizer?: { config?: { type?: string }; clean_text?: Step; tokenize_chinese_chars?: Step; strip_accents?: Step } | null }).normalizer;
  if (!n || n.config?.type !== 'BertNormalizer') return;
  for (const step of ['clean_text', 'tokenize_chinese_chars', 'strip_accents'] as const) {
    const original = n[step];
    if (typeof original !== 'function') continue;
    const slow = original.bind(n);
    n[step] = (text: string) => (PRINTABLE_ASCII.test(text) ? text : slow(text));
  }
}

/** Printable ASCII, tab, newline and carriage return (which BertNormalizer's clean_text makes spaces). */
const ASCII_TEXT = /^[\t\n\r\x20-\x7e]*$/;

/** 1 for the characters BERT's pre-tokenizer keeps together in printable ASCII: [0-9A-Za-z]. */
const ASCII_WORD_CHAR = (() => {
  const t = new Uint8Array(128);
  for (let c = 0x30; c <= 0x39; c++) t[c] = 1;
  for (let c = 0x41; c <= 0x5a; c++) t[c] = 1;
  for (let c = 0x61; c <= 0x7a; c++) t[c] = 1;
  return t;
})();

/**
 * The content ids of ASCII text (printable, tab, newline, carriage return) for the BERT pipeline
 * (BertNormalizer, BertPreTokenizer, WordPiece), without the library's per-call machinery: on such
 * text with no added token in it (and no added token holding whitespace), @huggingface/tokenizers'
 * `encode` (a) finds no added token to split around, (b) normalises to the text with tab, newline
 * and carriage return made spaces, lowercased when the normaliser lowercases, (c) splits words at
 * spaces and around each other character that is not [0-9A-Za-z] (every other printable ASCII
 * character is in its punctuation class), and (d) maps each word's WordPiece split to ids.
 * This does (b) and (c) in one scan and remembers (d) per word, asking the library itself for a
 * word it has not seen (a word alone tokenizes as it does in a text). Any other text: null, and
 * the caller takes the library's path. Checked against the library by
 * token-encoder-equivalence.spec.ts and text-tokenizer.spec.ts.
 */
class BertAsciiWords {
  private readonly cache = new Map<string, number[]>();
  /** Added token contents as the raw and the lowercased text may hold them. */
  private readonly added: string[];

  private constructor(
    private readonly tokenizer: Tokenizer,
    private readonly lowercase: boolean,
  ) {
    const contents = [...tokenizer.get_added_tokens_decoder().values()].map((t) => t.content).filter((c) => c.length > 0);
    this.added = [...new Set([...contents, ...contents.map((c) => c.toLowerCase())])];
  }

  static of(tokenizer: Tokenizer): BertAsciiWords | null {
    // the tokenizer.json the library was built from (its `tokenizer` field)
    type Part = { type?: string; lowercase?: boolean } | null | undefined;
    const t = tokenizer as unknown as { tokenizer?: { normalizer?: Part; pre_tokenizer?: Part; model?: Part }; remove_space?: boolean; do_lowercase_and_remove_accent?: boolean };
    const json = t.tokenizer;
    if (json?.normalizer?.type !== 'BertNormalizer' || json.pre_tokenizer?.type !== 'BertPreTokenizer' || json.model?.type !== 'WordPiece') return null;
    if (t.remove_space === true || t.do_lowercase_and_remove_accent === true) return null;
    // an added token with whitespace in it could match across a tab or a newline the normaliser made a space
    if ([...tokenizer.get_added_tokens_decoder().values()].some((a) => /\s/.test(a.content))) return null;
    return new BertAsciiWords(tokenizer, json.normalizer.lowercase === true); // the library lowercases only when it says true
  }

  ids(text: string): number[] | null {
    if (!ASCII_TEXT.test(text)) return null;
    const s = this.lowercase ? text.toLowerCase() : text;
    for (const a of this.added) if (text.includes(a) || s.includes(a)) return null;
    const out: number[] = [];
    const n = s.length;
    for (let i = 0; i < n; ) {
      const c = s.charCodeAt(i);
      if (c === 0x20 || c === 0x0a || c === 0x09 || c === 0x0d) {
        i++;
        continue;
      }
      let j = i + 1;
      if (ASCII_WORD_CHAR[c] === 1) while (j < n && ASCII_WORD_CHAR[s.charCodeAt(j)] === 1) j++;
      const word = s.slice(i, j);
      let ids = this.cache.get(word);
      if (ids === undefined) {
        ids = this.tokenizer.encode(word, { add_special_tokens: false }).ids;
        if (this.cache.size >= WORD_CACHE_SIZE) this.cache.clear();
        this.cache.set(word, ids);
      }
      for (let k = 0; k < ids.length; k++) out.push(ids[k]!);
      i = j;
    }
    return out;
  }
}

/** Characters per token assumed when pre-cutting very long texts (real tokenizers average 3-6). */
const CHARS_PER_TOKEN_BOUND = 32;
/**
 * Characters per kept token tokenized first when a text will likely be truncated (English averages
 * 4-6 characters per token); when the cut prefix does not fill the room, the whole text is
 * tokenized as before.
 */
const CHARS_PER_TOKEN_GUESS = 8;

/** One sequence ready for the model: ids including special tokens and query padding. */
export interface TokenizedText {
  ids: Int32Array;
  /** Real tokens (specials included, query [MASK] padding included: it is attended to). */
  length: number;
  /** Content tokens were dropped to fit maxTokens. */
  truncated: boolean;
}

/**
 * Turns text into model input ids as the manifest describes: `[cls] [marker] tokens... [sep]`,
 * truncated to `maxTokens` positions in total, queries padded with [MASK] when
 * `queryPadding = 'mask'`. The word splitting itself is the model's own tokenizer.json, run by
 * @huggingface/tokenizers; its post-processor is bypassed (special tokens come from the manifest,
 * so a BERT-style tokenizer.json does not add a second [CLS]), and so are its own `padding` and
 * `truncation` (an export saved with a fixed length of 128 must not pad or cut our sequences:
 * lengths are the manifest's business).
 */
export class TextTokenizer {
  readonly padId: number;
  readonly maskId: number | null;
  /** Token ids dropped from documents after encoding (manifest.skiplist entries found in the vocabulary). */
  readonly skipIds: ReadonlySet<number>;
  /** Id of manifest.clsToken (always position 0 of a sequence), or null when the manifest has none. */
  readonly clsId: number | null;
  /** One more than the largest token id the tokenizer can produce (added tokens included). */
  readonly vocabSize: number;
  private readonly prefix: Record<TextKind, number[]>;
  private readonly suffix: number[];

  constructor(
    readonly tokenizer: Tokenizer,
    readonly manifest: ModelManifest,
    source = 'tokenizer.json',
  ) {
    const id = (field: string, token: string): number => {
      const v = tokenizer.token_to_id(token);
      if (v === undefined) throw new ModelLoadError(`${source}: manifest field '${field}' names token '${token}', which is not in the vocabulary`);
      return v;
    };
    const optional = (field: string, token: string | null): number[] => (token === null ? [] : [id(field, token)]);
    this.padId = id('padToken', manifest.padToken);
    this.maskId = manifest.queryPadding === 'mask' ? id('maskToken', manifest.maskToken) : null;
    const cls = optional('clsToken', manifest.clsToken);
    this.clsId = cls[0] ?? null;
    this.prefix = {
      query: [...cls, ...optional('queryMarker', manifest.queryMarker)],
      doc: [...cls, ...optional('docMarker', manifest.docMarker)],
    };
    this.suffix = optional('sepToken', manifest.sepToken);
    const skip = new Set<number>();
    for (const t of manifest.skiplist) {
      const v = tokenizer.token_to_id(t);
      if (v !== undefined) skip.add(v);
    }
    this.skipIds = skip;
    let maxId = -1;
    for (const v of tokenizer.get_vocab(true).values()) if (v > maxId) maxId = v;
    this.vocabSize = maxId + 1;
    // A prefix cut at a space tokenizes like the start of the whole text unless an added token
    // (matched verbatim before normalisation) could span the cut.
    this.cutsAtWhitespace = [...tokenizer.get_added_tokens_decoder().values()].every((t) => !/\s/.test(t.content));
  }

  private readonly cutsAtWhitespace: boolean;

  /**
   * The content ids of `text` when it has more than `room` of them (the first `room` + 1 at least
   * are exact), by tokenizing only a prefix of about `room x CHARS_PER_TOKEN_GUESS` characters cut
   * before a space (U+0020 only: a tab or a zero-width character is not a word boundary for every
   * tokenizer): the words before the cut are whole, and normalisers and pre-tokenizers
   * (BERT, whitespace, metaspace, byte-level) split at a space, so their tokens are the whole
   * text's first tokens. null when the text is short or the prefix does not fill the room.
   */
  private truncatedHead(text: string, room: number): number[] | null {
    const want = room * CHARS_PER_TOKEN_GUESS + 16;
    if (!this.cutsAtWhitespace || text.length <= want) return null;
    let cut = want;
    while (cut > 0 && text.charCodeAt(cut) !== 0x20) cut--;
    if (cut === 0) return null;
    const head = this.contentIds(text.slice(0, cut));
    return head.length > room ? head : null;
  }

  static fromJson(json: Record<string, unknown>, manifest: ModelManifest, source = 'tokenizer.json'): TextTokenizer {
    const model = json.model as { unk_token?: string } | undefined;
    let tokenizer: Tokenizer;
    try {
      tokenizer = new Tokenizer(prepareTokenizerJson(json), {
        unk_token: model?.unk_token ?? '[UNK]',
        pad_token: manifest.padToken,
        mask_token: manifest.maskToken,
      });
    } catch (err) {
      throw new ModelLoadError(`${source}: cannot be loaded by @huggingface/tokenizers (${err instanceof Error ? err.message : String(err)})`);
    }
    memoizeWordPiece(tokenizer);
    fastPathBertNormalizer(tokenizer);
    const t = new TextTokenizer(tokenizer, manifest, source);
    t.asciiWords = BertAsciiWords.of(tokenizer);
    return t;
  }

  /** The BERT printable-ASCII path of contentIds (fromJson sets it when the tokenizer is BERT's). */
  private asciiWords: BertAsciiWords | null = null;

  /** Content token ids of `text`, no special tokens. */
  contentIds(text: string): number[] {
    return this.asciiWords?.ids(text) ?? this.tokenizer.encode(text, { add_special_tokens: false }).ids;
  }

  /** Positions taken by special tokens around a `kind` sequence. */
  specialCount(kind: TextKind): number {
    return this.prefix[kind].length + this.suffix.length;
  }

  /**
   * Model input for one text. `maxTokens` bounds the whole sequence (special tokens included);
   * for queries with [MASK] padding the sequence is then padded to `maxTokens`.
   */
  encode(text: string, kind: TextKind, maxTokens: number): TokenizedText {
    const room = Math.max(0, maxTokens - this.specialCount(kind));
    let content: number[] | null = null;
    let cut = false;
    // A huge text (a whole book sent as one document) would block the event loop in one
    // tokenizer call; tokenize a generous prefix first and fall back to the whole text only when
    // the prefix does not fill `room` (e.g. pathological whitespace).
    const prefixChars = Math.max(4096, room * CHARS_PER_TOKEN_BOUND);
    if (text.length > prefixChars) {
      const head = this.contentIds(text.slice(0, prefixChars));
      // the last token may be a word cut in half: require one spare token
      if (head.length > room) {
        content = head;
        cut = true;
      }
    } else {
      // A text the model will truncate anyway: tokenize about as much as it keeps.
      const head = this.truncatedHead(text, room);
      if (head) {
        content = head;
        cut = true;
      }
    }
    content ??= this.contentIds(text);
    const truncated = cut || content.length > room;
    const kept = truncated ? room : content.length;
    const prefix = this.prefix[kind];
    const suffix = this.suffix;
    const len = prefix.length + kept + suffix.length;
    const padded = kind === 'query' && this.maskId !== null ? Math.max(len, maxTokens) : len;
    const ids = new Int32Array(padded);
    let at = 0;
    for (let i = 0; i < prefix.length; i++) ids[at++] = prefix[i]!;
    for (let i = 0; i < kept; i++) ids[at++] = content[i]!;
    for (let i = 0; i < suffix.length; i++) ids[at++] = suffix[i]!;
    if (padded > len) ids.fill(this.maskId!, len);
    return { ids, length: padded, truncated };
  }

  /** Sequence length (special tokens included, no query padding), capped at maxTokens. */
  count(text: string, kind: TextKind, maxTokens = Number.POSITIVE_INFINITY): number {
    return Math.min(this.contentIds(text).length + this.specialCount(kind), maxTokens);
  }

  decode(ids: ArrayLike<number>): string {
    return this.tokenizer.decode(Array.from(ids), { skip_special_tokens: true });
  }
}
