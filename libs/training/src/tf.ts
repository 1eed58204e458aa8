/**
 * TensorFlow.js for training: the WebAssembly backend (single-threaded in Node, deterministic for
 * a given seed), or the plain JS `cpu` backend when WebAssembly cannot start. Gradients, Adam and
 * every op come from TF.js; this library writes no autodiff of its own.
 */
import * as tf from '@tensorflow/tfjs';
import '@tensorflow/tfjs-backend-wasm';

export type TfBackend = 'wasm' | 'cpu';
let ready: Promise<TfBackend> | null = null;

/** Selects the backend once per process (wasm, falling back to cpu) and returns the one in use. */
export function initTf(prefer: TfBackend = 'wasm'): Promise<TfBackend> {
  ready ??= (async () => {
    for (const b of prefer === 'wasm' ? (['wasm', 'cpu'] as const) : (['cpu'] as const)) {
      try {
        if (await tf.setBackend(b)) {
          await tf.ready();
          return b;
        }
      } catch {
        // try the next backend
      }
    }
    throw new Error('TensorFlow.js: neither the wasm nor the cpu backend could start');
  })();
  return ready;
}

export { tf };

/** Deterministic uniform generator (mulberry32): the same seed gives the same weights and samples everywhere. */
export function rng(seed: number): () => number {
  let a = (seed >>> 0) ^ 0x6d2b79f5;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Fisher-Yates shuffle with `r` (a copy). */
export function shuffled<T>(items: readonly T[], r: () => number): T[] {
  const a = [...items];
  for (let i = a.length - 1; i > 0; i--) {
    const j = Math.floor(r() * (i + 1));
    [a[i], a[j]] = [a[j], a[i]];
  }
  return a;
}
