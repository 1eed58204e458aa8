/**
 * Writes Hugging Face `tokenizer.json` documents for word-level vocabularies (the format the Rust
 * `tokenizers` crate and `@huggingface/tokenizers` both read): lowercase normaliser, BERT
 * pre-tokenizer (splits on whitespace and on every punctuation character), WordLevel model.
 */

/** The characters the BERT pre-tokenizer splits off as single tokens (Unicode P plus ASCII symbols). */
export const PUNCTUATION_CLASS = '\\p{P}\\u0021-\\u002F\\u003A-\\u0040\\u005B-\\u0060\\u007B-\\u007E';
const PUNCT_ONLY = new RegExp(`^[${PUNCTUATION_CLASS}]$`, 'u');
const WORD_ONLY = new RegExp(`^[^\\s${PUNCTUATION_CLASS}]+$`, 'u');

/** True when the BERT pre-tokenizer (after lowercasing) yields `token` unchanged as one piece. */
export function isPreTokenizerAtom(token: string): boolean {
  if (token !== token.toLowerCase()) return false;
  return PUNCT_ONLY.test(token) || WORD_ONLY.test(token);
}

/** True for a single punctuation character (skiplist candidates). */
export function isPunctuation(token: string): boolean {
  return PUNCT_ONLY.test(token);
}

export interface WordLevelTokenizerSpec {
  /** Every token, id = position. Special tokens must be included (usually first). */
  vocab: readonly string[];
  /** Tokens matched verbatim before normalisation and never split ([PAD], [CLS], [Q] ...). */
  specialTokens: readonly string[];
  unkToken: string;
}

export interface TokenizerJson {
  version: string;
  model: { type: string; vocab: Record<string, number>; unk_token: string };
  added_tokens: Array<{ id: number; content: string; special: boolean }>;
  [key: string]: unknown;
}

export function makeWordLevelTokenizerJson(spec: WordLevelTokenizerSpec): TokenizerJson {
  const vocab: Record<string, number> = Object.create(null);
  spec.vocab.forEach((token, id) => {
    if (token in vocab) throw new Error(`duplicate token '${token}' at ids ${vocab[token]} and ${id}`);
    vocab[token] = id;
  });
  if (!(spec.unkToken in vocab)) throw new Error(`unk token '${spec.unkToken}' is not in the vocabulary`);
  const added_tokens = spec.specialTokens.map((content) => {
    const id = vocab[content];
    if (id === undefined) throw new Error(`special token '${content}' is not in the vocabulary`);
    return { id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true };
  });
  return {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens,
    normalizer: { type: 'Lowercase' },
    pre_tokenizer: { type: 'BertPreTokenizer' },
    post_processor: null,
    decoder: null,
    model: { type: 'WordLevel', vocab, unk_token: spec.unkToken },
  };
}
