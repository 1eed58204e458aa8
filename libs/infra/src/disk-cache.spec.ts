import { mkdtempSync, readdirSync, rmSync, statSync, truncateSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ByteExtents, DiskObjectCache, Gate, SYNC_RANGE_READ_BYTES, partOfLiveProcess } from './disk-cache';

const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));
const folder = () => {
  const d = mkdtempSync(path.join(tmpdir(), 'disk-cache-'));
  dirs.push(d);
  return d;
};

/** An object store of `objects` answering GETs and ranged GETs, recording them. */
function store(objects: Map<string, Uint8Array>) {
  const log = { whole: [] as string[], ranged: [] as [string, number, number][] };
  return {
    log,
    get: async (k: string) => (log.whole.push(k), objects.get(k)?.slice() ?? null),
    getRange: async (k: string, o: number, n: number) => {
      log.ranged.push([k, o, n]);
      const b = objects.get(k);
      if (!b) return null;
      if (o + n > b.byteLength) throw new RangeError(`${k}: [${o}, ${o + n}) past the end`);
      return b.slice(o, o + n);
    },
  };
}

const object = Uint8Array.from({ length: 10_000 }, (_, i) => (i * 31 + 7) & 0xff);

describe('ByteExtents', () => {
  it('records where present bytes lie in the appended file, counts new bytes only, answers coverage and the pieces to read', () => {
    const ex = new ByteExtents();
    expect(ex.add(10, 20, ex.reserve(10))).toBe(10); // file [0, 10)
    expect(ex.add(30, 40, ex.reserve(10))).toBe(10); // file [10, 20)
    expect(ex.covers(10, 20)).toBe(true);
    expect(ex.covers(15, 25)).toBe(false);
    expect(ex.missing(5, 45)).toEqual([[5, 10], [20, 30], [40, 45]]);
    expect(ex.add(20, 30, ex.reserve(10))).toBe(10); // file [20, 30): touches both in the object, not in the file
    expect(ex.covers(10, 40)).toBe(true);
    expect(ex.pieces(15, 35)).toEqual([[5, 5], [20, 10], [10, 5]]);
    expect(ex.extents).toBe(3);
    // a fetch of [5, 45): only its missing edges are recorded, at their place in what was appended
    const at = ex.reserve(40);
    expect(ex.add(5, 45, at)).toBe(10);
    expect(ex.pieces(5, 11)).toEqual([[at, 5], [0, 1]]);
    expect(ex.pieces(39, 45)).toEqual([[19, 1], [at + 35, 5]]);
    expect(ex.add(12, 18, ex.reserve(6))).toBe(0);
    expect(ex.bytes).toBe(40);
    expect(ex.covers(4, 6)).toBe(false);
    expect(ex.pieces(4, 6)).toBeNull();
    expect(ex.add(100, 100, 0)).toBe(0);
    // contiguous in the object and in the file: one extent
    const j = new ByteExtents();
    j.add(0, 10, j.reserve(10));
    j.add(10, 20, j.reserve(10));
    expect(j.extents).toBe(1);
    expect(j.pieces(0, 20)).toEqual([[0, 20]]);
    // a brute-force reference over random adds: each byte's file position
    const ref = new Int32Array(300).fill(-1);
    const r = new ByteExtents();
    let seed = 7;
    const rnd = () => ((seed = (seed * 1103515245 + 12345) & 0x7fffffff), seed / 0x7fffffff);
    for (let k = 0; k < 200; k++) {
      const a = Math.floor(rnd() * 290);
      const b = a + 1 + Math.floor(rnd() * 10);
      const pos = r.reserve(b - a);
      let fresh = 0;
      for (let i = a; i < b; i++) {
        if (ref[i] >= 0) continue;
        ref[i] = pos + (i - a);
        fresh++;
      }
      expect(r.add(a, b, pos)).toBe(fresh);
      const x = Math.floor(rnd() * 290);
      const y = x + 1 + Math.floor(rnd() * 10);
      const present = Array.from(ref.subarray(x, y)).every((v) => v >= 0);
      expect(r.covers(x, y)).toBe(present);
      const where = r.pieces(x, y);
      if (present) expect(where!.flatMap(([p, n]) => Array.from({ length: n }, (_, i) => p + i))).toEqual(Array.from(ref.subarray(x, y)));
      else expect(where).toBeNull();
      const gaps = r.missing(x, y).flatMap(([s, e]) => Array.from({ length: e - s }, (_, i) => s + i));
      expect(gaps).toEqual(Array.from({ length: y - x }, (_, i) => x + i).filter((i) => ref[i] < 0));
    }
    expect(r.bytes).toBe(ref.reduce((a, v) => a + (v >= 0 ? 1 : 0), 0));
  });
});

describe('DiskObjectCache.getRanges', () => {
  it('fetches only the ranges asked (one ranged GET each), keeps them in a sparse copy, answers them again locally', async () => {
    const s = store(new Map([['k', object]]));
    const disk = new DiskObjectCache(s, folder(), 1 << 20, 'ns');
    const got = await disk.getRanges('k', [[100, 50], [5000, 10]]);
    expect(got).toEqual([object.slice(100, 150), object.slice(5000, 5010)]);
    expect(s.log).toEqual({ whole: [], ranged: [['k', 100, 50], ['k', 5000, 10]] });
    expect(disk.stats()).toMatchObject({ rangeGets: 2, rangeBytes: 60, rangeHits: 0, bytes: 60 });
    // a sub-range of a kept range and the same range: local; a range partly outside: one GET of it
    const again = await disk.getRanges('k', [[110, 20], [5000, 10], [140, 30]]);
    expect(again).toEqual([object.slice(110, 130), object.slice(5000, 5010), object.slice(140, 170)]);
    expect(s.log.ranged.slice(2)).toEqual([['k', 140, 30]]);
    expect(disk.stats()).toMatchObject({ rangeGets: 3, rangeHits: 2, bytes: 80 });
  });

  it('a whole local copy answers ranges without a GET; a missing object is null; a range past the end throws', async () => {
    const s = store(new Map([['k', object]]));
    const disk = new DiskObjectCache(s, folder(), 1 << 20, 'ns');
    await disk.get('k');
    expect(await disk.getRanges('k', [[9990, 10]])).toEqual([object.slice(9990)]);
    expect(s.log.ranged).toEqual([]);
    await expect(disk.getRanges('k', [[9995, 10]])).rejects.toThrow(RangeError);
    expect(await disk.getRanges('nope', [[0, 10]])).toBeNull();
  });

  it('readRanges: positioned reads of the local copy, synchronous up to SYNC_RANGE_READ_BYTES and through the thread pool above it, the same bytes either way; a range past the end throws; a copy removed by another process is fetched again', async () => {
    const big = Uint8Array.from({ length: SYNC_RANGE_READ_BYTES + 4096 }, (_, i) => (i * 131 + 3) & 0xff);
    const s = store(new Map([['k', big]]));
    // byte-for-byte, without an element-wise deep equal of megabytes
    const same = (got: Uint8Array[] | null, want: [number, number][]) => expect(got?.map((g, i) => g.length === want[i][1] && Buffer.from(g).equals(big.subarray(want[i][0], want[i][0] + want[i][1])))).toEqual(want.map(() => true));
    const dir = folder();
    const disk = new DiskObjectCache(s, dir, 64 << 20, 'ns');
    const small: [number, number][] = [[5, 100], [0, 0], [big.length - 7, 7], [1 << 20, 3000]];
    // first call: fetched whole (one GET) and written; the ranges are slices of what was fetched
    same(await disk.readRanges('k', small), small);
    expect(s.log.whole).toEqual(['k']);
    // then from the local copy: small ranges (synchronous reads) and ranges summing past the bound (asynchronous)
    same(await disk.readRanges('k', small), small);
    // the synchronous reads share one buffer: each range starts on a multiple of 8 (typed-array views of it stay valid) and none overlaps another
    const views = (await disk.readRanges('k', small))!;
    expect(views.map((v) => v.byteOffset % 8)).toEqual(small.map(() => 0));
    views[0].fill(0xee);
    same(views.slice(1), small.slice(1));
    const large: [number, number][] = [[0, SYNC_RANGE_READ_BYTES], [SYNC_RANGE_READ_BYTES, 4096]];
    same(await disk.readRanges('k', large), large);
    expect(s.log.whole).toEqual(['k']);
    await expect(disk.readRanges('k', [[big.length - 5, 10]])).rejects.toThrow(RangeError);
    await expect(disk.readRanges('k', [[0, SYNC_RANGE_READ_BYTES], [big.length - 5, 10]])).rejects.toThrow(RangeError);
    // removed by another process: fetched from the store again, same bytes
    for (const f of readdirSync(dir)) unlinkSync(path.join(dir, f));
    same(await disk.readRanges('k', small), small);
    expect(s.log.whole).toEqual(['k', 'k']);
  });

  it("readRanges: the synchronous reads go to `into`'s buffer (one too small or not 8-byte aligned refused), the asynchronous ones to buffers of their own; a local copy shorter than its object throws the same error on either path", async () => {
    const big = Uint8Array.from({ length: SYNC_RANGE_READ_BYTES + 4096 }, (_, i) => (i * 131 + 3) & 0xff);
    const dir = folder();
    const disk = new DiskObjectCache(store(new Map([['k', big]])), dir, 64 << 20, 'ns');
    await disk.readRanges('k', [[0, 1]]); // fetched whole and written
    const small: [number, number][] = [[5, 100], [0, 0], [big.length - 7, 7]];
    const lent = new Uint8Array(1024);
    const asked: number[] = [];
    const got = (await disk.readRanges('k', small, undefined, (n) => (asked.push(n), lent)))!;
    expect(asked).toEqual([104 + 0 + 8]);
    expect(got.map((g) => [g.buffer === lent.buffer, g.byteOffset, g.length])).toEqual([[true, 0, 100], [true, 104, 0], [true, 104, 7]]);
    expect(got.map((g, i) => Buffer.from(g).equals(big.subarray(small[i][0], small[i][0] + small[i][1])))).toEqual([true, true, true]);
    await expect(disk.readRanges('k', small, undefined, () => new Uint8Array(100))).rejects.toThrow('readRanges: the buffer given for 112 bytes has 100 at offset 0');
    await expect(disk.readRanges('k', small, undefined, () => lent.subarray(4))).rejects.toThrow('readRanges: the buffer given for 112 bytes has 1020 at offset 4');
    // above the bound: `into` is not asked, each range a buffer of its own
    const large: [number, number][] = [[3, SYNC_RANGE_READ_BYTES], [SYNC_RANGE_READ_BYTES, 4096]];
    const own = (await disk.readRanges('k', large, undefined, () => { throw new Error('into asked'); }))!;
    expect(own.map((g) => [g.byteOffset, g.buffer.byteLength])).toEqual([[0, SYNC_RANGE_READ_BYTES], [0, 4096]]);
    expect(own.map((g, i) => Buffer.from(g).equals(big.subarray(large[i][0], large[i][0] + large[i][1])))).toEqual([true, true]);
    // the copy cut short under the cache (its index still says the object's size): the reads past the cut throw, naming where it ended
    const [copy] = readdirSync(dir).filter((n) => n.endsWith('.obj'));
    truncateSync(path.join(dir, copy), big.length - 10);
    const ended = `k: local copy ended at ${big.length - 10} (expected ${big.length} bytes)`;
    await expect(disk.readRanges('k', [[big.length - 20, 20]])).rejects.toThrow(ended);
    await expect(disk.readRanges('k', [[0, SYNC_RANGE_READ_BYTES], [big.length - 20, 20]])).rejects.toThrow(ended);
  });

  it('invalidate drops the sparse copy (a range that failed its checksum is fetched again); the bound evicts sparse copies; a restart starts them empty', async () => {
    const d = folder();
    const s = store(new Map([['a', object], ['b', object]]));
    const disk = new DiskObjectCache(s, d, 1000, 'ns');
    await disk.getRanges('a', [[0, 600]]);
    await disk.invalidate('a');
    await disk.getRanges('a', [[0, 600]]);
    expect(s.log.ranged.length).toBe(2);
    await disk.getRanges('b', [[0, 600]]); // 1200 bytes present > 1000: a's copy goes
    expect(disk.stats()).toMatchObject({ bytes: 600, files: 1, evictions: 1 });
    await disk.getRanges('a', [[0, 600]]);
    expect(s.log.ranged.length).toBe(4);
    expect(readdirSync(d).filter((n) => n.endsWith('.part')).length).toBe(1);
    const restarted = new DiskObjectCache(s, d, 1000, 'ns');
    expect(await restarted.getRanges('a', [[0, 10]])).toEqual([object.slice(0, 10)]);
    expect(s.log.ranged.length).toBe(5);
  });

  it('without a ranged store: null; with the cache off: every range is a GET, nothing kept', async () => {
    const plain = new DiskObjectCache({ get: async () => object }, folder(), 1 << 20, 'ns');
    expect(plain.ranged).toBe(false);
    expect(await plain.getRanges('k', [[0, 10]])).toBeNull();
    const s = store(new Map([['k', object]]));
    const off = new DiskObjectCache(s, folder(), 0, 'ns');
    expect(await off.getRanges('k', [[0, 10]])).toEqual([object.slice(0, 10)]);
    expect(await off.getRanges('k', [[0, 10]])).toEqual([object.slice(0, 10)]);
    expect(s.log.ranged.length).toBe(2);
  });

  it('getRanges from the local copies (sparse and whole): synchronous reads up to SYNC_RANGE_READ_BYTES and through the thread pool above it, the same bytes either way, each range a buffer of its own', async () => {
    const big = Uint8Array.from({ length: SYNC_RANGE_READ_BYTES + 8192 }, (_, i) => (i * 131 + 3) & 0xff);
    const s = store(new Map([['k', big]]));
    const same = (got: Uint8Array[] | null, want: (readonly [number, number])[]) => {
      expect(got?.map((g, i) => g.length === want[i][1] && Buffer.from(g).equals(big.subarray(want[i][0], want[i][0] + want[i][1])))).toEqual(want.map(() => true));
      // a buffer of its own (typed-array views of a list stay aligned)
      expect(got?.every((g) => g.byteOffset === 0 && g.buffer.byteLength === g.length)).toBe(true);
    };
    const disk = new DiskObjectCache(s, folder(), 1 << 30, 'ns');
    // two calls whose fetched pieces interleave in the sparse file, so later ranges span pieces of both
    const small: (readonly [number, number])[] = Array.from({ length: 50 }, (_, i) => [i * 1000, 300] as const);
    const gaps: (readonly [number, number])[] = Array.from({ length: 49 }, (_, i) => [i * 1000 + 200, 900] as const);
    same(await disk.getRanges('k', small), small);
    same(await disk.getRanges('k', gaps), gaps);
    const gets = s.log.ranged.length;
    const spanning: (readonly [number, number])[] = [[0, 48_000], [150, 2000], [7, 1]];
    same(await disk.getRanges('k', spanning), spanning); // small: synchronous
    // over the synchronous bound: the whole object asked by ranges, then again (local, through the pool)
    const all: (readonly [number, number])[] = [[0, SYNC_RANGE_READ_BYTES], [SYNC_RANGE_READ_BYTES, 8192]];
    same(await disk.getRanges('k', all), all);
    const afterFetch = s.log.ranged.length;
    expect(afterFetch).toBeGreaterThan(gets);
    same(await disk.getRanges('k', all), all);
    same(await disk.getRanges('k', spanning), spanning);
    expect(s.log.ranged.length).toBe(afterFetch);
    // a whole local copy: both ways too
    const whole = new DiskObjectCache(s, folder(), 1 << 30, 'ns');
    await whole.get('k');
    same(await whole.getRanges('k', spanning), spanning);
    same(await whole.getRanges('k', all), all);
    expect(s.log.ranged.length).toBe(afterFetch);
  });

  it('keeps a call\'s fetched ranges appended to one file (only the bytes not yet present; the bound counts the file), and answers ranges spanning several of them locally, byte for byte', async () => {
    const d = folder();
    const s = store(new Map([['k', object]]));
    const disk = new DiskObjectCache(s, d, 1 << 20, 'ns');
    const first = Array.from({ length: 200 }, (_, i) => [i * 40, 20] as const);
    expect(await disk.getRanges('k', first)).toEqual(first.map(([o, n]) => object.slice(o, o + n)));
    const [part] = readdirSync(d).filter((n) => n.endsWith('.part'));
    expect(statSync(path.join(d, part)).size).toBe(4000);
    expect(disk.stats()).toMatchObject({ bytes: 4000, rangeGets: 200 });
    // the gaps between them, overlapping the kept ranges: only the gaps' bytes are appended
    const second = Array.from({ length: 199 }, (_, i) => [i * 40 + 10, 40] as const);
    expect(await disk.getRanges('k', second)).toEqual(second.map(([o, n]) => object.slice(o, o + n)));
    expect(statSync(path.join(d, part)).size).toBe(4000 + 199 * 20);
    expect(disk.stats()).toMatchObject({ bytes: 4000 + 199 * 20, rangeGets: 399 });
    // a range over many extents of both writes: read locally, the object's bytes
    expect(await disk.getRanges('k', [[5, 7000], [3, 1]])).toEqual([object.slice(5, 7005), object.slice(3, 4)]);
    expect(disk.stats()).toMatchObject({ rangeGets: 399, rangeHits: 2 });
  });

  it('caches sharing a folder keep their sparse copies of one object in files of their own: each reads back its own ranges, byte for byte', async () => {
    const d = folder();
    const s = store(new Map([['k', object]]));
    const a = new DiskObjectCache(s, d, 1 << 20, 'ns');
    const b = new DiskObjectCache(s, d, 1 << 20, 'ns');
    // both started (a cache's start deletes the sparse files of processes that are gone)
    expect([await a.get('absent'), await b.get('absent')]).toEqual([null, null]);
    await a.getRanges('k', [[100, 300]]);
    await b.getRanges('k', [[5000, 200]]);
    await a.getRanges('k', [[7000, 50]]);
    expect(readdirSync(d).filter((n) => n.endsWith('.part')).length).toBe(2);
    expect(await a.getRanges('k', [[100, 300], [7000, 50]])).toEqual([object.slice(100, 400), object.slice(7000, 7050)]);
    expect(await b.getRanges('k', [[5000, 200]])).toEqual([object.slice(5000, 5200)]);
    expect(s.log.ranged.length).toBe(3);
    // invalidated by one: its file goes, the other's stays and still answers
    await a.invalidate('k');
    expect(readdirSync(d).filter((n) => n.endsWith('.part')).length).toBe(1);
    expect(await b.getRanges('k', [[5000, 200]])).toEqual([object.slice(5000, 5200)]);
    expect(s.log.ranged.length).toBe(3);
  });

  it("a cache's start deletes the sparse copies of processes that are gone, and keeps a live process's", async () => {
    const d = folder();
    const sha = 'a'.repeat(64);
    // pid_max is at most 2^22 on Linux: a pid above it names no process
    const files = { live: `${sha}.${process.ppid}.0.part`, mine: `${sha}.${process.pid}.7.part`, gone: `${sha}.${(1 << 22) + 12345}.0.part`, old: `${'b'.repeat(64)}.part` };
    for (const f of Object.values(files)) writeFileSync(path.join(d, f), new Uint8Array(10));
    expect(Object.values(files).map(partOfLiveProcess)).toEqual([true, true, false, false]);
    const cache = new DiskObjectCache(store(new Map()), d, 1 << 20, 'ns');
    expect(await cache.get('absent')).toBeNull(); // started
    expect(readdirSync(d).filter((n) => n.endsWith('.part')).sort()).toEqual([files.live, files.mine].sort());
  });

  it('Gate: at most its limit at once, the rest in order, over a long queue', async () => {
    const gate = new Gate(3);
    let now = 0;
    let peak = 0;
    const order: number[] = [];
    await Promise.all(
      Array.from({ length: 3000 }, (_, i) =>
        gate.run(async () => {
          peak = Math.max(peak, ++now);
          order.push(i);
          await Promise.resolve();
          now--;
        }),
      ),
    );
    expect(peak).toBe(3);
    expect(order).toEqual(Array.from({ length: 3000 }, (_, i) => i));
    expect(gate.queued).toBe(0);
  });

  it('at most rangeGetsInFlight ranged GETs at once', async () => {
    let now = 0;
    let peak = 0;
    const slow = {
      get: async () => null,
      getRange: async (_k: string, o: number, n: number) => {
        peak = Math.max(peak, ++now);
        await new Promise((r) => setTimeout(r, 2));
        now--;
        return object.slice(o, o + n);
      },
    };
    const disk = new DiskObjectCache(slow, folder(), 1 << 20, 'ns', { rangeGetsInFlight: 3 });
    const ranges = Array.from({ length: 20 }, (_, i) => [i * 100, 10] as const);
    const got = await disk.getRanges('k', ranges);
    expect(got!.map((b) => b[0])).toEqual(ranges.map(([o]) => object[o]));
    expect(peak).toBe(3);
  });
});
