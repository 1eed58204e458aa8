import { describe, expect, it } from 'vitest';
import { LineSplitter, readLines } from './object-streams';

describe('LineSplitter / readLines', () => {
  it('cuts pieces that end inside a line or inside a character into whole lines, without their breaks', () => {
    const text = 'first\r\nsecond é\n\nlast without break';
    const bytes = Buffer.from(text, 'utf8');
    // Every cut point, the two-byte é included: the same lines.
    for (let cut = 0; cut <= bytes.length; cut++) {
      const s = new LineSplitter();
      const lines = [...s.push(bytes.subarray(0, cut)), ...s.push(bytes.subarray(cut)), ...s.end()];
      expect(lines, `cut at ${cut}`).toEqual(['first', 'second é', '', 'last without break']);
    }
  });

  it('a text that ends with a line break has no empty last line; end() empties it', () => {
    const s = new LineSplitter();
    expect(s.push('a\nb\n')).toEqual(['a', 'b']);
    expect(s.end()).toEqual([]);
    expect(s.end()).toEqual([]);
  });

  it('readLines over a stream yields the same lines', async () => {
    async function* pieces() {
      yield Buffer.from('{"a":1}\n{"b"');
      yield ':2}\r\n';
      yield Buffer.from('{"c":3}');
    }
    const out: string[] = [];
    for await (const l of readLines(pieces())) out.push(l);
    expect(out).toEqual(['{"a":1}', '{"b":2}', '{"c":3}']);
  });
});
