import { describe, expect, it } from 'vitest';
import { batchDocumentInfo, prepareDocuments, type DocumentTokenizer } from './document-info';

describe('prepareDocuments / batchDocumentInfo', () => {
  // a word is one token; sequences add 2 special tokens
  const enc: DocumentTokenizer = {
    countTokens: (text: string, _kind: 'doc', max?: number) => Math.min(text.split(/\s+/).filter(Boolean).length + 2, max ?? Infinity),
    tokenizer: { contentIds: (text: string) => text.split(/\s+/).filter(Boolean).map((w) => w.length), specialCount: () => 2 },
  };
  const long = Array.from({ length: 20 }, (_, i) => `w${i}`).join(' ');
  const docs = [{ id: 'short', text: 'a b c', metadata: { k: 1 } }, { id: 'long', text: long }];

  it('without passages every document is encoded whole; truncated ones get their original length', () => {
    const p = prepareDocuments(docs, { maxDocTokens: 10 }, enc);
    expect(p.ids).toEqual(['short', 'long']);
    const info = batchDocumentInfo('b1', p, [{ length: 5, truncated: false }, { length: 10, truncated: true }] as never, enc);
    expect(info).toEqual({
      batchId: 'b1',
      documents: [
        { id: 'short', line: 0, tokens: 5, truncated: false },
        { id: 'long', line: 1, tokens: 10, truncated: true, originalTokens: 22 },
      ],
    });
  });

  it('with passages a long document becomes windows of maxDocTokens with the overlap, carrying the parent metadata and range', () => {
    const p = prepareDocuments([...docs, { id: 'long2', text: long, metadata: { k: 2 } }], { maxDocTokens: 10, passages: { overlap: 2 } }, enc);
    // room 8 content tokens, overlap 2: 20 words -> [0,8) [6,14) [12,20)
    expect(p.ids).toEqual(['short', 'long#0', 'long#1', 'long#2', 'long2#0', 'long2#1', 'long2#2']);
    expect(p.texts[2].split(' ')).toEqual(['w6', 'w7', 'w8', 'w9', 'w10', 'w11', 'w12', 'w13']);
    expect(p.metadata).toEqual([{ k: 1 }, null, null, null, { k: 2 }, { k: 2 }, { k: 2 }]);
    expect(p.info[3]).toEqual({ id: 'long#2', line: 1, originalTokens: 22, parent: 'long', passage: 2, start: long.indexOf('w12'), end: long.length });
    expect(long.slice(p.info[3].start, p.info[3].end)).toBe(p.texts[3]);
  });
});
