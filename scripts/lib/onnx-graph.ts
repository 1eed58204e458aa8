/**
 * ONNX graph-writing helpers for scripts. The implementation lives in `libs/model/src/onnx-graph.ts`
 * so libraries can use it through `@lateral/model` without importing from scripts/ (which Nx's
 * module-boundary rule forbids); this file keeps the short path for scripts.
 */
export * from '../../libs/model/src/onnx-graph';
