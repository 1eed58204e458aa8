import { jsKernels } from './js';
import type { Kernels } from './types';
import { wasmKernels } from './wasm';

export type { ExactLevels, ExactRows, Kernels, PreparedQuery, RowMaximaInput, WarpResidentList, WarpResidentScan, WarpResidentSource, WarpTablesInput } from './types';
export { fromHalfBits, jsKernels, jsDots, jsLookupSums, jsLookupSumsMany, jsMaxima, jsRowMaxima, jsScoreRows, jsWarpTables, jsWarpTop } from './js';
export { TopK } from './top-k';
export { wasmKernels, simdStatus, simdModulePath, type SimdStatus, type ScoreRowsVariant, type WasmKernels } from './wasm';

let chosen: Kernels | null = null;

/**
 * The kernels this process uses: the WebAssembly SIMD module when it is built and passes its
 * self-check against the JavaScript kernels at load, else the JavaScript kernels (same results).
 */
export function kernels(): Kernels {
  return (chosen ??= wasmKernels() ?? jsKernels);
}

/**
 * Makes `k` the kernels of this process (null: the default choice again). For the score bench,
 * which times the same searches on either set in alternation; the results do not change.
 */
export function useKernels(k: Kernels | null): void {
  chosen = k;
}
