import { rng } from './tf';
import type { TokenSource, TrainingQuery } from './trainer';

/**
 * A synthetic collection where relevance is visible in the token vectors: a relevant document
 * holds noisy copies of some query tokens, a non-relevant one random unit vectors. Enough for a
 * head to learn something in a few epochs, small enough for LITE at a reduced size.
 */
export function synthetic(nQueries: number, d = 16, seed = 3) {
  const r = rng(seed);
  const unit = (v: Float32Array) => {
    const n = Math.hypot(...v) || 1;
    return v.map((x) => x / n);
  };
  const randVec = () => unit(Float32Array.from({ length: d }, () => r() * 2 - 1));
  const docs: { vectors: Float32Array; length: number }[] = [];
  const queries: TrainingQuery[] = [];
  for (let qi = 0; qi < nQueries; qi++) {
    const n = 4;
    const q = new Float32Array(n * d);
    for (let i = 0; i < n; i++) q.set(randVec(), i * d);
    const candidates: number[] = [];
    const grades: number[] = [];
    for (let c = 0; c < 12; c++) {
      const m = 6 + Math.floor(r() * 6);
      const rel = c < 3;
      const v = new Float32Array(m * d);
      for (let j = 0; j < m; j++) {
        const base = rel && j < 3 ? q.subarray((j % n) * d, (j % n + 1) * d) : randVec();
        v.set(unit(Float32Array.from(base, (x) => x + (r() - 0.5) * (rel ? 0.6 : 0))), j * d);
      }
      candidates.push(docs.length);
      grades.push(rel ? 1 + (c % 2) : 0);
      docs.push({ vectors: v, length: m });
    }
    const firstStage = Float32Array.from(candidates, () => r());
    queries.push({ id: `q${qi}`, vectors: q, length: n, candidates, grades, firstStage });
  }
  const src: TokenSource = { dims: d, doc: (i) => docs[i] };
  return { src, queries };
}

