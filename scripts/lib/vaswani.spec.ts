import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parseTrecDocuments, parseTrecTopics } from './vaswani';
import { loadRetrievalDataset } from './retrieval-dataset';

const VASWANI = '../shared/datasets/vaswani';
const CRANFIELD = '../shared/datasets/cranfield';
const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

describe('scripts/lib/vaswani.ts: TREC ad hoc files', () => {
  it('reads <DOC> documents: DOCNO as id, other tags dropped, entities decoded, whitespace collapsed', () => {
    const docs = parseTrecDocuments('<DOC>\n<DOCNO>1</DOCNO>\ncompact memories  have\nflexible capacities\n</DOC>\n<doc><docno> 0042 </docno><TEXT>a &amp; b</TEXT></doc>\n');
    expect(docs).toEqual([
      { id: '1', text: 'compact memories have flexible capacities' },
      { id: '42', text: 'a & b' },
    ]);
    expect(() => parseTrecDocuments('<DOC>text</DOC>', 'd.trec')).toThrow(/d\.trec: a <DOC> without <DOCNO>/);
  });

  it('reads <top> topics: num as id, title as text, desc when there is no title, unclosed fields', () => {
    const topics = parseTrecTopics('<top>\n<num>1</num><title>\nMEASUREMENT OF DIELECTRIC\n</title>\n</top>\n<top>\n<num> Number: 051\n<title> Topic: oil spills\n<desc> Description:\nwhat spills\n</top>\n<top><num>7</num><desc>only a description</desc></top>');
    expect(topics).toEqual([
      { id: '1', text: 'MEASUREMENT OF DIELECTRIC' },
      { id: '51', text: 'oil spills' },
      { id: '7', text: 'only a description' },
    ]);
  });

  it('loads a TREC ad hoc folder found by content (qrels qid 0 docid rel)', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'vaswani-spec-'));
    dirs.push(dir);
    writeFileSync(path.join(dir, 'doc-text.trec'), '<DOC>\n<DOCNO>1</DOCNO>\nmicrowave dielectric\n</DOC>\n<DOC>\n<DOCNO>2</DOCNO>\ntransistor circuits\n</DOC>\n');
    writeFileSync(path.join(dir, 'query-text.trec'), '<top>\n<num>1</num><title>\nDIELECTRIC CONSTANT\n</title>\n</top>\n<top>\n<num>2</num><title>\nCIRCUITS\n</title>\n</top>\n');
    writeFileSync(path.join(dir, 'qrels'), '1 0 1 1\n2 0 2 1\n2 0 1 0\n');
    const ds = loadRetrievalDataset(dir);
    expect(ds.format).toBe('trec');
    expect(ds.docs.map((d) => d.id)).toEqual(['1', '2']);
    expect(ds.queries).toEqual([{ id: '1', text: 'DIELECTRIC CONSTANT' }, { id: '2', text: 'CIRCUITS' }]);
    expect(ds.qrels.get('2')).toEqual(new Map([['2', 1], ['1', 0]]));
    expect(ds.notes[0]).toMatch(/qid 0 docid rel/);
  });

  it.skipIf(!existsSync(VASWANI))('loads ../shared/datasets/vaswani: 11,429 documents, 93 queries, binary judgments', () => {
    const ds = loadRetrievalDataset(VASWANI);
    expect(ds.format).toBe('trec');
    expect(ds.docs).toHaveLength(11_429);
    expect(ds.queries).toHaveLength(93);
    expect(ds.docs[0]).toEqual({ id: '1', text: expect.stringMatching(/^compact memories have flexible capacities a digital data storage/) });
    expect(ds.qrels.get('1')!.get('1239')).toBe(1);
    expect(new Set([...ds.qrels.values()].flatMap((m) => [...m.values()]))).toEqual(new Set([1]));
    expect(ds.qrels.size).toBe(93);
  });

  it.skipIf(!existsSync(CRANFIELD))('loads ../shared/datasets/cranfield as Glasgow: queries by position, gain 5 - grade, -1 -> 0, cranqrel.readme ignored', () => {
    const ds = loadRetrievalDataset(CRANFIELD);
    expect(ds.format).toBe('glasgow');
    expect(path.basename(ds.files.qrels)).toBe('cranqrel');
    expect(ds.docs).toHaveLength(1400);
    expect(ds.queries).toHaveLength(225);
    expect(ds.queries[2]).toEqual({ id: '3', text: expect.stringMatching(/^what problems of heat conduction in composite slabs/) });
    expect(ds.qrels.get('1')!.get('184')).toBe(3);
    expect(ds.qrels.get('1')!.get('486')).toBe(0);
    expect(ds.notes.join('\n')).toMatch(/by position/);
  });
});
