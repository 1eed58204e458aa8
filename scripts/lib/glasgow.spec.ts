import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { glasgowQueryIds, isJudgmentLine, parseGlasgowRecords, parseJudgments } from './glasgow';
import { loadRetrievalDataset, RetrievalDatasetError } from './retrieval-dataset';

const dirs: string[] = [];
function folder(files: Record<string, string>): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'glasgow-spec-'));
  dirs.push(dir);
  for (const [name, text] of Object.entries(files)) writeFileSync(path.join(dir, name), text);
  return dir;
}
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

describe('scripts/lib/glasgow.ts: records', () => {
  it('splits .I records into fields, tolerates unknown fields, CRLF and text on the marker line', () => {
    const recs = parseGlasgowRecords('.I 001\r\n.T\r\nswept wings\r\n.A\r\nsmith\r\n.X\r\n12 3 4\r\n.W\r\nflutter of\r\nswept wings\r\n.I 2\n.T a title on the marker line\n.K\nkeywords\n');
    expect(recs.map((r) => r.id)).toEqual(['1', '2']);
    expect(recs[0]!.fields.get('T')!.trim()).toBe('swept wings');
    expect(recs[0]!.fields.get('X')!.trim()).toBe('12 3 4');
    expect(recs[0]!.fields.get('W')!.replace(/\s+/g, ' ').trim()).toBe('flutter of swept wings');
    expect(recs[1]!.fields.get('T')!.trim()).toBe('a title on the marker line');
  });

  it('reads judgment lines of 2, 3 and 4 columns with their gains', () => {
    expect(isJudgmentLine('1 184 2 ')).toBe(true);
    expect(isJudgmentLine('1 0 13 1')).toBe(true);
    expect(isJudgmentLine('1')).toBe(false);
    expect(isJudgmentLine('q1 0 d1 1')).toBe(false);
    const three = parseJudgments('1 184 2\r\n1 29 1\n1 30 4\n2 486 -1\n');
    expect(three.judgments).toEqual([
      { qid: '1', docid: '184', gain: 3 },
      { qid: '1', docid: '29', gain: 4 },
      { qid: '1', docid: '30', gain: 1 },
      { qid: '2', docid: '486', gain: 0 },
    ]);
    expect(three.layout).toMatch(/5 - grade/);
    expect(parseJudgments('01 1410 0 0\n01 1572 0 0\n').judgments).toEqual([ // CACM qrels.text
      { qid: '1', docid: '1410', gain: 1 },
      { qid: '1', docid: '1572', gain: 1 },
    ]);
    expect(parseJudgments('1 0 13 1\n1 0 14 0\n1 0 15 2\n').judgments).toEqual([ // TREC / MED.REL
      { qid: '1', docid: '13', gain: 1 },
      { qid: '1', docid: '14', gain: 0 },
      { qid: '1', docid: '15', gain: 2 },
    ]);
    expect(parseJudgments('3 7\n3 7 2\n').judgments).toEqual([{ qid: '3', docid: '7', gain: 3 }]); // the larger gain wins
    expect(() => parseJudgments('1 2\nnot a line\n', 'x.rel')).toThrow(/x\.rel:2: .*2 to 4 numeric columns/);
  });

  it('numbers queries by position when the judgments do (cranqrel), by .I number otherwise', () => {
    const recs = parseGlasgowRecords('.I 001\n.W\na\n.I 002\n.W\nb\n.I 004\n.W\nc\n.I 008\n.W\nd\n');
    const pos = glasgowQueryIds(recs, ['1', '2', '3', '4']);
    expect(pos.numbering).toBe('position');
    expect(pos.ids).toEqual(['1', '2', '3', '4']);
    expect(pos.note).toMatch(/gaps/);
    const num = glasgowQueryIds(recs, ['1', '4', '8']);
    expect(num.numbering).toBe('number');
    expect(num.ids).toEqual(['1', '2', '4', '8']);
  });
});

describe('scripts/lib/retrieval-dataset.ts: Glasgow folders', () => {
  it('loads a Glasgow folder with other file names, extra fields, 2- and 4-column judgments and gaps in the query numbers', () => {
    const dir = folder({
      'corpus.all': '.I 1\n.T\nwing flutter\n.A\njones\n.B\nj. aero 1950\n.W\nflutter of swept wings\n.N\nCA580101 JB\n.I 2\n.T\nboundary layers\n.W\nlaminar boundary layer\n.I 3\n.T\n\n.W\n\n.I 4\n.W\nheat transfer only text\n',
      'questions.qry': '.I 3\n.A\nsomeone\n.W\nflutter of wings?\n.N\n1. x\n.I 7\n.W\nboundary layer\n.I 9\n.T\nheat\n',
      'judgments.rel': '3 1\n3 2 0 0\n07 2\n9 4\n9 99\n12 1\n',
      'README.txt': 'The NEW collection. Records are .I n with fields.\n',
    });
    const ds = loadRetrievalDataset(dir);
    expect(ds.format).toBe('glasgow');
    expect(path.basename(ds.files.docs)).toBe('corpus.all');
    expect(path.basename(ds.files.queries)).toBe('questions.qry');
    expect(path.basename(ds.files.qrels)).toBe('judgments.rel');
    expect(ds.docs).toEqual([
      { id: '1', text: 'wing flutter flutter of swept wings' },
      { id: '2', text: 'boundary layers laminar boundary layer' },
      { id: '3', text: 'record 3 has no text' },
      { id: '4', text: 'heat transfer only text' },
    ]);
    // the judgments use the .I numbers 3, 7, 9 (gaps): no positional renumbering
    expect(ds.queries).toEqual([
      { id: '3', text: 'flutter of wings?' },
      { id: '7', text: 'boundary layer' },
      { id: '9', text: 'heat' },
    ]);
    expect([...ds.qrels.get('3')!]).toEqual([['1', 1], ['2', 1]]);
    expect([...ds.qrels.get('7')!]).toEqual([['2', 1]]);
    expect([...ds.qrels.get('9')!]).toEqual([['4', 1]]);
    expect(ds.notes.join('\n')).toMatch(/record|placeholder/);
    expect(ds.notes.join('\n')).toMatch(/1 name a query not in questions\.qry, 1 a document not in corpus\.all/);
  });

  it('tells documents from queries by size when no name says which, and renumbers by position like cranqrel', () => {
    const dir = folder({
      a: '.I 1\n.W\nwing\n.I 2\n.W\nflow\n.I 3\n.W\nheat\n',
      b: '.I 001\n.W\nwing flow\n.I 004\n.W\nheat\n',
      c: '1 1 1\n2 3 2\n2 2 -1\n',
    });
    const ds = loadRetrievalDataset(dir);
    expect(path.basename(ds.files.docs)).toBe('a');
    expect(path.basename(ds.files.queries)).toBe('b');
    expect(ds.queries.map((q) => q.id)).toEqual(['1', '2']);
    expect(ds.qrels.get('2')).toEqual(new Map([['3', 3], ['2', 0]]));
    expect(ds.notes.join('\n')).toMatch(/by position/);
  });

  it('names the folder and the expected patterns when it is no dataset, or when a role is ambiguous', () => {
    const empty = folder({ 'notes.txt': 'nothing here\n' });
    expect(() => loadRetrievalDataset(empty)).toThrow(RetrievalDatasetError);
    expect(() => loadRetrievalDataset(empty)).toThrow(new RegExp(`${empty}: no retrieval dataset found.*TREC ad hoc.*Glasgow.*\\*qrel\\*.*notes\\.txt \\(other\\)`));
    const noQrels = folder({ 'x.all': '.I 1\n.W\na\n', 'x.qry': '.I 1\n.W\nb\n' });
    expect(() => loadRetrievalDataset(noQrels)).toThrow(/Glasgow format but no file holds the qrels.*2-4 numeric columns/);
    const two = folder({ 'x.all': '.I 1\n.W\na\n', 'x.qry': '.I 1\n.W\nb\n', 'one.rel': '1 1\n', 'two.rel': '1 1\n' });
    expect(() => loadRetrievalDataset(two)).toThrow(/2 files could hold the qrels \(one\.rel, two\.rel.*--qrels FILE/);
    expect(loadRetrievalDataset(two, { qrels: 'two.rel' }).files.qrels).toBe(path.join(two, 'two.rel'));
    expect(() => loadRetrievalDataset(path.join(empty, 'missing'))).toThrow(/cannot be read/);
  });
});
