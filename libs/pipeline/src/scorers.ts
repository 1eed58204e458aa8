import { ValidationError, type ScorerSpec } from '@lateral/shared';
import {
  dense,
  hybridLinear,
  liteFlat,
  maxsimTopK,
  meanPool,
  mebert,
  negationWeights,
  rrf,
  signedMaxsim,
  xtrAggregate,
  type XtrRetrieved,
} from '@lateral/scoring';
import { ScorerResources } from '@lateral/kernels';
import type { EncodedText, TokenEncoder } from '@lateral/model';
import type { CollectionView } from './collection-view';

/** Re-exported while the worker wiring and rerank.processor still import it from here; its home is @lateral/kernels. */
export { ScorerResources };

export interface GroupInput {
  view: CollectionView;
  encoder: TokenEncoder;
  queries: EncodedText[];
  rows: number[];
  /** Per query, the first-stage score of each candidate (hybrid only). */
  firstStage: Float64Array[] | null;
  yieldEvery: () => Promise<void>;
}

/**
 * Scores queries that share one candidate list with any scorer. MaxSim (and hybrid on MaxSim)
 * runs as GEMMs over the shared candidate tokens; the others loop over candidates per query.
 */
export async function scoreGroup(res: ScorerResources, g: GroupInput, spec: ScorerSpec): Promise<Float32Array[]> {
  const d = g.view.dims;
  // Candidate tokens are gathered only by the scorers that read them (not dense, not hybrid's outer call).
  let gathered: { docs: Float32Array; offsets: Uint32Array } | null = null;
  const tokens = () => (gathered ??= g.view.rowVectors(g.rows));
  const C = g.rows.length;
  const doc = (c: number) => tokens().docs.subarray(tokens().offsets[c] * d, tokens().offsets[c + 1] * d);
  const len = (c: number) => tokens().offsets[c + 1] - tokens().offsets[c];
  const perCandidate = async (f: (q: EncodedText, qi: number) => (c: number) => number) => {
    const out: Float32Array[] = [];
    for (let qi = 0; qi < g.queries.length; qi++) {
      const score = f(g.queries[qi], qi);
      const s = new Float32Array(C);
      for (let c = 0; c < C; c++) s[c] = score(c);
      out.push(s);
      await g.yieldEvery();
    }
    return out;
  };
  switch (spec.name) {
    case 'maxsim':
      // EDEN token-layout generations are scored from their codes in the rotated domain.
      if (g.view.rotated) return (await res.rotated()).score(g.queries, g.view.rotated, g.rows, { normalize: spec.normalize, yieldEvery: g.yieldEvery });
      return (await res.gemm()).score(g.queries, tokens().docs, tokens().offsets, d, { normalize: spec.normalize, yieldEvery: g.yieldEvery });
    case 'dense':
      return perCandidate((q) => {
        const qv = meanPool(q.vectors, q.length, d, true);
        return (c) => dense(qv, g.view.docVectors.subarray(g.rows[c] * d, (g.rows[c] + 1) * d));
      });
    case 'maxsim-topk':
      return perCandidate((q) => (c) => maxsimTopK(q.vectors, q.length, doc(c), len(c), d, spec.k, spec.reduce));
    case 'knrm':
    case 'lite': {
      const session = await res.onnx(spec);
      const out: Float32Array[] = [];
      for (const q of g.queries) {
        out.push(await session.score(q.vectors, q.length, tokens().docs, tokens().offsets, d));
        await g.yieldEvery();
      }
      return out;
    }
    case 'lite-flat': {
      const w = res.liteFlat(spec);
      return perCandidate((q) => (c) => liteFlat(q.vectors, q.length, doc(c), len(c), d, w));
    }
    case 'signed-maxsim':
      return perCandidate((q) => {
        const qw = queryWeights(g.encoder, q, spec.weights);
        // Segments store no document token weights yet: document tokens count +1 (documented).
        return (c) => signedMaxsim(q.vectors, qw, q.length, doc(c), ones(len(c)), len(c), d);
      });
    case 'mebert':
      return perCandidate((q) => {
        const qv = meanPool(q.vectors, q.length, d, true);
        return (c) => mebert(qv, doc(c), len(c), d, spec.m);
      });
    case 'xtr':
      return perCandidate((q) => {
        const s = xtrScores(q, tokens().docs, tokens().offsets, d, spec.kPrime);
        return (c) => s[c];
      });
    case 'hybrid': {
      const base = await scoreGroup(res, g, spec.base === 'maxsim' ? { name: 'maxsim', normalize: false } : { name: 'dense' });
      return base.map((b, qi) => {
        const first = g.firstStage![qi];
        if (spec.fusion === 'linear') return Float32Array.from(hybridLinear(b, first, spec.lambda, spec.normalization));
        const ids = Array.from({ length: C }, (_, c) => String(c));
        const byScore = (s: ArrayLike<number>) => [...ids].sort((x, y) => s[Number(y)] - s[Number(x)] || Number(x) - Number(y));
        const fused = rrf([byScore(b), byScore(first)], spec.rrfK);
        const out = new Float32Array(C);
        for (const f of fused) out[Number(f.id)] = f.score;
        return out;
      });
    }
  }
}

const ones = (m: number) => new Float32Array(m).fill(1);

/** Query token weights: the model's token_weights output, or the rule-based negation heuristic. */
export function queryWeights(encoder: TokenEncoder, q: EncodedText, mode: 'auto' | 'model' | 'heuristic'): Float32Array {
  if (mode !== 'heuristic' && q.weights) return q.weights;
  if (mode === 'model') throw new ValidationError(`scorer signed-maxsim with weights 'model': model ${encoder.manifest.name} has no token_weights output`, [{ field: 'scorer.weights', message: 'use auto or heuristic' }]);
  return negationWeights(Array.from(q.tokenIds, (id) => encoder.tokenizer.decode([id])));
}

/**
 * XTR over a candidate set (SPEC 3.2): each query token retrieves its top-k' tokens among all
 * candidate tokens; candidates are scored from those hits only, missing similarities imputed by
 * the k'-th score. q: n x d; docs: T x d (offsets C + 1). Returns C scores.
 */
export function xtrScores(q: EncodedText, docs: Float32Array, offsets: Uint32Array, d: number, kPrime: number): Float32Array {
  const C = offsets.length - 1;
  const T = offsets[C];
  const owner = new Uint32Array(T);
  for (let c = 0; c < C; c++) owner.fill(c, offsets[c], offsets[c + 1]);
  const sims = new Float32Array(T);
  const retrieved: XtrRetrieved[] = [];
  for (let i = 0; i < q.length; i++) {
    const qi = q.vectors.subarray(i * d, (i + 1) * d);
    for (let t = 0; t < T; t++) {
      let s = 0;
      const b = t * d;
      for (let k = 0; k < d; k++) s += qi[k] * docs[b + k];
      sims[t] = s;
    }
    const k = Math.min(kPrime, T);
    const threshold = k === 0 ? Infinity : Float32Array.from(sims).sort()[T - k];
    const idx: number[] = [];
    for (let t = 0; t < T && idx.length < T; t++) if (sims[t] >= threshold) idx.push(t);
    idx.sort((a, b) => sims[b] - sims[a] || a - b);
    idx.length = Math.min(idx.length, k);
    retrieved.push({ docs: Uint32Array.from(idx, (t) => owner[t]), scores: Float32Array.from(idx, (t) => sims[t]) });
  }
  const agg = xtrAggregate(retrieved);
  const out = new Float32Array(C);
  // Candidates no query token retrieved score sum_i m_i / n (every similarity imputed).
  const base = q.length ? agg.imputed.reduce((s, m) => s + m, 0) / q.length : 0;
  out.fill(base);
  agg.docs.forEach((c, j) => (out[c] = agg.scores[j]));
  return out;
}
