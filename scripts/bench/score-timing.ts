/** The score bench's shapes and timing helpers (score.ts and its cases). */
import { createScorerSession, GraphBuilder, makeModel, makeValueInfo, seededUniform } from '@lateral/kernels';
import * as ort from 'onnxruntime-node';

export const C = 1000, M = 180, D = 128, N = 32;
export const FLOPS = 2 * N * M * D * C;

export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const h = s.length >> 1;
  return s.length % 2 ? s[h] : (s[h - 1] + s[h]) / 2;
}

export async function timeIt(fn: () => unknown, reps: number, warmup = 2): Promise<number> {
  for (let i = 0; i < warmup; i++) await fn();
  const t: number[] = [];
  for (let i = 0; i < reps; i++) {
    const s = performance.now();
    await fn();
    t.push(performance.now() - s);
  }
  return median(t);
}

export function randomUnit(r: () => number, rows: number, d: number): Float32Array {
  const a = new Float32Array(rows * d);
  for (let i = 0; i < rows; i++) {
    let s = 0;
    for (let k = 0; k < d; k++) { const v = r() - 0.5; a[i * d + k] = v; s += v * v; }
    const inv = 1 / Math.sqrt(s);
    for (let k = 0; k < d; k++) a[i * d + k] *= inv;
  }
  return a;
}

/** A 2048^3 MatMul session and its inputs: this machine's GEMM peak as ONNX Runtime reaches it. */
export async function gemmPeakSession(threads: number): Promise<{ run: () => Promise<unknown>; release: () => Promise<void>; flops: number }> {
  const S = 2048;
  const g = new GraphBuilder();
  g.op('MatMul', ['a', 'b'], {}, 'c');
  const model = makeModel(g.build('gemm_peak', [makeValueInfo('a', 'FLOAT', [S, S]), makeValueInfo('b', 'FLOAT', [S, S])], [makeValueInfo('c', 'FLOAT', [S, S])]));
  const session = await createScorerSession(model, { intraOpThreads: threads });
  const r = seededUniform(99);
  const mk = () => new ort.Tensor('float32', Float32Array.from({ length: S * S }, () => r() - 0.5), [S, S]);
  const a = mk(), b = mk();
  return { run: () => session.run({ a, b }), release: () => session.release(), flops: 2 * S ** 3 };
}

/**
 * Times two workloads in alternation (a rounds, each one run of `a` then `perRound` runs of `b`),
 * so a load change on a shared machine hits both medians alike and their ratio stays meaningful.
 */
export async function interleaved(a: () => Promise<unknown>, b: () => Promise<unknown>, rounds: number, perRound: number): Promise<[number, number]> {
  await a(); await b(); await b();
  const ta: number[] = [], tb: number[] = [];
  for (let r = 0; r < rounds; r++) {
    let s = performance.now();
    await a();
    ta.push(performance.now() - s);
    await b(); // untimed: the first run after a 2048^3 GEMM finds the caches full of its matrices
    for (let k = 0; k < perRound; k++) {
      s = performance.now();
      await b();
      tb.push(performance.now() - s);
    }
  }
  return [median(ta), median(tb)];
}
