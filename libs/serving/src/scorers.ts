import { ValidationError, type ScorerSpec } from '@lateral/shared';
import {
  dense,
  hybridLinear,
  liteFlat,
  maxsimTopK,
  mebert,
  negationWeights,
  rrf,
  signedMaxsim,
  xtrScores,
} from '@lateral/scoring';
import { OnnxLite, type ScorerResources } from '@lateral/kernels';
import type { EncodedText, TokenEncoder } from '@lateral/model';
import type { CollectionView } from './collection-view';

export interface GroupInput {
  view: CollectionView;
  encoder: TokenEncoder;
  queries: EncodedText[];
  rows: number[];
  /** Per query, the first-stage score of each candidate (hybrid only). */
  firstStage: Float64Array[] | null;
  yieldEvery: () => Promise<void>;
  /** whose trained LITE / K-NRM artifacts a spec may name (fetched from S3 by the scorer resources); absent: SCORERS_DIR files only */
  tenantId?: string;
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
      // Candidates held one block each (text candidates): scored chunk by chunk, without a copy of them all.
      if ('rowBlocks' in g.view && g.view.rowBlocks && !gathered) return (await res.gemm()).scoreBlocks(g.queries, g.view.rowBlocks(g.rows), d, { normalize: spec.normalize, yieldEvery: g.yieldEvery });
      return (await res.gemm()).score(g.queries, tokens().docs, tokens().offsets, d, { normalize: spec.normalize, yieldEvery: g.yieldEvery });
    case 'dense':
      return perCandidate((q) => {
        const qv = g.encoder.pool(q);
        return (c) => dense(qv, g.view.docVectors.subarray(g.rows[c] * d, (g.rows[c] + 1) * d));
      });
    case 'maxsim-topk':
      return perCandidate((q) => (c) => maxsimTopK(q.vectors, q.length, doc(c), len(c), d, spec.k, spec.reduce));
    case 'knrm':
    case 'lite': {
      const session = await res.onnx(spec, g.tenantId);
      // A LITE residual adds its learned correction to MaxSim: the same MaxSim the maxsim scorer ranks by.
      const base = session instanceof OnnxLite && session.residual ? await scoreGroup(res, g, { name: 'maxsim', normalize: false }) : null;
      const out: Float32Array[] = [];
      for (const [qi, q] of g.queries.entries()) {
        out.push(base ? await (session as OnnxLite).score(q.vectors, q.length, tokens().docs, tokens().offsets, d, base[qi]) : await session.score(q.vectors, q.length, tokens().docs, tokens().offsets, d));
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
        const qv = g.encoder.pool(q);
        return (c) => mebert(qv, doc(c), len(c), d, spec.m);
      });
    case 'xtr':
      return perCandidate((q) => {
        const s = xtrScores(q.vectors, q.length, tokens().docs, tokens().offsets, d, spec.kPrime);
        return (c) => s[c];
      });
    case 'hybrid': {
      const base = await scoreGroup(res, g, hybridBase(spec));
      return base.map((b, qi) => fuseHybrid(spec, b, g.firstStage![qi]));
    }
  }
}

/** The hybrid scorer's base scores fused with the first stage's, over one query's candidate set (linear or RRF). */
export function hybridBase(spec: Extract<ScorerSpec, { name: 'hybrid' }>): ScorerSpec {
  return spec.base === 'maxsim' ? { name: 'maxsim', normalize: false } : { name: 'dense' };
}

/** Fuses a hybrid's base scores with the first-stage scores of the same candidates (the whole candidate set: normalisation and ranks depend on it). */
export function fuseHybrid(spec: Extract<ScorerSpec, { name: 'hybrid' }>, b: Float32Array, first: Float64Array): Float32Array {
  const C = b.length;
  if (spec.fusion === 'linear') return Float32Array.from(hybridLinear(b, first, spec.lambda, spec.normalization));
  const ids = Array.from({ length: C }, (_, c) => String(c));
  const byScore = (s: ArrayLike<number>) => [...ids].sort((x, y) => s[Number(y)] - s[Number(x)] || Number(x) - Number(y));
  const fused = rrf([byScore(b), byScore(first)], spec.rrfK);
  const out = new Float32Array(C);
  for (const f of fused) out[Number(f.id)] = f.score;
  return out;
}

const ones = (m: number) => new Float32Array(m).fill(1);

/** Query token weights: the model's token_weights output, or the rule-based negation heuristic. */
export function queryWeights(encoder: TokenEncoder, q: EncodedText, mode: 'auto' | 'model' | 'heuristic'): Float32Array {
  if (mode !== 'heuristic' && q.weights) return q.weights;
  if (mode === 'model') throw new ValidationError(`scorer signed-maxsim with weights 'model': model ${encoder.manifest.name} has no token_weights output`, [{ field: 'scorer.weights', message: 'use auto or heuristic' }]);
  return negationWeights(Array.from(q.tokenIds, (id) => encoder.tokenizer.decode([id])));
}
