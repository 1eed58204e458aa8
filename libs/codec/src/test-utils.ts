import { mulberry32 } from '@lateral/shared';
/** Seeded test data (mulberry32), so failures reproduce from the seed alone. */
export const rng = mulberry32;

export function normal(rand: () => number): () => number {
  return () => {
    const u = 1 - rand();
    const v = rand();
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
  };
}

/** n x d standard normal values. */
export function gaussian(n: number, d: number, seed: number): Float32Array {
  const g = normal(rng(seed));
  const out = new Float32Array(n * d);
  for (let i = 0; i < out.length; i++) out[i] = g();
  return out;
}
