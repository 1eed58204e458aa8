import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { latencyFigures, npy, parsePeersFlags, ratios, type EngineFigures } from './peers';

/** Reads back an .npy file as numpy's format 1.0 defines it: magic, version, header, data. */
function readNpy(file: string): { header: string; data: Buffer; headerLen: number } {
  const b = readFileSync(file);
  const headerLen = b.readUInt16LE(8);
  return { header: b.subarray(10, 10 + headerLen).toString('latin1'), data: b.subarray(10 + headerLen), headerLen };
}

describe('bench peers helpers', () => {
  it('writes .npy files numpy can read: magic, 64-byte aligned header, shape and little-endian data', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'npy-'));
    try {
      const f32 = Float32Array.from([1.5, -2, 0.25, 3, 4, 5]);
      npy(path.join(dir, 'a.npy'), f32, [2, 3]);
      const a = readNpy(path.join(dir, 'a.npy'));
      expect(readFileSync(path.join(dir, 'a.npy')).subarray(0, 8)).toEqual(Buffer.from([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, 1, 0]));
      expect((10 + a.headerLen) % 64).toBe(0);
      expect(a.header).toMatch(/^\{'descr': '<f4', 'fortran_order': False, 'shape': \(2, 3\), \}\s*\n$/);
      expect(Array.from(new Float32Array(a.data.buffer.slice(a.data.byteOffset, a.data.byteOffset + a.data.byteLength)))).toEqual(Array.from(f32));

      npy(path.join(dir, 'b.npy'), BigInt64Array.from([7n, 300n]), [2]);
      const b = readNpy(path.join(dir, 'b.npy'));
      expect(b.header).toContain("'descr': '<i8'");
      expect(b.header).toContain("'shape': (2,)");
      expect([b.data.readBigInt64LE(0), b.data.readBigInt64LE(8)]).toEqual([7n, 300n]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('flags: one --nprobe / --exact value or none (the service default), comma lists a sweep of every pair', () => {
    const one = parsePeersFlags(['--nprobe', '8', '--exact', '0']);
    expect([one.nprobes, one.exacts]).toEqual([[8], [0]]);
    const none = parsePeersFlags([]);
    expect([none.nprobes, none.exacts]).toEqual([[undefined], [undefined]]);
    const sweep = parsePeersFlags(['--peers', 'none', '--modes', 'xtr,exhaustive', '--nprobe', '4,8,16', '--exact', '0,32']);
    expect([sweep.nprobes, sweep.exacts, sweep.peers]).toEqual([[4, 8, 16], [0, 32], []]);
  });

  it('latency figures: interpolated p50 / p95 and queries per second from the mean', () => {
    const f = latencyFigures([10, 20, 30, 40, 100]);
    expect(f.p50_ms).toBe(30);
    expect(f.p95_ms).toBe(88);
    expect(f.qps).toBe(25);
  });

  it('ratios are lateral / peer, null where either side has no figure', () => {
    const lateral: EngineFigures = { engine: 'lateral xtr', status: 'ok', 'ndcg@10': 0.5, p50_ms: 20, build_s: 4 };
    const peer: EngineFigures = { engine: 'xtr-warp-rs', status: 'ok', 'ndcg@10': 0.4, p50_ms: 10, bytes_per_token: 30 };
    const r = ratios(lateral, peer);
    expect(r['ndcg@10']).toBe(1.25);
    expect(r.p50_ms).toBe(2);
    expect(r.build_s).toBeNull();
    expect(r.bytes_per_token).toBeNull();
  });
});
