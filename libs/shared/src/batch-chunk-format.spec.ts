import { crc32 } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { ChunkColumns, ChunkFormatError, binaryChunkTexts, decodeBinaryChunk, isBinaryChunk } from './batch-chunk-format';
import { BatchRowSchema, type BatchChunkEntry } from './batches';
import { textHash } from './batch-rows';

const valid = (line: number, row: object): BatchChunkEntry => ({ line, custom_id: (row as { custom_id: string }).custom_id, row: BatchRowSchema.parse(row) });

/** Columns of a few rows of every candidate kind: a list repeated, lists differing only in a score (-0 and -2.5) or a middle id (the same length, first, middle and last text), errors. */
function sample(): { cols: ChunkColumns; hashes: string[] } {
  const cols = new ChunkColumns();
  const list = [{ id: 'p1', text: 'alpha' }, { text: 'beta' }, { id: 'p3', text: 'alpha', score: -2.5 }];
  cols.add(valid(1, { custom_id: 'a', query: 'q é', candidates: list }));
  cols.add({ line: 2, custom_id: null, error: { message: 'line 2: not JSON' } });
  cols.add(valid(3, { custom_id: 'b', query: 'q2', candidates: list, topK: 2 }));
  cols.add(valid(4, { custom_id: 'c', query: 'q3', candidates: [{ id: 'p1', text: 'alpha' }, { text: 'beta' }, { id: 'p3', text: 'alpha', score: -0 }] }));
  cols.add(valid(5, { custom_id: 'd', query: 'q4', candidates: ['d1', { id: 'd2', score: 1e-300 }, { text: 'gamma', score: 0 }] }));
  cols.add({ line: 6, custom_id: 'e', error: { message: 'line 6 (custom_id "e"): candidates: required', issues: [{ field: 'candidates', message: 'required' }] } });
  cols.add(valid(7, { custom_id: 'f', query: 'q5', candidates: [{ id: 'p1', text: 'alpha' }, { id: 'p2', text: 'beta' }, { id: 'p3', text: 'alpha', score: -2.5 }] }));
  return { cols, hashes: cols.texts.texts.map(textHash) };
}

describe('binary chunk files', () => {
  it('round trip: every row, error and candidate kind reads back; rows with the same candidates share one list', () => {
    const { cols, hashes } = sample();
    expect(cols.texts.texts).toEqual(['alpha', 'beta', 'gamma']);
    const bytes = cols.encode(hashes, null);
    expect(isBinaryChunk(bytes)).toBe(true);
    const chunk = decodeBinaryChunk(bytes);
    expect(chunk.textHashes).toEqual(hashes);
    expect(chunk.textsIn).toBeNull();
    expect(chunk.entries).toEqual([
      { line: 1, custom_id: 'a', query: 'q é', list: 0 },
      { line: 2, custom_id: null, error: { message: 'line 2: not JSON' } },
      { line: 3, custom_id: 'b', query: 'q2', topK: 2, list: 0 },
      { line: 4, custom_id: 'c', query: 'q3', list: 1 },
      { line: 5, custom_id: 'd', query: 'q4', list: 2 },
      { line: 6, custom_id: 'e', error: { message: 'line 6 (custom_id "e"): candidates: required', issues: [{ field: 'candidates', message: 'required' }] } },
      { line: 7, custom_id: 'f', query: 'q5', list: 3 },
    ]);
    expect(chunk.lists).toEqual([
      [{ id: 'p1', t: 0 }, { t: 1 }, { id: 'p3', t: 0, score: -2.5 }],
      [{ id: 'p1', t: 0 }, { t: 1 }, { id: 'p3', t: 0, score: -0 }],
      ['d1', { id: 'd2', score: 1e-300 }, { t: 2, score: 0 }],
      [{ id: 'p1', t: 0 }, { id: 'p2', t: 1 }, { id: 'p3', t: 0, score: -2.5 }],
    ]);
    expect(Object.is((chunk.lists[1][2] as { score: number }).score, -0)).toBe(true);
    expect(binaryChunkTexts(bytes)).toEqual({ textHashes: hashes, textsIn: null });
  });

  it('textsIn (where each text is written) reads back, and a chunk without rows or texts is a valid file', () => {
    const { cols, hashes } = sample();
    const chunk = decodeBinaryChunk(cols.encode(hashes, [0, 3, 3]));
    expect(chunk.textsIn).toEqual([0, 3, 3]);
    expect(decodeBinaryChunk(new ChunkColumns().encode([], null))).toEqual({ textHashes: [], textsIn: null, entries: [], lists: [] });
  });

  it('a JSONL chunk file (written before this format) is not taken for a binary one', () => {
    expect(isBinaryChunk(Buffer.from('{"textHashes":[]}\n'))).toBe(false);
    expect(isBinaryChunk(Buffer.from('{"line":1,"custom_id":"a","row":{}}\n'))).toBe(false);
    expect(isBinaryChunk(new Uint8Array(0))).toBe(false);
  });

  it('a corrupt file is refused at once with what is wrong: truncated, a flipped byte, another version, an index outside the file, strings that are not JSON', () => {
    const { cols, hashes } = sample();
    const bytes = Buffer.from(cols.encode(hashes, null));
    const refused = (b: Uint8Array, message: RegExp) => {
      expect(() => decodeBinaryChunk(b)).toThrow(ChunkFormatError);
      expect(() => decodeBinaryChunk(b)).toThrow(message);
    };
    refused(bytes.subarray(0, 20), /shorter than the 36-byte header/);
    refused(bytes.subarray(0, bytes.byteLength - 1), /describes \d+ bytes, the file has \d+/);
    refused(Buffer.concat([bytes, Buffer.from([0])]), /truncated or corrupt/);
    const flipped = Buffer.from(bytes);
    flipped[100] ^= 0xff;
    refused(flipped, /checksum mismatch/);
    const version = Buffer.from(bytes);
    version[5] = 9;
    refused(version, /format version 9/);
    // A header claiming billions of candidates: refused by its size, nothing allocated or looped over.
    const huge = Buffer.from(bytes);
    huge.writeUInt32LE(0xffffffff, 20);
    refused(huge, /describes \d+ bytes/);
    // Consistent checksums over inconsistent contents (a bad writer, not a bad disk): the decoder checks its indices.
    const resealed = (edit: (b: Buffer) => void) => {
      const b = Buffer.from(bytes);
      edit(b);
      b.writeUInt32LE(crc32(b.subarray(36)), 32);
      return b;
    };
    const nTexts = bytes.readUInt32LE(8);
    const nEntries = bytes.readUInt32LE(12);
    const nLists = bytes.readUInt32LE(16);
    const nCandidates = bytes.readUInt32LE(20);
    const tAt = 36 + nTexts * 32 + nEntries * 12 + (nLists + 1) * 4 + nCandidates;
    refused(resealed((b) => b.writeInt32LE(7, tAt)), /names text 7, which the chunk's 3 text hashes do not hold/);
    const listAt = 36 + nTexts * 32 + nEntries * 4;
    refused(resealed((b) => b.writeInt32LE(9, listAt)), /entry 0 names list 9 of 4/);
    refused(resealed((b) => (b[b.byteLength - 1] = 0x20)), /its strings are not JSON/);
    expect(() => binaryChunkTexts(flipped)).toThrow(/checksum mismatch/);
  });
});
