import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { latencyFigures, npy, pairedFigures, pairedRatios, parsePeerLine, parsePeersFlags, peerEnv, rankingsDigest, ratios, turnOrder, type EngineFigures } from './peers';

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

  it('flags: peers are alternated with lateral by default, --no-alternate measures them after lateral', () => {
    expect(parsePeersFlags(['--peers', 'xtr-warp-rs', '--modes', 'xtr']).alternate).toBe(true);
    expect(parsePeersFlags(['--peers', 'xtr-warp-rs', '--modes', 'xtr', '--no-alternate']).alternate).toBe(false);
  });

  it('turns: rotated by one per query, so with one peer lateral goes first on even queries and the peer on odd ones', () => {
    expect([0, 1, 2, 3].map((qi) => turnOrder(qi, 2))).toEqual([
      [0, 1],
      [1, 0],
      [0, 1],
      [1, 0],
    ]);
    // three sides (lateral xtr beside xtr-warp-rs and fast-plaid): each first once in three queries, each side once a query
    const three = [0, 1, 2].map((qi) => turnOrder(qi, 3));
    expect(three).toEqual([
      [0, 1, 2],
      [1, 2, 0],
      [2, 0, 1],
    ]);
    for (const order of three) expect([...order].sort()).toEqual([0, 1, 2]);
    expect(turnOrder(5, 1)).toEqual([0]);
  });

  it('paired ratios: lateral / peer query by query, the median of those, a query either side lacks left out', () => {
    const r = pairedRatios([10, 30, 8, undefined, 12], [5, 10, 8, 4, undefined]);
    expect(r.ratios).toEqual([2, 3, 1]);
    expect(r.median).toBe(2);
    expect(pairedRatios([1], [0]).median).toBeNull();
    expect(() => pairedRatios([1, 2], [1])).toThrow(/length/);
  });

  it('paired figures: the median of per-query ratios is not the ratio of the p50s, and both are reported', () => {
    // the peer's slow first query moves the median of per-query ratios, not the p50s' ratio
    const job = [10, 12, 14, 16, 18];
    const encode = [2, 2, 2, 2, 2];
    const peer = [20, 6, 7, 8, 9];
    const f = pairedFigures({ peer: 'xtr-warp-rs', lateral: 'lateral xtr' }, job, encode, peer, { start: 3.456, end: 2 });
    expect(f.queries).toBe(5);
    expect([f.lateral_job_p50_ms, f.peer_p50_ms]).toEqual([14, 8]);
    expect(f.p50_ratio).toBe(1.75);
    expect(f.paired_ratio_median).toBe(2); // per query 0.5, 2, 2, 2, 2
    expect(f.lateral_job_unencoded_p50_ms).toBe(12);
    expect(f.p50_ratio_unencoded).toBe(1.5);
    expect(f.paired_ratio_median_unencoded).toBe(1.714); // 0.4, 1.667, 1.714, 1.75, 1.778
    expect([f.load_average_start, f.load_average_end]).toEqual([3.46, 2]);
    expect([f.lateral_job_p95_ms, f.lateral_job_unencoded_p95_ms, f.peer_p95_ms]).toEqual([17.6, 15.6, 17.8]);
  });

  it('paired figures: a query one side did not answer is left out of both sides; no encoding times, no unencoded figures', () => {
    const f = pairedFigures({ peer: 'p', lateral: 'l' }, [10, 100, 30], [undefined, undefined, undefined], [5, undefined, 10], { start: 1, end: 1 });
    expect(f.queries).toBe(2);
    expect([f.lateral_job_p50_ms, f.peer_p50_ms]).toEqual([20, 7.5]);
    expect(f.paired_ratio_median).toBe(2.5); // 2 and 3
    expect([f.lateral_job_unencoded_p50_ms, f.p50_ratio_unencoded, f.paired_ratio_median_unencoded]).toEqual([null, null, null]);
  });

  it("a served peer's lines: ready, an answer, done, skipped, and anything else named as bad", () => {
    expect(parsePeerLine('{"status": "ready", "build_s": 1.5, "index_bytes": 100, "queries": 3}')).toEqual({ kind: 'ready', build_s: 1.5, index_bytes: 100, queries: 3 });
    expect(parsePeerLine('{"q": 2, "ms": 0.25, "ranking": [4, 1]}')).toEqual({ kind: 'answer', q: 2, ms: 0.25, ranking: [4, 1] });
    expect(parsePeerLine('{"status": "done", "settings": {"nbits": 4}}')).toEqual({ kind: 'done', settings: { nbits: 4 } });
    expect(parsePeerLine('{"status": "skipped", "reason": "not importable"}')).toEqual({ kind: 'skipped', reason: 'not importable' });
    expect(parsePeerLine('K-means plan: 300 documents').kind).toBe('bad');
    expect(parsePeerLine('{"q": 2, "ms": 0.25, "ranking": [4.5]}').kind).toBe('bad');
    expect(parsePeerLine('{"status": "ready", "build_s": 1}').kind).toBe('bad');
    expect(parsePeerLine('null').kind).toBe('bad');
  });

  it('rankings digest: equal rankings, equal digest; any change of a document or its place, another', () => {
    const a = rankingsDigest([[1, 2, 3], [4]]);
    expect(rankingsDigest([[1, 2, 3], [4]])).toBe(a);
    expect(rankingsDigest([[1, 3, 2], [4]])).not.toBe(a);
    expect(rankingsDigest([[1, 2, 3], [5]])).not.toBe(a);
    expect(a).toMatch(/^[0-9a-f]{16}$/);
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

  it("a peer's environment: OpenMP at --threads unless OMP_NUM_THREADS is set, tqdm quiet, the rest kept", () => {
    expect(peerEnv(1, { PATH: '/bin' })).toEqual({ PATH: '/bin', TQDM_DISABLE: '1', OMP_NUM_THREADS: '1' });
    expect(peerEnv(4, {}).OMP_NUM_THREADS).toBe('4');
    expect(peerEnv(1, { OMP_NUM_THREADS: '2' }).OMP_NUM_THREADS).toBe('2');
  });
});
