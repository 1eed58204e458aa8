import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { crc32c, createCodec, decodeHalf, fitCodec, readSegment, writeSegment, type CodecArtifact } from '@lateral/codec';
import { s3Keys, type CodecSettings, type Collection, type SegmentRef } from '@lateral/shared';
import { DiskObjectCache } from '@lateral/infra';
import type { EncodedText } from '@lateral/model';
import { jsKernels, wasmKernels } from '@lateral/simd';
import { SegmentCache, type ObjectSource } from './segment-cache';
import { documentScores } from './exact-scores';
import { assembleSegmentDocs } from './segment-docs';

/*
 * WARP's exact final stage from the candidates' codes (documentScores, the WebAssembly module)
 * against its definition: exact MaxSim / query tokens over each document's rows as its segment
 * decodes them (float64 here), for fp16, fp32, EDEN 2 and 4 bits (rotated-domain scoring, zero-norm
 * rows included), int8 (decoded by the codec, scored in the module), dimensions that are and are
 * not a multiple of 4, odd and even query lengths, documents read by ranges of local copies, from
 * held segments and from whole reads, an unreadable segment.
 */

const T = 't1';
const C = 'c1';
const collection: Pick<Collection, 'tenantId' | 'id' | 'model'> = { tenantId: T, id: C, model: 'm' };
const noStatic = { forCollection: async () => Promise.reject(new Error('no side information in these tests')) };

function rng(seed: number) {
  return () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32) - 0.5;
}

/** Documents of 1..`most` tokens; document 1's first token is all zeros (a zero EDEN norm). */
function docsOf(n: number, dims: number, most: number, rnd: () => number): EncodedText[] {
  return Array.from({ length: n }, (_, d) => {
    const m = 1 + ((d * 5 + 3) % most);
    const vectors = Float32Array.from({ length: m * dims }, rnd);
    if (d === 1) vectors.fill(0, 0, dims);
    return { tokenIds: Int32Array.from({ length: m }, (_, t) => d * 100 + t), vectors, weights: null, length: m, truncated: false };
  });
}

function stored(batchId: string, ids: string[], docs: EncodedText[], dims: number, settings: CodecSettings, artifact: CodecArtifact): { ref: SegmentRef; bytes: Uint8Array } {
  const bytes = writeSegment(assembleSegmentDocs(ids, docs, dims), createCodec(settings, artifact));
  const ref: SegmentRef = {
    batchId,
    codecVersion: 1,
    key: s3Keys.segment(T, C, batchId, 1),
    documents: ids.length,
    tokens: docs.reduce((a, e) => a + e.length, 0),
    bytes: bytes.byteLength,
    checksum: crc32c(bytes).toString(16).padStart(8, '0'),
  };
  return { ref, bytes };
}

/** The definition: sum over query tokens of the max over the decoded rows of the dot product (float64), / query tokens. */
function reference(q: Float32Array, n: number, rows: Float32Array, dims: number): number {
  const m = rows.length / dims;
  let s = 0;
  for (let i = 0; i < n; i++) {
    let best = -Infinity;
    for (let r = 0; r < m; r++) {
      let dot = 0;
      for (let k = 0; k < dims; k++) dot += q[i * dims + k] * rows[r * dims + k];
      best = Math.max(best, dot);
    }
    s += best;
  }
  return s / n;
}

const source = (segs: { ref: SegmentRef; bytes: Uint8Array }[]): ObjectSource & { get(key: string): Promise<Uint8Array | null> } => {
  const byKey = new Map(segs.map((s) => [s.ref.key, s.bytes]));
  return { get: async (key) => byKey.get(key)?.slice() ?? null };
};

const wasm = wasmKernels();

describe.skipIf(!wasm)("WARP's exact stage from codes (documentScores)", () => {
  const codecs: [string, CodecSettings][] = [
    ['fp16', { kind: 'fp16', layout: 'token', norms: 'fp32', sideInfo: false }],
    ['fp32', { kind: 'fp32', layout: 'token', norms: 'fp32', sideInfo: false }],
    ['eden4', { kind: 'eden', bits: 4, layout: 'token', norms: 'fp32', sideInfo: false }],
    ['eden2', { kind: 'eden', bits: 2, layout: 'token', norms: 'fp16', sideInfo: false }],
    ['int8', { kind: 'int8', layout: 'token', norms: 'fp16', sideInfo: false }],
  ];
  for (const [name, settings] of codecs)
    for (const dims of [22, 64])
      it(`${name}, d = ${dims}: equals exact MaxSim / query tokens over the decoded rows, by ranges, held and whole; an unreadable segment named`, async () => {
        const rnd = rng(dims * 31 + name.length);
        const artifact = fitCodec(settings, Float32Array.from({ length: 256 * dims }, rnd), dims, { seed: 5n });
        const A = stored('a', ['a0', 'a1', 'a2', 'a3', 'a4', 'a5'], docsOf(6, dims, 9, rnd), dims, settings, artifact);
        const B = stored('b', ['b0', 'b1', 'b2'], docsOf(3, dims, 7, rnd), dims, settings, artifact);
        const gone = stored('g', ['g0'], docsOf(1, dims, 3, rnd), dims, settings, artifact);
        const where = [[B.ref, 2], [A.ref, 1], [gone.ref, 0], [A.ref, 5], [A.ref, 0], [B.ref, 0], [A.ref, 1]] as const;
        const decoded = (s: { ref: SegmentRef; bytes: Uint8Array }, d: number) => readSegment(s.bytes, s.ref.key, artifact).decodeDoc(d);
        const dir = mkdtempSync(path.join(tmpdir(), 'lateral-exact-'));
        try {
          const opts = { maxBytes: 1 << 30, loadConcurrency: 2, scoreFromCodes: true };
          const ranges = new SegmentCache(new DiskObjectCache(source([A, B]), dir, 1 << 20, 'test'), { get: async () => artifact }, noStatic, { ...opts, rangeReads: true });
          const whole = new SegmentCache(source([A, B]), { get: async () => artifact }, noStatic, opts);
          for (const n of [1, 4, 5]) {
            const q = Float32Array.from({ length: n * dims }, rnd);
            const expected = where.map(([ref, d]) => (ref === gone.ref ? NaN : reference(q, n, decoded(ref === A.ref ? A : B, d), dims)));
            for (const cache of [ranges, ranges, whole, whole]) {
              const got = (await cache.documentScores(collection, where, { vectors: q, length: n }))!;
              expect([...got.failed.keys()]).toEqual([gone.ref.key]);
              expected.forEach((e, i) => (Number.isNaN(e) ? expect(got.scores[i]).toBeNaN() : expect(Math.abs(got.scores[i] - e)).toBeLessThanOrEqual(1e-5 * (1 + Math.abs(e)))));
            }
          }
          // Two calls at once by ranges (their codes read into scratch buffers reused across calls): each gets its own documents' scores.
          const q4 = Float32Array.from({ length: 4 * dims }, rnd);
          const q5 = Float32Array.from({ length: 5 * dims }, rnd);
          const back = [...where].reverse();
          const [g4, g5] = await Promise.all([ranges.documentScores(collection, where, { vectors: q4, length: 4 }), ranges.documentScores(collection, back, { vectors: q5, length: 5 })]);
          for (const [got, q, n, w] of [[g4!, q4, 4, where], [g5!, q5, 5, back]] as const)
            w.forEach(([ref, d], i) => (ref === gone.ref ? expect(got.scores[i]).toBeNaN() : expect(Math.abs(got.scores[i] - reference(q, n, decoded(ref === A.ref ? A : B, d), dims))).toBeLessThanOrEqual(1e-5 * (1 + Math.abs(got.scores[i])))));
          // By ranges the memory cache holds heads only; whole reads hold the segments, never a whole decode.
          expect(ranges.heldKeys().filter((k) => !/^head:/.test(k))).toEqual([]);
          expect(whole.heldKeys()).toContain(`seg:${A.ref.key}`);
          expect(whole.heldKeys().filter((k) => k.startsWith('dec:'))).toEqual([]);
          // The JavaScript kernels have no exactMaxsim: null, and the caller decodes + GEMMs.
          expect(await documentScores((ranges as unknown as { store: never }).store, collection, where, { vectors: new Float32Array(dims), length: 1 }, jsKernels)).toBeNull();
          await expect(ranges.documentScores(collection, [[A.ref, 6]], { vectors: new Float32Array(dims), length: 1 })).rejects.toThrow(/outside segment/);
        } finally {
          rmSync(dir, { recursive: true, force: true });
        }
      });

  it('kernel: every finite half converts as decodeHalf does (8-wide and scalar paths), infinities too; an empty document scores -Infinity', () => {
    const k = wasm!;
    const all = new Uint16Array(65536).map((_, i) => i);
    const values = decodeHalf(all);
    // 8192 documents of one row of 8 halves (the 8-wide path), against each one-hot query: each value alone.
    const rowsOf8 = Array.from({ length: 8192 }, (_, r) => ({ kind: 'f16' as const, rows: 1, bytes: new Uint8Array(all.buffer, r * 16, 16) }));
    const finiteRow = (r: number) => values.subarray(r * 8, r * 8 + 8).every(Number.isFinite);
    const out = new Float64Array(8192);
    const wrong: number[] = [];
    for (let c = 0; c < 8; c++) {
      const q = new Float32Array(8);
      q[c] = 1;
      k.exactMaxsim(q, 1, 8, rowsOf8, out);
      for (let r = 0; r < 8192; r++) if (finiteRow(r) && out[r] !== values[r * 8 + c]) wrong.push(r * 8 + c); // a sum from 0: -0 reads 0
    }
    expect(wrong).toEqual([]);
    // One value a document (w = 1: the scalar path), q = [1]: every finite half and the infinities.
    const ones = Array.from({ length: 65536 }, (_, h) => ({ kind: 'f16' as const, rows: 1, bytes: new Uint8Array(all.buffer, h * 2, 2) }));
    const one = new Float64Array(65536);
    k.exactMaxsim(Float32Array.of(1), 1, 1, ones, one);
    for (let h = 0; h < 65536; h++) if (!Number.isNaN(values[h]) && one[h] !== values[h]) wrong.push(h);
    expect(wrong).toEqual([]);
    // Infinities through the 8-wide path: a row of eight +Inf (or -Inf) halves against q = 1.
    const q1 = new Float32Array(8).fill(1);
    k.exactMaxsim(q1, 1, 8, [{ kind: 'f16', rows: 1, bytes: new Uint8Array(new Uint16Array(8).fill(0x7c00).buffer) }, { kind: 'f16', rows: 2, bytes: new Uint8Array(Uint16Array.from([...new Array(8).fill(0xfc00), ...new Array(8).fill(0x3c00)]).buffer) }], out);
    expect([out[0], out[1]]).toEqual([Infinity, 8]);
    k.exactMaxsim(Float32Array.of(1), 1, 1, [{ kind: 'f32', rows: 0, values: new Float32Array(0) }], out);
    expect(out[0]).toBe(-Infinity);
  });
});
