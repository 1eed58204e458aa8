import { describe, expect, it } from 'vitest';
import { decodeLine } from '@lateral/shared';
import { ByteLineSplitter, LineSplitter, readByteLines, readLines } from './object-streams';

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

  it('decodes as TextDecoder does: a leading byte order mark dropped, invalid bytes as U+FFFD, at every cut into two or three pieces', () => {
    const texts = [
      Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('a 😀 b\r\nc\n', 'utf8')]),
      Buffer.concat([Buffer.from('x'), Buffer.from([0xe2, 0x0a, 0xff, 0xc3]), Buffer.from('\ny é\r'), Buffer.from([0xf0, 0x9f])]),
      Buffer.from([0xef, 0xbb, 0xbf]),
      Buffer.from('\r'),
      Buffer.from('\n\n'),
    ];
    for (const bytes of texts) {
      // The reference: the whole text decoded at once, then cut.
      const whole = new TextDecoder('utf-8').decode(bytes);
      const expected = whole.split('\n').map((l) => (l.endsWith('\r') ? l.slice(0, -1) : l));
      if (whole.endsWith('\n') || whole === '') expected.pop();
      for (let i = 0; i <= bytes.length; i++) {
        for (let j = i; j <= bytes.length; j++) {
          const s = new LineSplitter();
          const lines = [...s.push(bytes.subarray(0, i)), ...s.push(bytes.subarray(i, j)), ...s.push(bytes.subarray(j)), ...s.end()];
          expect(lines, `${bytes.toString('hex')} cut at ${i}, ${j}`).toEqual(expected);
        }
      }
    }
  });

  it('keeps its own copy of a line in progress: a caller may reuse its buffer', () => {
    const s = new LineSplitter();
    const buf = Buffer.from('abc');
    expect(s.push(buf)).toEqual([]);
    buf.write('xyz');
    expect(s.push(Buffer.from('d\n'))).toEqual(['abcd']);
  });
});

describe('ByteLineSplitter / readByteLines', () => {
  it('gives the bytes of the lines LineSplitter gives: decoded, the same lines at every cut into two or three pieces', () => {
    const texts = [
      Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('a 😀 b\r\nc\n', 'utf8')]),
      Buffer.concat([Buffer.from('x'), Buffer.from([0xe2, 0x0a, 0xff, 0xc3]), Buffer.from('\ny é\r'), Buffer.from([0xf0, 0x9f])]),
      // A byte order mark inside the stream is kept (only the stream's first is dropped), a partial one at its start too.
      Buffer.concat([Buffer.from('a\n'), Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('b\n')]),
      Buffer.from([0xef, 0xbb, 0x0a, 0x41]),
      Buffer.from([0xef, 0xbb, 0xbf]),
      Buffer.from([0xef, 0xbb]),
      Buffer.from([0xef]),
      Buffer.from('\r'),
      Buffer.from('\n\n'),
      Buffer.from(''),
      Buffer.from('{"a":1}\r\n\r\n{"b":"\u00e9"}'),
    ];
    for (const bytes of texts) {
      for (let i = 0; i <= bytes.length; i++) {
        for (let j = i; j <= bytes.length; j++) {
          const pieces = [bytes.subarray(0, i), bytes.subarray(i, j), bytes.subarray(j)];
          const s = new LineSplitter();
          const expected = [...pieces.flatMap((p) => s.push(p)), ...s.end()];
          const b = new ByteLineSplitter();
          const lines = [...pieces.flatMap((p) => b.push(p)), ...b.end()];
          expect(lines.map((l) => decodeLine(l)), `${bytes.toString('hex')} cut at ${i}, ${j}`).toEqual(expected);
        }
      }
    }
  });

  it('keeps its own copy of a line in progress, and readByteLines over a stream yields the same lines', async () => {
    const s = new ByteLineSplitter();
    const buf = Buffer.from('abc');
    expect(s.push(buf)).toEqual([]);
    buf.write('xyz');
    expect(s.push(Buffer.from('d\n')).map((l) => decodeLine(l))).toEqual(['abcd']);
    async function* pieces() {
      yield Buffer.from('{"a":1}\n{"b"');
      yield ':2}\r\n';
      yield Buffer.from('{"c":3}');
    }
    const out: string[] = [];
    for await (const l of readByteLines(pieces())) out.push(decodeLine(l));
    expect(out).toEqual(['{"a":1}', '{"b":2}', '{"c":3}']);
  });
});
