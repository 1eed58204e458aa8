import { describe, expect, it } from 'vitest';
import { splitPassages } from './passages';

/** One token per character of a word: easy to reason about, and context-free. */
const perChar = (s: string) => s.replace(/\s+/g, '').length;
/** One token per whitespace-separated word. */
const perWord = (s: string) => s.split(/\s+/).filter(Boolean).length;

const words = (n: number) => Array.from({ length: n }, (_, i) => `w${i}`).join(' ');
const textOf = (text: string, w: { start: number; end: number }) => text.slice(w.start, w.end);

describe('splitPassages', () => {
  it('a text that fits is one passage covering every word', () => {
    const text = '  alpha beta\tgamma  ';
    expect(splitPassages(text, perWord, 10, 0)).toEqual([{ start: 2, end: 18 }]);
  });

  it('without overlap, windows of `room` words tile the text in order', () => {
    const text = words(25);
    const w = splitPassages(text, perWord, 10, 0);
    expect(w.map((x) => perWord(textOf(text, x)))).toEqual([10, 10, 5]);
    expect(w.map((x) => textOf(text, x)).join(' ')).toBe(text);
    expect(textOf(text, w[1]).startsWith('w10 ')).toBe(true);
  });

  it('with overlap, each passage starts `overlap` tokens before the previous one ends', () => {
    const text = words(30);
    const w = splitPassages(text, perWord, 10, 3);
    const parts = w.map((x) => textOf(text, x).split(' '));
    expect(parts[0]).toEqual(Array.from({ length: 10 }, (_, i) => `w${i}`));
    for (let i = 1; i < parts.length; i++) {
      expect(parts[i].slice(0, 3)).toEqual(parts[i - 1].slice(-3));
      expect(parts[i].length).toBeLessThanOrEqual(10);
    }
    expect(parts[parts.length - 1].at(-1)).toBe('w29');
    // 10 new words in the first, 7 in every following one: 10 + 7 + 7 + 6 = 30
    expect(parts.map((p) => p.length)).toEqual([10, 10, 10, 9]);
  });

  it('counts words by their own token counts; a word longer than the room is a passage of its own', () => {
    const text = 'aa bbbbbbbbbbbb cc dd';
    const w = splitPassages(text, perChar, 5, 0).map((x) => textOf(text, x));
    expect(w).toEqual(['aa', 'bbbbbbbbbbbb', 'cc dd']);
  });

  it('shrinks a window the tokenizer counts as longer in context than word by word', () => {
    // every word is 1 token alone, but a window of k words costs 2k - 1 (a separator token between words)
    const inContext = (s: string) => Math.max(0, 2 * perWord(s) - 1);
    const text = words(8);
    const w = splitPassages(text, (s) => (s.includes(' ') ? inContext(s) : 1), 5, 0);
    for (const x of w) expect(inContext(textOf(text, x))).toBeLessThanOrEqual(5);
    expect(w.map((x) => textOf(text, x)).join(' ')).toBe(text);
  });

  it('always makes progress, even when the overlap would cover a whole window', () => {
    const text = 'aaaa bbbb cccc dddd';
    const w = splitPassages(text, perChar, 4, 2);
    expect(w.map((x) => textOf(text, x))).toEqual(['aaaa', 'bbbb', 'cccc', 'dddd']);
  });

  it('is deterministic and rejects a room below 1 or an overlap over half the room', () => {
    const text = words(40);
    expect(splitPassages(text, perWord, 7, 2)).toEqual(splitPassages(text, perWord, 7, 2));
    expect(() => splitPassages(text, perWord, 0, 0)).toThrow(RangeError);
    expect(() => splitPassages(text, perWord, 10, 6)).toThrow('overlap');
    expect(splitPassages('   ', perWord, 10, 0)).toEqual([]);
  });
});
