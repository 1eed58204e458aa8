/**
 * TensorFlow.js for training: the WebAssembly backend (single-threaded in Node, deterministic for
 * a given seed), or the plain JS `cpu` backend when WebAssembly cannot start. Gradients, Adam and
 * every op come from TF.js; this library writes no autodiff of its own.
 */
import * as tf from '@tensorflow/tfjs';
import '@tensorflow/tfjs-backend-wasm';
import { mulberry32 } from '@lateral/shared';

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

/**
 * Deterministic uniform generator (@lateral/shared's mulberry32, its state started at the seed
 * XOR its increment, as trained artifacts have always been seeded): the same seed gives the same
 * weights and samples everywhere.
 */
export function rng(seed: number): () => number {
  return mulberry32(((seed >>> 0) ^ 0x6d2b79f5) >>> 0);
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
