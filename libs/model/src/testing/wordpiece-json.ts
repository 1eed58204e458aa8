/** BERT's special tokens, first in the small test vocabularies (ids 0-4). */
export const BERT_SPECIALS = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'] as const;

/**
 * The shape of a Hugging Face BERT (uncased) tokenizer.json over `vocab` (BERT_SPECIALS first):
 * BertNormalizer, BertPreTokenizer, WordPiece, TemplateProcessing; `over` replaces top-level
 * fields (e.g. the padding and truncation a pipeline saved). Test code only.
 */
export function wordPieceTokenizerJson(vocab: readonly string[], over: Record<string, unknown> = {}): Record<string, unknown> {
  const id = Object.fromEntries(vocab.map((t, i) => [t, i])) as Record<string, number>;
  return {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: BERT_SPECIALS.map((content) => ({ id: id[content], content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true })),
    normalizer: { type: 'BertNormalizer', clean_text: true, handle_chinese_chars: true, strip_accents: null, lowercase: true },
    pre_tokenizer: { type: 'BertPreTokenizer' },
    post_processor: {
      type: 'TemplateProcessing',
      single: [{ SpecialToken: { id: '[CLS]', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }, { SpecialToken: { id: '[SEP]', type_id: 0 } }],
      pair: [
        { SpecialToken: { id: '[CLS]', type_id: 0 } },
        { Sequence: { id: 'A', type_id: 0 } },
        { SpecialToken: { id: '[SEP]', type_id: 0 } },
        { Sequence: { id: 'B', type_id: 1 } },
        { SpecialToken: { id: '[SEP]', type_id: 1 } },
      ],
      special_tokens: {
        '[CLS]': { id: '[CLS]', ids: [id['[CLS]']], tokens: ['[CLS]'] },
        '[SEP]': { id: '[SEP]', ids: [id['[SEP]']], tokens: ['[SEP]'] },
      },
    },
    decoder: { type: 'WordPiece', prefix: '##', cleanup: true },
    model: { type: 'WordPiece', unk_token: '[UNK]', continuing_subword_prefix: '##', max_input_chars_per_word: 100, vocab: id },
    ...over,
  };
}
