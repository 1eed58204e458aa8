import { describe, expect, it } from 'vitest';
import { createCodec, fitCodec, readSegment, writeSegment } from '@lateral/codec';
import type { CodecSettings } from '@lateral/shared';
import type { EncodedText } from '@lateral/model';
import { assembleSegmentDocs } from './segment-docs';
import { parseSegmentHead, segmentHeadData, serializeSegmentHead } from './segment-head';

const DIMS = 8;
const eden4: CodecSettings = { kind: 'eden', bits: 4, layout: 'token', norms: 'fp32', sideInfo: false };
const fp16: CodecSettings = { kind: 'fp16', layout: 'token', norms: 'fp32', sideInfo: false };

function reader(settings: CodecSettings, ids: string[], prefixRows = 0) {
  const artifact = fitCodec(settings, Float32Array.from({ length: 64 * DIMS }, (_, i) => Math.cos(i * 1.3)), DIMS, { seed: 5n });
  // Documents of 0 to 4 tokens (an empty document included).
  const docs: EncodedText[] = ids.map((_, d) => {
    const m = d % 5;
    return { tokenIds: Int32Array.from({ length: m }, (_, k) => d * 7 + k), vectors: Float32Array.from({ length: m * DIMS }, (_, k) => Math.sin(d * 11 + k)), weights: null, length: m, truncated: false };
  });
  const bytes = writeSegment(assembleSegmentDocs(ids, docs, DIMS), createCodec(settings, artifact), { prefixRows });
  return { r: readSegment(bytes, 'seg', artifact), bytes };
}

describe('segment heads', () => {
  it('round-trip every field (EDEN and fp16 segments, ids with non-ASCII characters, an empty document)', () => {
    for (const settings of [eden4, fp16]) {
      const { r, bytes } = reader(settings, ['a', 'b-é', '文書', 'd', 'e', 'f', 'g']);
      const h = segmentHeadData(r, bytes.byteLength);
      expect(h.codeStart[h.documents]).toBeGreaterThan(0);
      const back = parseSegmentHead(serializeSegmentHead(h));
      expect(back).toEqual(h);
      expect(back!.seed).toBe(r.seed);
      expect(back!.codec).toEqual(r.codec);
    }
  });

  it('name the prefix section of a v2 segment (rows per document, offset); a head without those fields reads as none', () => {
    const { r, bytes } = reader(eden4, ['a', 'b', 'c', 'd', 'e', 'f'], 3);
    const h = segmentHeadData(r, bytes.byteLength);
    expect(h.pfxRows).toBe(3);
    // (0 + 1 + 2 + 3 + 3 + 0) rows of EDEN codes and norms at the end of the object
    const rb = r.rowBytes!;
    expect(h.pfxAt).toBe(bytes.byteLength - 9 * (rb.codes + rb.norms));
    expect(Buffer.from(bytes.subarray(h.pfxAt)).equals(Buffer.concat([r.prefix!.codes, r.prefix!.norms]))).toBe(true);
    expect(parseSegmentHead(serializeSegmentHead(h))).toEqual(h);
    // A head serialised before prefix sections: its JSON has no pfxRows / pfxAt.
    const old = serializeSegmentHead({ ...h, pfxRows: undefined, pfxAt: undefined } as unknown as typeof h);
    const json = new TextDecoder().decode(old.subarray(8, 8 + new DataView(old.buffer).getUint32(4, true)));
    expect(json).not.toContain('pfx');
    expect(parseSegmentHead(old)).toEqual({ ...h, pfxRows: 0, pfxAt: 0 });
    const v1 = reader(eden4, ['a', 'b']);
    expect(segmentHeadData(v1.r, v1.bytes.byteLength)).toMatchObject({ pfxRows: 0, pfxAt: 0 });
  });

  it('refuse bytes that are not a head: a flipped bit, a cut, another magic (the caller then rebuilds the head)', () => {
    const { r, bytes } = reader(eden4, ['x', 'y', 'z']);
    const good = serializeSegmentHead(segmentHeadData(r, bytes.byteLength));
    for (const at of [0, 5, 20, good.byteLength - 30, good.byteLength - 1]) {
      const bad = good.slice();
      bad[at] ^= 0x10;
      expect(parseSegmentHead(bad)).toBeNull();
    }
    expect(parseSegmentHead(good.subarray(0, good.byteLength - 8))).toBeNull();
    expect(parseSegmentHead(new Uint8Array(3))).toBeNull();
    // Read from an offset within a larger buffer (as a file read may give it), still parsed.
    const shifted = new Uint8Array(good.byteLength + 3);
    shifted.set(good, 3);
    expect(parseSegmentHead(shifted.subarray(3))).toEqual(parseSegmentHead(good));
  });
});
