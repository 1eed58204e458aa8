/**
 * Bounded top-k selection on typed arrays (the k best (score, id) pairs: higher score, then lower
 * id): @lateral/simd's TopK, the one heap behind search's selections and the WebAssembly warpTop
 * kernel's JavaScript twin (jsWarpTop), so both keep the same pairs in the same order.
 */
export { TopK } from '@lateral/simd';
