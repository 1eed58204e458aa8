import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Tokenizer } from '@huggingface/tokenizers';
import { describe, expect, it } from 'vitest';
import { ModelManifestSchema, type ModelManifest } from '@lateral/shared';
import { ModelLoadError } from './errors';
import { TextTokenizer, prepareTokenizerJson } from './text-tokenizer';
import { wordPieceTokenizerJson } from './testing/wordpiece-json';

/** A small BERT-uncased style vocabulary: specials first, whole words, then '##' continuations. */
const VOCAB = [
  '[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]',
  'the', 'a', 'of', 'on', 'is', 'was', 'and', 'in', 'at',
  'cafe', 'resume', 'naive', 'un', 'play', 'jump', 'flow', 'air', 'shock', 'wave', 'wing', 'boundary', 'layer', 'turbul',
  '##aff', '##able', '##ing', '##ed', '##s', '##ent', '##ly', '##er',
  '.', ',', '!', '?', ':', '-', "'", '(', ')',
  'over', 'high', 'low', 'speed', 'mach',
];
const ID = Object.fromEntries(VOCAB.map((t, i) => [t, i])) as Record<string, number>;

/** A BERT-uncased tokenizer.json over VOCAB; `over` replaces top-level fields. */
const wordPieceJson = (over: Record<string, unknown> = {}) => wordPieceTokenizerJson(VOCAB, over);

const manifest = (over: Record<string, unknown> = {}): ModelManifest =>
  ModelManifestSchema.parse({ name: 'bert-like', format: 1, dims: 8, maxQueryTokens: 16, maxDocTokens: 512, clsToken: '[CLS]', sepToken: '[SEP]', ...over });

const ids = (...tokens: string[]) =>
  tokens.map((t) => {
    const id = ID[t];
    if (id === undefined) throw new Error(`test vocabulary lacks ${t}`);
    return id;
  });

describe('TextTokenizer with a BERT WordPiece tokenizer.json', () => {
  const tok = TextTokenizer.fromJson(wordPieceJson(), manifest());

  it('lowercases, strips accents, splits punctuation and words into ## subwords', () => {
    expect(tok.contentIds('The Café résumé: UNAFFABLE playing!')).toEqual(
      ids('the', 'cafe', 'resume', ':', 'un', '##aff', '##able', 'play', '##ing', '!'),
    );
    expect(tok.contentIds('Naïve  jumps\tover\nthe wing-flow')).toEqual(ids('naive', 'jump', '##s', 'over', 'the', 'wing', '-', 'flow'));
    // a word with no WordPiece cover is one [UNK], not a run of pieces
    expect(tok.contentIds('xyzzy flow')).toEqual(ids('[UNK]', 'flow'));
  });

  it('puts the manifest [CLS] / [SEP] around the content exactly once (the tokenizer.json post-processor is bypassed)', () => {
    // the tokenizer.json's own TemplateProcessing would add them too ...
    expect(tok.tokenizer.encode('playing').ids).toEqual(ids('[CLS]', 'play', '##ing', '[SEP]'));
    // ... the encoder's sequence has them once, from the manifest
    const doc = tok.encode('The turbulent wave', 'doc', 64);
    expect(Array.from(doc.ids)).toEqual(ids('[CLS]', 'the', 'turbul', '##ent', 'wave', '[SEP]'));
    expect(doc.truncated).toBe(false);
    const q = tok.encode('shock', 'query', 16);
    expect(Array.from(q.ids)).toEqual(ids('[CLS]', 'shock', '[SEP]'));
    expect(tok.count('The turbulent wave', 'doc')).toBe(6);
    // truncation counts pieces, keeps [SEP] last
    const cut = tok.encode('unaffable unaffable', 'doc', 5);
    expect(Array.from(cut.ids)).toEqual(ids('[CLS]', 'un', '##aff', '##able', '[SEP]'));
    expect(cut.truncated).toBe(true);
    expect(tok.clsId).toBe(ID['[CLS]']);
    expect(tok.vocabSize).toBe(VOCAB.length);
    expect(tok.decode(tok.contentIds('The unaffable cafe'))).toBe('the unaffable cafe');
  });

  it('pads queries with [MASK] and names a manifest token missing from the WordPiece vocabulary', () => {
    const t = TextTokenizer.fromJson(wordPieceJson(), manifest({ queryPadding: 'mask', maxQueryTokens: 6 }));
    expect(Array.from(t.encode('Playing', 'query', 6).ids)).toEqual(ids('[CLS]', 'play', '##ing', '[SEP]', '[MASK]', '[MASK]'));
    expect(() => TextTokenizer.fromJson(wordPieceJson(), manifest({ queryMarker: '[unused0]' }), 'bert/tokenizer.json')).toThrow(ModelLoadError);
    expect(() => TextTokenizer.fromJson(wordPieceJson(), manifest({ queryMarker: '[unused0]' }), 'bert/tokenizer.json')).toThrow(
      /bert\/tokenizer\.json: manifest field 'queryMarker' names token '\[unused0\]'/,
    );
  });

  it("fills in WordPiece's '##' continuation prefix when the tokenizer.json omits it", () => {
    const json = wordPieceJson();
    const { continuing_subword_prefix: _, max_input_chars_per_word: __, ...model } = json.model as Record<string, unknown>;
    const t = TextTokenizer.fromJson({ ...json, model }, manifest());
    expect(t.contentIds('playing')).toEqual(ids('play', '##ing'));
  });
});

describe("the tokenizer.json's own padding and truncation", () => {
  // How Hugging Face saves a tokenizer that was used with padding='max_length', max_length=128.
  const fixed128 = wordPieceJson({
    padding: { strategy: { Fixed: 128 }, direction: 'Right', pad_to_multiple_of: null, pad_id: 0, pad_type_id: 0, pad_token: '[PAD]' },
    truncation: { direction: 'Right', max_length: 128, strategy: 'LongestFirst', stride: 0 },
  });
  const tok = TextTokenizer.fromJson(fixed128, manifest());
  const words = (n: number) => Array.from({ length: n }, (_, i) => (i % 2 ? 'flow' : 'air')).join(' ');

  it('never pads: content ids have the natural length', () => {
    expect(tok.contentIds('shock wave')).toEqual(ids('shock', 'wave'));
    expect(tok.encode('shock wave', 'doc', 512).length).toBe(4);
    expect(tok.count('shock wave', 'doc')).toBe(4);
  });

  it('never truncates at its max_length: only maxTokens cuts', () => {
    expect(tok.contentIds(words(300))).toHaveLength(300);
    expect(tok.count(words(300), 'doc')).toBe(302);
    const long = tok.encode(words(300), 'doc', 200);
    expect(long.length).toBe(200);
    expect(long.truncated).toBe(true);
    expect(long.ids[0]).toBe(ID['[CLS]']);
    expect(long.ids[199]).toBe(ID['[SEP]']);
    const fits = tok.encode(words(150), 'doc', 512);
    expect(fits.length).toBe(152);
    expect(fits.truncated).toBe(false);
  });

  it('prepareTokenizerJson drops them from a copy, leaving the parsed tokenizer.json as it was', () => {
    const copy = prepareTokenizerJson(fixed128);
    expect(copy.padding).toBeNull();
    expect(copy.truncation).toBeNull();
    expect(fixed128.padding).not.toBeNull();
    expect((fixed128.truncation as { max_length: number }).max_length).toBe(128);
  });
});

describe('the BERT ASCII path of contentIds', () => {
  const dir = join(__dirname, '../../../.cache/models/minilm-l6-384');
  const cranfield = join(__dirname, '../../../data/cranfield/cran.all.1400');
  it.skipIf(!existsSync(join(dir, 'tokenizer.json')) || !existsSync(cranfield))('gives the library own ids: minilm-l6-384 over Cranfield and edge texts', () => {
    const json = JSON.parse(readFileSync(join(dir, 'tokenizer.json'), 'utf8')) as Record<string, unknown>;
    const manifest = ModelManifestSchema.parse(JSON.parse(readFileSync(join(dir, 'manifest.json'), 'utf8')));
    const fast = TextTokenizer.fromJson(json, manifest);
    const library = new Tokenizer(prepareTokenizerJson(json), { unk_token: '[UNK]', pad_token: manifest.padToken, mask_token: manifest.maskToken });
    const texts = [
      ...readFileSync(cranfield, 'utf8').split(/^\.I /m).slice(1, 400),
      'tab\there\r\nnew line\n[CLS] [cls] [MaSk]', "Don't stop-believing! 3.14e10 #tag @user ~`|\\^_{}", '   lead  trail   ', 'UPPER lower MiXeD',
      'x'.repeat(150) + ' ok', '', ' ', '\n\n', 'a\u000bb\u000cc', 'Café naïve', '東京 flow',
    ];
    for (const t of texts) expect({ t, ids: fast.contentIds(t) }).toEqual({ t, ids: library.encode(t, { add_special_tokens: false }).ids });
  });
});
