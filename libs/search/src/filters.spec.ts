import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ValidationError } from '@lateral/shared';
import { andMasks, compileFilter, docMask, FilterSchema, parseFilter, parseIsoDate, valuesAt } from './filters';
import { makeCorpus, segmentsOf } from './test-utils';

const docs: (Record<string, unknown> | null)[] = [
  { year: 1999, tag: 'a', tags: ['x', 'y'], date: '2020-01-15', author: { name: 'Ada', born: 1815 }, draft: null, authors: [{ name: 'Ada', role: 'lead' }, { name: 'Bob', role: 'help' }] },
  { year: 2005, tag: 'b', tags: [], date: '2021-06-01T12:00:00Z', author: { name: 'Bob' }, flag: true, authors: [{ name: 'Ada', role: 'help' }] },
  { year: 2010.5, tag: 'c', tags: ['y'], date: '2021-06-01T14:00:00+02:00', score: '7' },
  null,
  { year: '2001', tag: 'a', date: 'not a date' },
];
const ids = ['a0', 'a1', 'a2', 'a3', 'a4'];
const run = (filter: unknown) => docs.map((m, i) => compileFilter(filter)(m, ids[i])).flatMap((ok, i) => (ok ? [i] : []));

describe('filters: conditions', () => {
  it('match value / any / except, on scalars and arrays, strictly typed', () => {
    expect(run({ must: [{ key: 'tag', match: { value: 'a' } }] })).toEqual([0, 4]);
    expect(run({ must: [{ key: 'year', match: { value: 2005 } }] })).toEqual([1]);
    expect(run({ must: [{ key: 'year', match: { value: '2001' } }] })).toEqual([4]);
    expect(run({ must: [{ key: 'flag', match: { value: true } }] })).toEqual([1]);
    expect(run({ must: [{ key: 'tags', match: { value: 'y' } }] })).toEqual([0, 2]);
    expect(run({ must: [{ key: 'tag', match: { any: ['b', 'c'] } }] })).toEqual([1, 2]);
    expect(run({ must: [{ key: 'tag', match: { except: ['a'] } }] })).toEqual([1, 2]);
    expect(run({ must: [{ key: 'tags', match: { except: ['x'] } }] })).toEqual([0, 2]); // some element not excluded
  });

  it('ranges over numbers and over ISO dates (instants; no zone = UTC)', () => {
    expect(run({ must: [{ key: 'year', range: { gte: 2005 } }] })).toEqual([1, 2]);
    expect(run({ must: [{ key: 'year', range: { gt: 1999, lt: 2010.5 } }] })).toEqual([1]);
    expect(run({ must: [{ key: 'year', range: { lte: 2010.5, gt: 2005 } }] })).toEqual([2]);
    expect(run({ must: [{ key: 'date', range: { gte: '2021-01-01' } }] })).toEqual([1, 2]);
    // 14:00+02:00 is 12:00Z: equal instants
    expect(run({ must: [{ key: 'date', range: { gte: '2021-06-01T12:00:00Z', lte: '2021-06-01T12:00' } }] })).toEqual([1, 2]);
    expect(run({ must: [{ key: 'date', range: { lt: '2021-06-01T12:00:00.001Z' } }] })).toEqual([0, 1, 2]);
    expect(run({ must: [{ key: 'score', range: { gte: 1 } }] })).toEqual([]); // '7' is a string, not a number
  });

  it('is_empty, is_null, exists, has_id, dotted keys and nested objects', () => {
    expect(run({ must: [{ is_empty: { key: 'tags' } }] })).toEqual([1, 2, 3, 4].filter((i) => i !== 2));
    expect(run({ must: [{ is_null: { key: 'draft' } }] })).toEqual([0]);
    expect(run({ must: [{ exists: { key: 'draft' } }] })).toEqual([]);
    expect(run({ must: [{ exists: { key: 'author.name' } }] })).toEqual([0, 1]);
    expect(run({ must: [{ key: 'author.born', range: { lt: 1900 } }] })).toEqual([0]);
    expect(run({ must: [{ key: 'authors[].name', match: { value: 'Bob' } }] })).toEqual([0]);
    expect(run({ must: [{ has_id: ['a2', 'a3', 'zz'] }] })).toEqual([2, 3]);
    // nested: the same array element must satisfy both conditions
    const both = { must: [{ key: 'name', match: { value: 'Ada' } }, { key: 'role', match: { value: 'help' } }] };
    expect(run({ must: [{ nested: { key: 'authors', filter: both } }] })).toEqual([1]);
    expect(run({ must: [{ key: 'authors.name', match: { value: 'Ada' } }, { key: 'authors.role', match: { value: 'help' } }] })).toEqual([0, 1]);
  });

  it('must / should / must_not, nested to any depth; {} keeps everything', () => {
    expect(run({})).toEqual([0, 1, 2, 3, 4]);
    expect(run({ should: [{ key: 'tag', match: { value: 'b' } }, { key: 'year', range: { gt: 2006 } }] })).toEqual([1, 2]);
    expect(run({ must_not: [{ key: 'tag', match: { value: 'a' } }] })).toEqual([1, 2, 3]);
    expect(run({
      must: [{ should: [{ key: 'tag', match: { value: 'a' } }, { must: [{ key: 'tag', match: { value: 'c' } }, { must_not: [{ exists: { key: 'flag' } }] }] }] }],
      must_not: [{ key: 'date', match: { value: 'not a date' } }],
    })).toEqual([0, 2]);
  });
});

describe('filters: validation', () => {
  const issues = (f: unknown) => {
    try {
      parseFilter(f);
    } catch (e) {
      expect(e).toBeInstanceOf(ValidationError);
      return (e as ValidationError).issues;
    }
    throw new Error('expected a ValidationError');
  };

  it('an unknown condition type names its path', () => {
    const err = issues({ must: [{ key: 'a', match: { value: 1 } }, { key: 'b', rnage: { gt: 1 } }] });
    expect(err).toContainEqual({ field: 'filter.must[1].rnage', message: expect.stringContaining('unknown condition type "rnage"') });
    expect(() => compileFilter({ should: [{ geo_radius: {} }] })).toThrow('filter.should[0].geo_radius: unknown condition type "geo_radius"');
    expect(issues({ must_not: [{ must: [{ fuzzy: 'x' }] }] })[0].field).toBe('filter.must_not[0].must[0].fuzzy');
    expect(issues({ filter: [] })[0]).toEqual({ field: 'filter.filter', message: 'unknown field "filter"' });
  });

  it('bad condition contents name the field: range, match, key, dates', () => {
    expect(issues({ must: [{ key: 'a', match: { value: 1 } }, { key: 'b', range: 'soon' }] })[0].field).toBe('filter.must[1].range');
    expect(issues({ must: [{ key: 'b', range: {} }] })).toContainEqual({ field: 'filter.must[0].range', message: 'needs at least one of gt, gte, lt, lte' });
    expect(issues({ must: [{ key: 'b', range: { gt: 1, lt: '2020-01-01' } }] })).toContainEqual({ field: 'filter.must[0].range', message: 'bounds must be all numbers or all ISO dates' });
    expect(issues({ must: [{ key: 'b', range: { gt: '2020-13-01' } }] })[0].field).toBe('filter.must[0].range.gt');
    expect(issues({ must: [{ key: 'b', match: { value: 1, any: [2] } }] })).toContainEqual({ field: 'filter.must[0].match', message: 'needs exactly one of value, any, except (got value, any)' });
    expect(issues({ must: [{ match: { value: 1 } }] })).toContainEqual({ field: 'filter.must[0].key', message: 'match needs a key' });
    expect(issues({ must: [{ key: 'x', exists: { key: 'x' } }] })).toContainEqual({ field: 'filter.must[0].key', message: 'key belongs to match or range conditions, not exists' });
    expect(issues({ must: [{}] })[0].message).toMatch(/^empty condition: expected one of match, range/);
    expect(issues({ must: [{ key: 'a', match: { value: 1 }, range: { gt: 1 } }] })[0].message).toBe('one condition per object, got match and range');
    expect(issues({ must: {} })[0].field).toBe('filter.must');
    expect(() => parseFilter({ must: [{ x: 1 }] }, 'queries[2].filter')).toThrow('queries[2].filter.must[0].x: unknown condition type "x"');
  });

  it('limits nesting depth', () => {
    let f: Record<string, unknown> = { must: [{ exists: { key: 'a' } }] };
    for (let i = 0; i < 16; i++) f = { must: [f] };
    expect(() => parseFilter(f)).not.toThrow();
    f = { must: [f] };
    expect(() => parseFilter(f)).toThrow(/^filter\.must\[0\](\.must\[0\])+: nests deeper than 16 levels$/);
    let hostile: unknown = {};
    for (let i = 0; i < 100_000; i++) hostile = { must: [hostile] };
    expect(() => parseFilter(hostile)).toThrow('filter: nests deeper than 16 levels');
  });

  it('is a zod schema that renders to JSON Schema for the OpenAPI document', () => {
    const json = JSON.stringify(z.toJSONSchema(FilterSchema, { io: 'input', unrepresentable: 'any' }));
    for (const word of ['must_not', 'is_empty', 'has_id', 'nested', 'gte', 'except']) expect(json).toContain(word);
  });

  it('parses ISO dates strictly', () => {
    expect(parseIsoDate('2024-02-29')).toBe(Date.UTC(2024, 1, 29));
    expect(parseIsoDate('2023-02-29')).toBeNull();
    expect(parseIsoDate('2024-05-01T10:30:00.5-0130')).toBe(Date.UTC(2024, 4, 1, 12, 0, 0, 500));
    expect(parseIsoDate('May 1, 2024')).toBeNull();
    expect(valuesAt({ a: [{ b: 1 }, { b: [2, 3] }, 4] }, 'a.b')).toEqual([1, 2, 3]);
  });
});

describe('docMask', () => {
  it('marks the documents a filter keeps, from segment metadata and ids; andMasks intersects', () => {
    const corpus = makeCorpus(71, { documents: 30, dims: 4 });
    const [seg] = segmentsOf(corpus);
    const mask = docMask(seg, compileFilter({ must: [{ key: 'tag', match: { any: ['a', 'c'] } }], must_not: [{ has_id: ['d0'] }] }));
    expect(Array.from(mask)).toEqual(corpus.metadata.map((m, i) => (m !== null && m.tag !== 'b' && i !== 0 ? 1 : 0)));
    const tombstones = Uint8Array.from({ length: 30 }, (_, i) => (i < 15 ? 1 : 0));
    expect(Array.from(andMasks(mask, undefined, tombstones)!)).toEqual(Array.from(mask, (v, i) => (v && i < 15 ? 1 : 0)));
    expect(andMasks()).toBeUndefined();
  });
});
