import { describe, expect, it } from 'vitest';
import { DistinctTexts, RepeatedCandidates, decodeLine, isBlankLine, validateRow } from './batch-rows';

describe('DistinctTexts', () => {
  it('gives each distinct text one place in first-seen order, long texts sharing their first characters included', () => {
    const head = 'x'.repeat(24);
    const long = (tail: string) => `${head}${tail}`;
    // Short texts, a short text equal to long texts' key, and long texts with one key.
    const texts = ['a', '', long('1'), long('2'), head, long('3'), 'a', long('2'), long('1'), long('3'), '', head, long('22')];
    const d = new DistinctTexts();
    const places = texts.map((t) => d.indexOf(t));
    expect(places).toEqual([0, 1, 2, 3, 4, 5, 0, 3, 2, 5, 1, 4, 6]);
    expect(d.texts).toEqual(['a', '', long('1'), long('2'), head, long('3'), long('22')]);
    expect(d.size).toBe(7);
    // The same as a map keyed by the texts themselves, on texts that differ only after the key's characters.
    const reference = new Map<string, number>();
    const many = Array.from({ length: 500 }, (_, i) => long(String(i % 37)) + (i % 2 ? 'é' : ''));
    const e = new DistinctTexts();
    for (const t of many) {
      if (!reference.has(t)) reference.set(t, reference.size);
      expect(e.indexOf(t)).toBe(reference.get(t));
    }
    expect(e.texts).toEqual([...reference.keys()]);
  });
});

describe('RepeatedCandidates', () => {
  const opts = { hasCollection: true, maxTextBytes: 1000 };
  const list = '[{"id":"d1","text":"a \\"quoted\\" [text] {x}"},{"text":"é\\u00e9 \\\\"},"d3",{"id":"d4","score":-1.5}]';
  const lines = [
    `{"custom_id":"a","query":"q1","candidates":${list},"topK":2}`,
    // The same list: read without parsing it again.
    `{"custom_id":"b","query":"q2","candidates":${list}}`,
    // Spaced as Python writes JSON, the list written the same way as before: remembered apart.
    `{"custom_id": "c", "query": "q3", "candidates": ${list.replace(/,"/g, ', "')}}`,
    `{"custom_id": "d", "query": "q4", "candidates": ${list.replace(/,"/g, ', "')}}`,
    // The list under a nested "candidates" key first, then the row's own: not taken for the row's candidates.
    `{"custom_id":"e","x":{"candidates":${list}},"query":"q","candidates":["z"]}`,
    // The list followed by more of an array, by a duplicate key, by an extra key, or by broken JSON: read as JSON.parse reads them.
    `{"custom_id":"f","query":"q","candidates":${list.slice(0, -1)},"d9"]}`,
    `{"custom_id":"g","query":"q","candidates":${list},"candidates":["y"]}`,
    `{"custom_id":"h","query":"q","candidates":${list},"extra":1}`,
    `{"custom_id":"i","query":"q","candidates":${list},`,
    `{"custom_id":"j","query":"q","candidates":${list}}`,
    `{"custom_id":"k","query":"q","candidates":${list}} trailing`,
  ];

  it('gives every row exactly what JSON.parse gives, the rows repeating a list sharing its parsed candidates', () => {
    const repeats = new RepeatedCandidates();
    const seenA = new Map<string, number>();
    const seenB = new Map<string, number>();
    const fast = lines.map((l, i) => validateRow(l, i + 1, seenA, opts, repeats));
    const plain = lines.map((l, i) => validateRow(l, i + 1, seenB, opts));
    expect(fast).toEqual(plain);
    expect(plain.map((e) => ('error' in e ? 'error' : 'row'))).toEqual(['row', 'row', 'row', 'row', 'error', 'row', 'row', 'error', 'error', 'row', 'error']);
    const candidates = (i: number) => (fast[i] as { row: { candidates: unknown } }).row.candidates;
    expect(candidates(1)).toBe(candidates(0)); // the first row's own, kept
    expect(candidates(9)).toBe(candidates(0));
    expect(candidates(3)).toBe(candidates(2));
    expect(candidates(6)).toEqual(['y']);
    expect(repeats.parse(`{"custom_id":"z","query":"q","candidates":${list}}`)).toEqual({ custom_id: 'z', query: 'q', candidates: JSON.parse(list) });
    expect(repeats.parse('{"custom_id":"z","query":"q","candidates":["other"]}')).toBeUndefined();
  });

  it('reads a line given as bytes as it reads its text: the same rows, a repeated list compared as bytes and shared, invalid UTF-8 as U+FFFD', () => {
    // Bytes that decode to a remembered list's text only through U+FFFD (a lone 0xff where the list has U+FFFD): parsed in full, the same row.
    const withReplacement = '[{"text":"\ufffd replaced, long enough to be remembered as a list of candidates"}]';
    const bad = (id: string) => Buffer.concat([Buffer.from(`{"custom_id":"${id}","query":"q","candidates":[{"text":"`), Buffer.from([0xff]), Buffer.from(' replaced, long enough to be remembered as a list of candidates"}]}')]);
    const texts = [...lines, `{"custom_id":"r1","query":"q","candidates":${withReplacement}}`, `{"custom_id":"r2","query":"é","candidates":${withReplacement}}`];
    const byteLines: Uint8Array[] = [...texts.map((l) => Buffer.from(l, 'utf8')), bad('r3'), bad('r4')];
    const repeatsA = new RepeatedCandidates();
    const repeatsB = new RepeatedCandidates();
    const seenA = new Map<string, number>();
    const seenB = new Map<string, number>();
    const seenC = new Map<string, number>();
    const fromBytes = byteLines.map((l, i) => validateRow(l, i + 1, seenA, opts, repeatsA));
    const fromText = byteLines.map((l, i) => validateRow(decodeLine(l), i + 1, seenB, opts, repeatsB));
    const plain = byteLines.map((l, i) => validateRow(new TextDecoder().decode(l), i + 1, seenC, opts));
    expect(fromBytes).toEqual(plain);
    expect(fromText).toEqual(plain);
    const candidates = (i: number) => (fromBytes[i] as { row: { candidates: unknown } }).row.candidates;
    expect(candidates(1)).toBe(candidates(0));
    expect(candidates(9)).toBe(candidates(0));
    expect(candidates(3)).toBe(candidates(2));
    expect(candidates(12)).toBe(candidates(11));
    expect(candidates(13)).not.toBe(candidates(11)); // 0xff is not the list's bytes: parsed in full
    expect(candidates(13)).toEqual(candidates(11));
    expect(repeatsA.parse(Buffer.from(`{"custom_id":"z","query":"q","candidates":${list}}`))).toEqual({ custom_id: 'z', query: 'q', candidates: JSON.parse(list) });
    expect(repeatsA.parse(Buffer.from(`{"custom_id":"z","query":"q","candidates":${list.slice(0, -1)}`))).toBeUndefined();
  });

  it('does not check a repeated list again under the same options, and checks it under others', () => {
    const long = 'x'.repeat(80);
    const row = (id: string) => `{"custom_id":"${id}","query":"q","candidates":[{"text":"${long}"},{"text":"${long}y"}]}`;
    const repeats = new RepeatedCandidates();
    const seen = new Map<string, number>();
    const roomy = { hasCollection: false, maxTextBytes: 1000 };
    const first = validateRow(row('a'), 1, seen, roomy, repeats) as { row: { candidates: object } };
    expect(repeats.checked(first.row.candidates, roomy)).toBe(true);
    expect(validateRow(row('b'), 2, seen, roomy, repeats)).toMatchObject({ row: { candidates: first.row.candidates } });
    // Other options (a smaller MAX_DOCUMENT_BYTES): the same list is checked, and fails.
    const tight = { hasCollection: false, maxTextBytes: 30 };
    expect(repeats.checked(first.row.candidates, tight)).toBe(false);
    expect(validateRow(row('c'), 3, seen, tight, repeats)).toMatchObject({ error: { message: expect.stringContaining('over MAX_DOCUMENT_BYTES (30)') } });
  });

  it('holds at most its characters, and stops learning when the lists it learns do not repeat', () => {
    const small = new RepeatedCandidates(list.length);
    small.learn(lines[0], JSON.parse(lines[0]));
    small.learn(lines[2], JSON.parse(lines[2]));
    expect(small.parse(lines[1])).toBeDefined();
    expect(small.parse(lines[3])).toBeUndefined(); // over its characters: the spaced list was not kept
    const unique = new RepeatedCandidates();
    const row = (id: string, doc: string) => `{"custom_id":"${id}","query":"q","candidates":["${doc.padEnd(70, '.')}"]}`;
    for (let i = 0; i < 64; i++) unique.learn(row(`u${i}`, `d${i}`), JSON.parse(row(`u${i}`, `d${i}`)));
    unique.learn(row('v', 'late'), JSON.parse(row('v', 'late')));
    expect(unique.parse(row('w', 'd7'))).toEqual(JSON.parse(row('w', 'd7')));
    expect(unique.parse(row('w', 'late'))).toBeUndefined();
    // A list shorter than 64 characters is not remembered.
    const short = new RepeatedCandidates();
    short.learn('{"custom_id":"s","query":"q","candidates":["d1"]}', { custom_id: 's', query: 'q', candidates: ['d1'] });
    expect(short.parse('{"custom_id":"t","query":"q","candidates":["d1"]}')).toBeUndefined();
  });
});

describe('isBlankLine', () => {
  it('says what String.prototype.trim says, for text and for bytes', () => {
    for (const l of ['', ' ', '\t\r\u000b\u000c', '\u00a0', ' \u2028 \ufeff', ' x', '\u00a0x', '{}', 'é']) {
      expect(isBlankLine(l), JSON.stringify(l)).toBe(l.trim().length === 0);
      expect(isBlankLine(Buffer.from(l, 'utf8')), JSON.stringify(l)).toBe(l.trim().length === 0);
    }
  });
});
