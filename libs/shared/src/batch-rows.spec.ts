import { describe, expect, it } from 'vitest';
import { DistinctTexts } from './batch-rows';

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
