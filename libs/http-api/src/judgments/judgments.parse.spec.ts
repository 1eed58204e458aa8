import { describe, expect, it } from 'vitest';
import { ValidationError } from '@lateral/shared';
import { fromTrec, parseJudgments } from './judgments.parse';

const q = (id: string, judgments: { doc: string; grade: number }[]) => ({ id, text: `query ${id}`, judgments });

describe('parseJudgments', () => {
  it('reads a JSON array, {queries}, and NDJSON to the same judged queries', () => {
    const queries = [q('1', [{ doc: 'a', grade: 2 }, { doc: 'b', grade: 0 }]), q('2', [{ doc: 'c', grade: 1 }])];
    expect(parseJudgments(JSON.stringify(queries), 'application/json')).toEqual(queries);
    expect(parseJudgments(JSON.stringify({ queries }), undefined)).toEqual(queries);
    expect(parseJudgments(queries.map((x) => JSON.stringify(x)).join('\n') + '\n', 'application/x-ndjson')).toEqual(queries);
  });

  it('reads TREC qrels with <top> topics or qid<TAB>text lines; negative grades count 0; topics without judgments are left out', () => {
    const qrels = '1 0 d1 2\n1 0 d2 -1\n# comment\n2 Q0 d3 1\n';
    const top = '<top>\n<num>1</num><title>\nwing flutter\n</title>\n</top>\n<top><num>2</num><title>heat transfer</title></top><top><num>3</num><title>unused</title></top>';
    const expected = [
      { id: '1', text: 'wing flutter', judgments: [{ doc: 'd1', grade: 2 }, { doc: 'd2', grade: 0 }] },
      { id: '2', text: 'heat transfer', judgments: [{ doc: 'd3', grade: 1 }] },
    ];
    expect(fromTrec(qrels, top)).toEqual(expected);
    expect(parseJudgments(JSON.stringify({ qrels, topics: '1\twing flutter\n2\theat transfer\n' }), 'application/json')).toEqual(expected);
  });

  it('names the line, the field or the query in its errors', () => {
    const err = (f: () => unknown) => {
      try {
        f();
      } catch (e) {
        expect(e).toBeInstanceOf(ValidationError);
        return e as ValidationError;
      }
      throw new Error('no error');
    };
    expect(err(() => parseJudgments('{"id":"1","text":"x","judgments":[{"doc":"a","grade":1}]}\n{oops', 'application/x-ndjson')).message).toContain('line 2');
    expect(err(() => parseJudgments(JSON.stringify([q('1', [{ doc: 'a', grade: 1.5 }])]), 'application/json')).issues.map((i) => i.field)).toContain('0.judgments.0.grade');
    expect(err(() => parseJudgments(JSON.stringify([q('1', [{ doc: 'a', grade: 1 }]), q('1', [{ doc: 'b', grade: 1 }])]), 'application/json')).message).toContain("'1' appears twice");
    expect(err(() => fromTrec('1 0 d1', '1\tx')).message).toContain('qrels line 1');
    expect(err(() => fromTrec('9 0 d1 1', '1\tx')).message).toContain("'9', which has no topic");
    expect(err(() => parseJudgments('', 'application/json')).message).toContain('empty');
  });
});
