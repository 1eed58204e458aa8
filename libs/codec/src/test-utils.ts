/** Small seeded PRNG for tests (mulberry32) and a Box-Muller normal. Not used by the codecs. */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

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
