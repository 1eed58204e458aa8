import { describe, expect, it } from 'vitest';
import { buildSegmentIndex } from '../segment-index';
import { randomCuts, rng, segmentsOf } from '../test-utils';
import { xtrSearch } from '../xtr';
import type { Hit } from '../types';
import { decodeWarpResiduals, encodeWarpResiduals, fitWarpCodec, warpCodeBytes, type WarpBits } from './codec';
import { buildWarpLayout, openWarpLayout, serializeWarpLayout, warpLayoutLists, warpListSizes, WarpLayoutCorruptError, type WarpLayout } from './layout';
import { warpCentroidScores, warpQuery, warpSearch, warpSearchSteps, warpSegmentSearch, warpSegmentSearchSteps, warpSegmentsSearchSteps, warpTables, warpTopSuffices, warpTPrime, warpQueryTPrime, WarpWorkspace, type WarpSegment } from './engine';
import { fixtureSlice, randomQuery, warpFixture, type WarpFixture } from './test-utils';
import { wasmKernels } from '@lateral/simd';
import { runSteps } from '../steps';

const TOL = 1e-5;

/** Layouts of documents [cuts[s], cuts[s+1]) and their engine segments (in-memory or serialised lists). */
function segmentsFor(f: WarpFixture, cuts: number[], serialised = false): { layouts: WarpLayout[]; segments: WarpSegment[] } {
  const layouts: WarpLayout[] = [];
  const segments: WarpSegment[] = [];
  for (let s = 0; s + 1 < cuts.length; s++) {
    const sl = fixtureSlice(f, cuts[s], cuts[s + 1]);
    const l = buildWarpLayout({ vectors: sl.vectors, dims: f.corpus.dims, tokenOffsets: sl.tokenOffsets, centroids: f.centroids, codec: f.codec, assignment: sl.assignment });
    layouts.push(l);
    segments.push({ documents: cuts[s + 1] - cuts[s], docBase: cuts[s], lists: serialised ? openWarpLayout(serializeWarpLayout(l), `seg-${s}`) : warpLayoutLists(l) });
  }
  return { layouts, segments };
}

function dot(a: Float32Array, ao: number, b: Float32Array, bo: number, d: number): number {
  let s = 0;
  for (let j = 0; j < d; j++) s += a[ao + j] * b[bo + j];
  return s;
}

/** Hits agree: same keys in the same order (up to swaps of scores within tol), scores within tol. */
function expectSameHits(got: Hit[], want: Hit[], tol = TOL): void {
  expect(got.length).toBe(want.length);
  const wantScore = new Map(want.map((h) => [h.key, h.score]));
  for (let r = 0; r < got.length; r++) {
    expect(wantScore.has(got[r].key)).toBe(true);
    expect(Math.abs(got[r].score - wantScore.get(got[r].key)!)).toBeLessThanOrEqual(tol);
    expect(Math.abs(got[r].score - want[r].score)).toBeLessThanOrEqual(tol);
  }
}

/**
 * WARP by brute force on the decoded vectors: sort all centroids per query token, probe the
 * first nprobe, impute from the cumulative global sizes, score every token of every document.
 */
function bruteWarp(f: WarpFixture, q: Float32Array, n: number, nprobe: number, tPrime: number, bound: number): { imputed: number[]; probes: number[][]; scores: Map<number, number> } {
  const d = f.corpus.dims;
  const K = f.K;
  const sizes = new Float64Array(K);
  for (let t = 0; t < f.T; t++) sizes[f.assignment[t]]++;
  const imputed: number[] = [];
  const probes: number[][] = [];
  for (let i = 0; i < n; i++) {
    const s = [...Array(K).keys()].map((c) => ({ c, s: Math.fround(dot(q, i * d, f.centroids, c * d, d)) }));
    s.sort((a, b) => b.s - a.s || a.c - b.c);
    probes.push(s.slice(0, nprobe).map((x) => x.c));
    const b = Math.max(nprobe, Math.min(K, bound));
    let cum = 0;
    let below = 0;
    for (let k = 0; k < b; k++) {
      cum += sizes[s[k].c];
      if (cum < tPrime) below++;
      else break;
    }
    imputed.push(s[Math.min(below, b - 1)].s);
  }
  const scores = new Map<number, number>();
  for (let doc = 0; doc < f.corpus.lengths.length; doc++) {
    let total = 0;
    let reached = false;
    for (let i = 0; i < n; i++) {
      let best = -Infinity;
      for (let t = f.tokenOffsets[doc]; t < f.tokenOffsets[doc + 1]; t++) {
        if (probes[i].includes(f.assignment[t])) best = Math.max(best, dot(q, i * d, f.reconstructed, t * d, d));
      }
      if (best > -Infinity) reached = true;
      total += best > -Infinity ? best : imputed[i];
    }
    if (reached) scores.set(doc, total / n);
  }
  return { imputed, probes, scores };
}

describe('warp engine', () => {
  for (const bits of [2, 4] as WarpBits[]) {
    for (const d of [128, 7, 5, 1]) {
      it(`b = ${bits}, d = ${d}: table lookups equal decode-then-dot (tables, and token scores in the engine)`, () => {
        const r = rng(bits * 1000 + d);
        const n = 3;
        const T = 40;
        const res = Float32Array.from({ length: T * d }, () => (r() - 0.5) * 0.3);
        const codec = fitWarpCodec(res, T, d, bits);
        const codes = encodeWarpResiduals(codec, res, T);
        const dec = decodeWarpResiduals(codec, codes, T);
        const q = randomQuery(d + bits, n, d);
        const tables = warpTables(q, n, codec);
        const bpt = warpCodeBytes(d, bits);
        for (let i = 0; i < n; i++) {
          for (let t = 0; t < T; t++) {
            let s = 0;
            for (let p = 0; p < bpt; p++) s += tables[(i * bpt + p) * 256 + codes[t * bpt + p]];
            expect(Math.abs(s - dot(q, i * d, dec, t * d, d))).toBeLessThanOrEqual(TOL);
          }
          // bits above the last dimension do not change an entry
          const used = (d * bits) % 8;
          if (used) for (let v = 0; v < 256; v++) expect(tables[(i * bpt + bpt - 1) * 256 + v]).toBe(tables[(i * bpt + bpt - 1) * 256 + (v & ((1 << used) - 1))]);
        }
        // through the engine: one token per document, every centroid probed, no normalisation:
        // score(doc) = q . (c + r) exactly as decode-then-dot, within tolerance
        const K = 3;
        const centroids = Float32Array.from({ length: K * d }, () => r() - 0.5);
        const assignment = Uint32Array.from({ length: T }, (_, t) => t % K);
        const vectors = new Float32Array(T * d);
        for (let t = 0; t < T; t++) for (let j = 0; j < d; j++) vectors[t * d + j] = centroids[assignment[t] * d + j] + res[t * d + j];
        const l = buildWarpLayout({ vectors, dims: d, tokenOffsets: Uint32Array.from({ length: T + 1 }, (_, i) => i), centroids, codec, assignment });
        const one = q.subarray(0, d);
        const query = warpQuery(one, 1, centroids, codec, warpListSizes([l]), { nprobe: K });
        const hits = warpSegmentSearch(query, { documents: T, docBase: 0, lists: warpLayoutLists(l) }, { topN: T, normalize: false });
        expect(hits.docs.length).toBe(T);
        const rebuilt = decodeWarpResiduals(codec, encodeWarpResiduals(codec, Float32Array.from(vectors.map((v, k) => Math.fround(v - centroids[assignment[Math.floor(k / d)] * d + (k % d)]))), T), T);
        hits.docs.forEach((doc, h) => {
          let s = 0;
          for (let j = 0; j < d; j++) s += one[j] * Math.fround(centroids[assignment[doc] * d + j] + rebuilt[doc * d + j]);
          expect(Math.abs(hits.scores[h] - s)).toBeLessThanOrEqual(TOL);
        });
      });
    }
  }

  for (const bits of [2, 4] as WarpBits[]) {
    it(`b = ${bits}: every centroid probed equals XTR (xtrSearch, k' = T) on the decoded vectors, over random segment cuts`, () => {
      for (const seed of [11, 12, 13]) {
        const f = warpFixture(seed, { documents: 60, dims: 16, K: 10, bits, maxLen: 10 });
        const n = 5;
        const q = randomQuery(seed + 50, n, 16);
        const r = rng(seed);
        const xtrCuts = randomCuts(r, 60, 4);
        const xtrSegs = segmentsOf({ ...f.corpus, vectors: f.reconstructed }, xtrCuts);
        const parts = xtrSegs.map((segment, s) => ({
          segment,
          index: buildSegmentIndex(segment, f.centroids, 16, { assignments: f.assignment.slice(f.tokenOffsets[xtrCuts[s]], f.tokenOffsets[xtrCuts[s + 1]]) }),
        }));
        const want = xtrSearch(parts, q, n, f.centroids, { kPrime: f.T, nprobe: f.K, topN: 60 }).hits;
        const { layouts, segments } = segmentsFor(f, randomCuts(r, 60, 3), true);
        const got = warpSearch(segments, q, n, f.centroids, f.codec, warpListSizes(layouts), { nprobe: f.K, topN: 60 });
        expect(got.scored).toBe(n * f.T);
        expectSameHits(got.hits, want);
        expect(got.hits.length).toBe(f.corpus.lengths.filter((m) => m > 0).length);
      }
    });
  }

  it('centroid scores Q C^T equal the plain float64 dot in dimension order, for any n and K (blocked 2 x 4, remainders)', () => {
    const r = rng(17);
    for (let trial = 0; trial < 30; trial++) {
      const n = 1 + Math.floor(r() * 5), K = 1 + Math.floor(r() * 11), d = 1 + Math.floor(r() * 20);
      const q = Float32Array.from({ length: n * d }, () => r() - 0.5);
      const C = Float32Array.from({ length: K * d }, () => r() - 0.5);
      const want = Float32Array.from({ length: n * K }, (_, e) => dot(q, Math.floor(e / K) * d, C, (e % K) * d, d));
      expect([...warpCentroidScores(q, n, C, d)]).toEqual([...want]);
    }
  });

  it('imputation equals a brute-force reference (full sort, cumulative global sizes, t\', bound), with ties', () => {
    const r = rng(21);
    for (let trial = 0; trial < 200; trial++) {
      const K = 1 + Math.floor(r() * 20);
      const n = 1 + Math.floor(r() * 4);
      const d = 4;
      const S = Float32Array.from({ length: n * K }, () => Math.round(r() * 10) / 10 - 0.5); // many ties
      const sizes = Float64Array.from({ length: K }, () => (r() < 0.3 ? 0 : Math.floor(r() * 50)));
      const nprobe = 1 + Math.floor(r() * K);
      const bound = 1 + Math.floor(r() * (K + 3));
      const tPrime = 1 + Math.floor(r() * 400);
      const codec = fitWarpCodec(Float32Array.from({ length: 8 * d }, () => r() - 0.5), 8, d, 2);
      const q = new Float32Array(n * d);
      const wq = warpQuery(q, n, new Float32Array(K * d), codec, sizes, { nprobe, bound, tPrime, centroidScores: S });
      for (let i = 0; i < n; i++) {
        const order = [...Array(K).keys()].sort((a, b) => S[i * K + b] - S[i * K + a] || a - b);
        expect([...wq.probes.subarray(i * nprobe, (i + 1) * nprobe)]).toEqual(order.slice(0, nprobe));
        expect([...wq.probeScores.subarray(i * nprobe, (i + 1) * nprobe)]).toEqual(order.slice(0, nprobe).map((c) => S[i * K + c]));
        const b = Math.max(nprobe, Math.min(K, bound));
        const cum = order.slice(0, b).map((c) => sizes[c]).map((_, k, a) => a.slice(0, k + 1).reduce((x, y) => x + y, 0));
        const at = Math.min(cum.filter((x) => x < tPrime).length, b - 1);
        expect(wq.imputed[i]).toBe(S[i * K + order[at]]);
      }
    }
    expect(warpTPrime(0)).toBe(1000);
    expect(warpTPrime(571_000)).toBe(2000);
    expect(warpTPrime(660_000_000)).toBe(72_000);
  });

  it('warpTopSuffices: when the best k are enough, warpQuery with bound k and those k equals warpQuery with the whole bound; when not, the walk needs more', () => {
    const r = rng(23);
    let enough = 0;
    let short = 0;
    for (let trial = 0; trial < 300; trial++) {
      const K = 2 + Math.floor(r() * 30);
      const n = 1 + Math.floor(r() * 4);
      const d = 4;
      const S = Float32Array.from({ length: n * K }, () => Math.round(r() * 10) / 10 - 0.5); // many ties
      const sizes = Float64Array.from({ length: K }, () => (r() < 0.3 ? 0 : Math.floor(r() * 50)));
      const nprobe = 1 + Math.floor(r() * Math.min(K, 4));
      const bound = Math.max(nprobe, Math.min(K, 1 + Math.floor(r() * (K + 3))));
      const k = nprobe + Math.floor(r() * (bound - nprobe + 1));
      const tPrime = 1 + Math.floor(r() * 300);
      const codec = fitWarpCodec(Float32Array.from({ length: 8 * d }, () => r() - 0.5), 8, d, 2);
      const q = new Float32Array(n * d);
      // the best `w` per token as a TopK gives them (best first, ties: lower index)
      const topOf = (w: number) => {
        const ids = new Uint32Array(n * w);
        const scores = new Float32Array(n * w);
        for (let i = 0; i < n; i++) {
          const order = [...Array(K).keys()].sort((a, b) => S[i * K + b] - S[i * K + a] || a - b).slice(0, w);
          order.forEach((c, p) => ((ids[i * w + p] = c), (scores[i * w + p] = S[i * K + c])));
        }
        return { k: w, ids, scores };
      };
      const full = warpQuery(q, n, new Float32Array(K * d), codec, sizes, { nprobe, bound, tPrime, centroidScores: S });
      const top = topOf(k);
      if (warpTopSuffices(top.ids, n, k, sizes, tPrime)) {
        enough++;
        const got = warpQuery(q, n, new Float32Array(K * d), codec, sizes, { nprobe, bound: k, tPrime, centroidTop: top });
        expect([...got.probes]).toEqual([...full.probes]);
        expect([...got.probeScores]).toEqual([...full.probeScores]);
        expect([...got.imputed]).toEqual([...full.imputed]);
      } else {
        short++;
        // some token's best k hold fewer than t' tokens: its walk goes past them
        const walks = [...Array(n).keys()].map((i) => [...top.ids.subarray(i * k, (i + 1) * k)].reduce((a, c) => a + sizes[c], 0));
        expect(walks.some((x) => x < tPrime)).toBe(true);
      }
    }
    expect(enough).toBeGreaterThan(20);
    expect(short).toBeGreaterThan(20);
    expect(() => warpTopSuffices(new Uint32Array(3), 2, 2, new Float64Array(4), 1)).toThrow(/n x k/);
    expect(warpQueryTPrime(Float64Array.of(300_000, 271_000))).toBe(2000);
    expect(warpQueryTPrime(Float64Array.of(300_000, 271_000), 7)).toBe(7);
  });

  it('partial probes: documents, scores and imputation equal the brute-force WARP reference on the decoded vectors', () => {
    for (const [seed, bits, nprobe, tPrime, bound] of [[31, 4, 1, 30, 128], [32, 2, 3, 200, 5], [33, 4, 2, 1, 128], [34, 2, 4, 100000, 6]] as const) {
      const f = warpFixture(seed, { documents: 45, dims: 12, K: 12, bits, maxLen: 8 });
      const n = 4;
      const q = randomQuery(seed * 7, n, 12);
      const ref = bruteWarp(f, q, n, nprobe, tPrime, bound);
      const { layouts, segments } = segmentsFor(f, [0, 20, 45]);
      const got = warpSearch(segments, q, n, f.centroids, f.codec, warpListSizes(layouts), { nprobe, tPrime, bound, topN: 45 });
      for (let i = 0; i < n; i++) expect(Math.abs(got.imputed[i] - ref.imputed[i])).toBeLessThanOrEqual(1e-6);
      expect(got.hits.length).toBe(ref.scores.size);
      for (const h of got.hits) expect(Math.abs(h.score - ref.scores.get(h.key)!)).toBeLessThanOrEqual(TOL);
      const want = [...ref.scores].sort((a, b) => b[1] - a[1] || a[0] - b[0]);
      got.hits.forEach((h, k) => expect(Math.abs(h.score - want[k][1])).toBeLessThanOrEqual(TOL));
    }
  });

  it('splitting a collection into segments gives the same top-k as one segment, bit for bit (global t\')', () => {
    for (const seed of [41, 42, 43, 44]) {
      const f = warpFixture(seed, { documents: 80, dims: 24, K: 16, bits: seed % 2 ? 2 : 4 });
      const n = 6;
      const q = randomQuery(seed, n, 24);
      const opts = { nprobe: 3, topN: 10, tPrime: 40 };
      const one = segmentsFor(f, [0, 80]);
      const want = warpSearch(one.segments, q, n, f.centroids, f.codec, warpListSizes(one.layouts), opts);
      const cut = segmentsFor(f, randomCuts(rng(seed), 80, 5), seed % 2 === 0);
      const got = warpSearch(cut.segments, q, n, f.centroids, f.codec, warpListSizes(cut.layouts), opts);
      expect(got.hits.map((h) => [h.key, h.score])).toEqual(want.hits.map((h) => [h.key, h.score]));
      expect([...got.imputed]).toEqual([...want.imputed]);
      expect(got.scored).toBe(want.scored);
      // a per-segment threshold would not be comparable: the first segment's own sizes impute differently
      const local = warpQuery(q, n, f.centroids, f.codec, warpListSizes(cut.layouts.slice(0, 1)), opts);
      expect([...local.imputed]).not.toEqual([...want.imputed]);
    }
  });

  it('the word-at-a-time and byte-at-a-time lookups give identical scores', () => {
    for (const [dims, bits] of [[16, 2], [24, 4], [128, 4]] as const) {
      const f = warpFixture(dims + bits, { documents: 30, dims, K: 6, bits });
      const q = randomQuery(dims, 3, dims);
      const { layouts, segments } = segmentsFor(f, [0, 30]);
      const withWords = warpSearch(segments, q, 3, f.centroids, f.codec, warpListSizes(layouts), { nprobe: 3, topN: 30 });
      const src = segments[0].lists;
      expect(src.list(withWords.query.probes[0]).words).toBeInstanceOf(Uint32Array);
      const bytesOnly: WarpSegment = { ...segments[0], lists: { list: (c) => ({ ...src.list(c), words: undefined }) } };
      const without = warpSearch([bytesOnly], q, 3, f.centroids, f.codec, warpListSizes(layouts), { nprobe: 3, topN: 30 });
      expect(without.hits.map((h) => [h.key, h.score])).toEqual(withWords.hits.map((h) => [h.key, h.score]));
    }
  });

  it('in steps: yields between query tokens and segments, same result; an abandoned segment leaves the workspace clean', () => {
    const f = warpFixture(81, { documents: 40, dims: 12, K: 8, bits: 4 });
    const n = 5;
    const q = randomQuery(81, n, 12);
    const { layouts, segments } = segmentsFor(f, [0, 13, 40]);
    const sizes = warpListSizes(layouts);
    const opts = { nprobe: 3, topN: 15 };
    const want = warpSearch(segments, q, n, f.centroids, f.codec, sizes, opts);
    const gen = warpSearchSteps(segments, q, n, f.centroids, f.codec, sizes, opts);
    let yields = 0;
    let r = gen.next();
    for (; !r.done; r = gen.next()) yields++;
    expect(yields).toBe(segments.length * n);
    expect(r.value.hits).toEqual(want.hits);
    const buffer = new Float32Array(n * 6 * 256 + 7);
    const query = warpQuery(q, n, f.centroids, f.codec, sizes, { ...opts, tables: buffer });
    expect(query.tables.buffer).toBe(buffer.buffer);
    expect([...query.tables]).toEqual([...warpTables(q, n, f.codec)]);
    const ws = new WarpWorkspace();
    const fresh = warpSegmentSearch(query, segments[1], { topN: 15 });
    const abandoned = warpSegmentSearchSteps(query, segments[1], { topN: 15, workspace: ws });
    abandoned.next();
    abandoned.next();
    abandoned.return(undefined as never);
    const again = warpSegmentSearch(query, segments[1], { topN: 15, workspace: ws });
    expect([...again.docs]).toEqual([...fresh.docs]);
    expect([...again.scores]).toEqual([...fresh.scores]);
  });

  it('several segments query token by query token: the same hits bit for bit as each segment alone (masks, reused and abandoned workspaces)', () => {
    const f = warpFixture(97, { documents: 60, dims: 16, K: 10, bits: 4 });
    const n = 6;
    const q = randomQuery(97, n, 16);
    const { layouts, segments } = segmentsFor(f, [0, 9, 31, 60]);
    const masked = segments.map((seg, k) => (k === 1 ? { ...seg, mask: Uint8Array.from({ length: seg.documents }, (_, d) => (d % 3 === 0 ? 0 : 1)) } : seg));
    const query = warpQuery(q, n, f.centroids, f.codec, warpListSizes(layouts), { nprobe: 4 });
    const alone = masked.map((seg) => warpSegmentSearch(query, seg, { topN: 12 }));
    const workspaces: WarpWorkspace[] = [];
    const run = () => {
      const gen = warpSegmentsSearchSteps(query, masked, { topN: 12, workspaces });
      let yields = 0;
      let r = gen.next();
      for (; !r.done; r = gen.next()) yields++;
      expect(yields).toBe(n - 1);
      return r.value;
    };
    for (const together of [run(), run()]) {
      expect(together.length).toBe(masked.length);
      together.forEach((h, k) => {
        expect(h.docBase).toBe(alone[k].docBase);
        expect([...h.docs]).toEqual([...alone[k].docs]);
        expect(h.scores.every((x, i) => Object.is(x, alone[k].scores[i]))).toBe(true);
        expect([h.scored, h.candidates]).toEqual([alone[k].scored, alone[k].candidates]);
      });
    }
    const abandoned = warpSegmentsSearchSteps(query, masked, { topN: 12, workspaces });
    abandoned.next();
    abandoned.next();
    abandoned.return(undefined as never);
    const again = run();
    again.forEach((h, k) => expect([...h.scores]).toEqual([...alone[k].scores]));
  });

  it('the WebAssembly resident scan equals the JavaScript path bit for bit: lists dropped over the budget, copied per call when one will not fit, a second scan meanwhile, and the state lost to another kernel', () => {
    const wasm = wasmKernels();
    if (!wasm) return; // JavaScript kernels only: the resident path does not exist
    for (const bits of [4, 2] as const) {
      const f = warpFixture(131 + bits, { documents: 70, dims: 24, K: 12, bits });
      const n = 5;
      const q = randomQuery(7 + bits, n, 24);
      const { segments } = segmentsFor(f, [0, 9, 30, 31, 70], true);
      const masked = segments.map((s, k) => (k === 2 ? { ...s, mask: Uint8Array.from({ length: s.documents }, (_, i) => i % 3) } : s));
      const query = warpQuery(q, n, f.centroids, f.codec, warpListSizes(segments.map((s) => (s.lists as ReturnType<typeof openWarpLayout>).directory)), { nprobe: 5 });
      const js = runSteps(warpSegmentsSearchSteps(query, masked, { topN: 20, resident: false }));
      const same = (got: typeof js) =>
        got.forEach((h, k) => {
          expect([...h.docs]).toEqual([...js[k].docs]);
          expect(h.scores.every((x, i) => Object.is(x, js[k].scores[i]))).toBe(true);
          expect([h.scored, h.candidates]).toEqual([js[k].scored, js[k].candidates]);
        });
      const budget = wasm.residentListBytes;
      try {
        same(runSteps(warpSegmentsSearchSteps(query, masked, { topN: 20 })));
        same(runSteps(warpSegmentsSearchSteps(query, masked, { topN: 20 }))); // lists kept from the first
        wasm.residentListBytes = 2048; // a few lists: dropped and copied in again within a token
        same(runSteps(warpSegmentsSearchSteps(query, masked, { topN: 20 })));
        wasm.residentListBytes = 0; // none fits: every list copied for its call
        same(runSteps(warpSegmentsSearchSteps(query, masked, { topN: 20 })));
        wasm.residentListBytes = budget;
        // A second scan while the first holds the state runs the JavaScript path; both answer right.
        const first = warpSegmentsSearchSteps(query, masked, { topN: 20 });
        first.next();
        same(runSteps(warpSegmentsSearchSteps(query, masked, { topN: 20 })));
        // A kernel call that reaches into the resident regions (a large scoreRows) loses the first's state: it starts over on the JavaScript path.
        const rows = 70_000, wide = 256;
        wasm.scoreRowsWith('scalar', new Float32Array(wide), 0, new Float32Array(rows * wide), 0, wide, Uint32Array.from({ length: rows }, (_, i) => i), 0, rows, new Float64Array(rows));
        let r = first.next();
        while (!r.done) r = first.next();
        same(r.value);
        same(runSteps(warpSegmentsSearchSteps(query, masked, { topN: 20 })));
      } finally {
        wasm.residentListBytes = budget;
      }
    }
  });

  it('the resident scan\'s top-k in the module equals the JavaScript path bit for bit, from the candidates where they are few and from every document\'s record where they are many', () => {
    const wasm = wasmKernels();
    if (!wasm) return; // JavaScript kernels only: the resident path does not exist
    const f = warpFixture(977, { documents: 1500, dims: 16, K: 128, bits: 4, maxLen: 4 });
    const { segments } = segmentsFor(f, [0, 700, 1500], true);
    const sizes = warpListSizes(segments.map((s) => (s.lists as ReturnType<typeof openWarpLayout>).directory));
    let sparse = 0;
    let dense = 0;
    for (const [n, nprobe] of [[1, 1], [2, 1], [6, 8], [12, 32]] as const) {
      const query = warpQuery(randomQuery(40 + n, n, 16), n, f.centroids, f.codec, sizes, { nprobe });
      for (const topN of [1, 10, 5000]) {
        const js = runSteps(warpSegmentsSearchSteps(query, segments, { topN, resident: false }));
        const got = runSteps(warpSegmentsSearchSteps(query, segments, { topN }));
        got.forEach((h, k) => {
          expect([...h.docs], `n=${n} nprobe=${nprobe} topN=${topN}`).toEqual([...js[k].docs]);
          expect(h.scores.every((x, i) => Object.is(x, js[k].scores[i])) && h.scores.length === js[k].scores.length).toBe(true);
          expect(h.candidates).toBe(js[k].candidates);
          if (h.candidates * 8 < segments[k].documents) sparse++;
          else dense++;
        });
      }
    }
    // both ways of reading the candidates ran
    expect(sparse).toBeGreaterThan(0);
    expect(dense).toBeGreaterThan(0);
  });

  it('the resident scan: lists found by source and centroid across queries, a list object shared by two sources, and a bad list refused as the JavaScript path refuses it', () => {
    const wasm = wasmKernels();
    if (!wasm) return; // JavaScript kernels only: the resident path does not exist
    for (const bits of [4, 2] as const) {
      const f = warpFixture(211 + bits, { documents: 60, dims: 20, K: 10, bits });
      const { layouts, segments } = segmentsFor(f, [0, 25, 60], true);
      const sizes = warpListSizes(layouts);
      // a third segment reading the first's list objects through another source: found by object, not copied again
      const shared: WarpSegment = { ...segments[0], docBase: 60, lists: { list: (c) => segments[0].lists.list(c) } };
      const segs = [...segments, shared];
      for (const seed of [1, 2, 3]) {
        const n = 2 + seed;
        const query = warpQuery(randomQuery(300 + seed, n, 20), n, f.centroids, f.codec, sizes, { nprobe: 3 + seed });
        const js = runSteps(warpSegmentsSearchSteps(query, segs, { topN: 30, resident: false }));
        const got = runSteps(warpSegmentsSearchSteps(query, segs, { topN: 30 }));
        got.forEach((h, k) => {
          expect([...h.docs]).toEqual([...js[k].docs]);
          expect(h.scores.every((x, i) => Object.is(x, js[k].scores[i]))).toBe(true);
          expect([h.scored, h.candidates]).toEqual([js[k].scored, js[k].candidates]);
        });
        expect([...got[2].scores]).toEqual([...got[0].scores]);
      }
      // bad lists (every centroid probed): too few ids, or an id past the segment's documents
      const query = warpQuery(randomQuery(9, 2, 20), 2, f.centroids, f.codec, sizes, { nprobe: f.K });
      const real = layouts[0];
      const good = warpLayoutLists(real);
      const c = [...Array(f.K).keys()].find((k) => good.list(k).count > 1)!;
      const fewIds: WarpSegment = { documents: 25, docBase: 0, lists: { list: (k) => (k === c ? { ...good.list(k), docs: good.list(k).docs.subarray(0, 1) } : good.list(k)) } };
      const pastEnd: WarpSegment = { documents: 25, docBase: 0, lists: { list: (k) => (k === c ? { ...good.list(k), docs: Uint32Array.from(good.list(k).docs, () => 25) } : good.list(k)) } };
      for (const resident of [true, false]) {
        expect(() => runSteps(warpSegmentsSearchSteps(query, [fewIds], { topN: 5, resident }))).toThrow(new RegExp(`list of centroid ${c} has 1 ids`));
        expect(() => runSteps(warpSegmentsSearchSteps(query, [pastEnd], { topN: 5, resident }))).toThrow(new RegExp(`list of centroid ${c} names document 25, the segment has 25`));
      }
      // the module is left usable: the good lists still answer as the JavaScript path does
      const ok = runSteps(warpSegmentsSearchSteps(query, [{ documents: 25, docBase: 0, lists: good }], { topN: 25 }));
      const okJs = runSteps(warpSegmentsSearchSteps(query, [{ documents: 25, docBase: 0, lists: good }], { topN: 25, resident: false }));
      expect([...ok[0].scores]).toEqual([...okJs[0].scores]);
    }
  });

  it('the resident scan: sources of one identity (each query\'s reads of one layout) share where their lists sit, the same bits; another identity is not taken for it', () => {
    const wasm = wasmKernels();
    if (!wasm) return; // JavaScript kernels only: the resident path does not exist
    const f = warpFixture(227, { documents: 50, dims: 16, K: 12, bits: 4 });
    const { layouts, segments } = segmentsFor(f, [0, 20, 50], true);
    const sizes = warpListSizes(layouts);
    const identities = segments.map(() => ({}));
    let calls = 0;
    // a query's source, as warpLists makes one per query: its own object, the layout's identity
    const sourceOf = (k: number, identity: object): WarpSegment => ({ ...segments[k], lists: { identity, list: (c) => (calls++, segments[k].lists.list(c)) } });
    const query = warpQuery(randomQuery(41, 4, 16), 4, f.centroids, f.codec, sizes, { nprobe: 4 });
    const js = runSteps(warpSegmentsSearchSteps(query, segments, { topN: 50, resident: false }));
    const same = (got: typeof js) =>
      got.forEach((h, k) => {
        expect([...h.docs]).toEqual([...js[k].docs]);
        expect(h.scores.every((x, i) => Object.is(x, js[k].scores[i]))).toBe(true);
        expect([h.scored, h.candidates]).toEqual([js[k].scored, js[k].candidates]);
      });
    same(runSteps(warpSegmentsSearchSteps(query, segments.map((_, k) => sourceOf(k, identities[k])), { topN: 50 })));
    expect(calls).toBeGreaterThan(0);
    calls = 0;
    // new sources of the same identities: every list found where the first query's sources put it
    same(runSteps(warpSegmentsSearchSteps(query, segments.map((_, k) => sourceOf(k, identities[k])), { topN: 50 })));
    expect(calls).toBe(0);
    // the two segments' identities swapped would name the other's lists: each identity is its own, so new identities ask their sources again
    same(runSteps(warpSegmentsSearchSteps(query, segments.map((_, k) => sourceOf(k, {})), { topN: 50 })));
    expect(calls).toBeGreaterThan(0);
  });

  it('masked documents are never scored; the others keep their scores', () => {
    const f = warpFixture(51, { documents: 40, dims: 10, K: 8, bits: 4 });
    const q = randomQuery(5, 4, 10);
    const { layouts, segments } = segmentsFor(f, [0, 17, 40]);
    const sizes = warpListSizes(layouts);
    const all = warpSearch(segments, q, 4, f.centroids, f.codec, sizes, { nprobe: 2, topN: 40 });
    const masks = segments.map((s) => Uint8Array.from({ length: s.documents }, (_, i) => ((s.docBase + i) % 3 === 0 ? 0 : 1)));
    const masked = warpSearch(segments.map((s, k) => ({ ...s, mask: masks[k] })), q, 4, f.centroids, f.codec, sizes, { nprobe: 2, topN: 40 });
    expect(masked.hits.map((h) => [h.key, h.score])).toEqual(all.hits.filter((h) => h.key % 3 !== 0).map((h) => [h.key, h.score]));
  });

  it('a corrupt probed list throws WarpLayoutCorruptError, an unprobed one is never read, and the workspace stays clean', () => {
    const f = warpFixture(61, { documents: 50, dims: 8, K: 8, bits: 4 });
    const l = buildWarpLayout({ vectors: f.corpus.vectors, dims: 8, tokenOffsets: f.tokenOffsets, centroids: f.centroids, codec: f.codec });
    const bytes = serializeWarpLayout(l);
    const sizes = warpListSizes([l]);
    let bad = 0;
    while (l.listOffsets[bad + 1] === l.listOffsets[bad]) bad++;
    const reader = openWarpLayout(bytes, 'seg-c');
    const at = reader.directory.offsets[bad] + 1;
    bytes[at] ^= 0xff; // after opening: the list is checked when first read
    const good = bad === 0 ? 1 : 0;
    const seg: WarpSegment = { documents: 50, docBase: 0, lists: reader };
    // query tokens equal to a centroid probe exactly that centroid with nprobe 1
    const qOf = (c: number) => f.centroids.slice(c * 8, (c + 1) * 8);
    const ws = new WarpWorkspace();
    const fresh = warpSegmentSearch(warpQuery(qOf(good), 1, f.centroids, f.codec, sizes, { nprobe: 1 }), seg, { topN: 50 });
    expect(fresh.docs.length).toBeGreaterThan(0);
    expect(reader.verified).toBe(1);
    const q2 = new Float32Array(16);
    q2.set(qOf(good), 0);
    q2.set(qOf(bad), 8);
    expect(() => warpSegmentSearch(warpQuery(q2, 2, f.centroids, f.codec, sizes, { nprobe: 1 }), seg, { topN: 50, workspace: ws })).toThrow(WarpLayoutCorruptError);
    const again = warpSegmentSearch(warpQuery(qOf(good), 1, f.centroids, f.codec, sizes, { nprobe: 1 }), seg, { topN: 50, workspace: ws });
    expect([...again.docs]).toEqual([...fresh.docs]);
    expect([...again.scores]).toEqual([...fresh.scores]);
    expect(reader.verified).toBe(1);
  });

  it('rejects bad input, naming the field', () => {
    const f = warpFixture(71, { documents: 10, dims: 4, K: 4, bits: 2 });
    const q = randomQuery(1, 2, 4);
    const sizes = new Float64Array(4).fill(3);
    expect(() => warpQuery(q, 2, f.centroids, f.codec, sizes, { nprobe: 0 })).toThrow(/nprobe must be an integer in \[1, K = 4\], got 0/);
    expect(() => warpQuery(q, 2, f.centroids, f.codec, sizes, { nprobe: 5 })).toThrow(/nprobe must be an integer in \[1, K = 4\], got 5/);
    expect(() => warpQuery(q, 2, f.centroids, f.codec, sizes, { nprobe: 2, tPrime: 0 })).toThrow(/tPrime must be an integer >= 1, got 0/);
    expect(() => warpQuery(q, 2, f.centroids, f.codec, sizes, { nprobe: 2, bound: 1.5 })).toThrow(/bound must be an integer >= 1, got 1.5/);
    expect(() => warpQuery(q, 2, f.centroids, { ...f.codec, bits: 3 as 2 }, sizes, { nprobe: 2 })).toThrow(/bits must be 2 or 4, got 3/);
    expect(() => warpQuery(q, 2, f.centroids, f.codec, new Float64Array(3), { nprobe: 2 })).toThrow(/listSizes has 3 entries, expected K = 4/);
    expect(() => warpQuery(q.subarray(1), 2, f.centroids, f.codec, sizes, { nprobe: 2 })).toThrow(/q has length 7, expected n x d/);
    expect(() => warpQuery(q, 2, f.centroids, f.codec, sizes, { nprobe: 2, centroidScores: new Float32Array(3) })).toThrow(/centroidScores has length 3, expected n x K = 8/);
    const query = warpQuery(q, 2, f.centroids, f.codec, sizes, { nprobe: 2 });
    const l = buildWarpLayout({ vectors: f.corpus.vectors, dims: 4, tokenOffsets: f.tokenOffsets, centroids: f.centroids, codec: f.codec });
    expect(() => warpSegmentSearch(query, { documents: 10, docBase: 0, lists: warpLayoutLists(l) }, { topN: -1 })).toThrow(/topN must be an integer >= 0/);
    expect(() => warpSegmentSearch(query, { documents: 10, docBase: 0, lists: warpLayoutLists(l), mask: new Uint8Array(3) }, { topN: 1 })).toThrow(/mask has 3 entries/);
    expect(() => warpSegmentSearch(query, { documents: 2, docBase: 0, lists: warpLayoutLists(l) }, { topN: 1 })).toThrow(/names document \d+, the segment has 2/);
    // centroid scores: Q C^T
    const S = warpCentroidScores(q, 2, f.centroids, 4);
    expect(S[1 * 4 + 2]).toBeCloseTo(dot(q, 4, f.centroids, 8, 4), 6);
  });
});
