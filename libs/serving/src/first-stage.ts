import type { SearchMode } from '@lateral/shared';
import { bm25Pass, densePass, exhaustivePass, mebertPass, pairPass, xtrPass, xtrProbe, type Bm25Stats, type SegmentPass, type XtrProbe } from '@lateral/search';
import type { EncodedText } from '@lateral/model';
import { fuse } from './hits';

/** One query as the first stage needs it. */
export interface FirstStageQuery {
  encoded: EncodedText;
  /** The pooled query vector (dense, ME-BERT). */
  pool: () => Float32Array;
  /** Its BM25 terms under the collection's analyser (bm25QueryTerms) and the build's skip rule (none for analysed words). */
  terms: number[];
  skip: ((id: number) => boolean) | undefined;
  /** The generation's BM25 statistics when stored (Bm25StatsCache): BM25 then needs no first walk over the indexes. */
  bm25Stats?: Bm25Stats;
  /** The collection's IVF centroids (XTR) and the query's probe when computed elsewhere (the ORT GEMM). */
  ivf: { centroids: Float32Array; k: number } | null;
  probe?: XtrProbe;
  explain?: boolean;
}

/** One query's first stage: its segment pass, or why it has no hits. */
export interface FirstStage {
  pass: SegmentPass | null;
  reason?: string;
}

/**
 * The first stage of one query as a segment pass (@lateral/search's stream.ts): the pass sees
 * the generation's segments one at a time (searchSegments) and its hits are the per-segment lists
 * merged exactly, those of the library's whole-collection functions bit for bit. The work runs
 * in the library's bounded steps (per segment, and slices within one), awaited between, so a
 * search over hundreds of segments never holds the event loop (BullMQ renews the job's lock on a
 * timer).
 */
export function firstStagePass(mode: SearchMode, n: number, q: FirstStageQuery): FirstStage {
  const e = q.encoded;
  switch (mode.name) {
    case 'bm25':
      if (q.terms.length === 0) return { pass: null, reason: 'the query has no searchable terms (only stop words, punctuation or special tokens)' };
      return { pass: bm25Pass(q.terms, n, { k1: mode.k1, b: mode.b }, q.skip, q.bm25Stats) };
    case 'dense':
      return { pass: densePass(q.pool(), n) };
    case 'mebert':
      return { pass: mebertPass(q.pool(), mode.m, n) };
    case 'exhaustive':
      if (e.length === 0) return { pass: null, reason: 'the query has no tokens' };
      return { pass: exhaustivePass(e.vectors, e.length, n, { explain: q.explain }) };
    case 'xtr': {
      if (e.length === 0) return { pass: null, reason: 'the query has no tokens' };
      const ivf = q.ivf!;
      const nprobe = Math.min(mode.nprobe, ivf.k);
      const probe = q.probe ?? xtrProbe(e.vectors, e.length, ivf.centroids, e.vectors.length / e.length, nprobe);
      return { pass: xtrPass(e.vectors, e.length, probe, { kPrime: mode.kPrime, topN: n, explain: q.explain }) };
    }
    case 'hybrid': {
      const base: SearchMode = mode.base === 'xtr' ? { name: 'xtr', kPrime: mode.kPrime, nprobe: mode.nprobe } : mode.base === 'dense' ? { name: 'dense' } : { name: 'exhaustive' };
      const a = firstStagePass(base, mode.depth, q).pass;
      const b = firstStagePass({ name: 'bm25', k1: mode.k1, b: mode.b }, mode.depth, q).pass;
      // A side with nothing to search (no tokens, no terms) contributes no hits to the fusion.
      const none: SegmentPass = { needsStats: false, count: () => {}, visit: function* () {}, finish: function* () { return []; } };
      return { pass: pairPass(a ?? none, b ?? none, (x, y) => fuse(x, y, mode, n)) };
    }
  }
}
