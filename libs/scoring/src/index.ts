export { ShapeError } from './shapes';
export { maxsim, maxsimBatch, maxsimTopK, type MaxsimOptions, type TopKReduce } from './maxsim';
export { dense, denseBatch, meanPool } from './dense';
export { topK, type ScoredId } from './topk';
