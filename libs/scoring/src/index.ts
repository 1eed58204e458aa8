export { ShapeError } from './shapes';
export { maxsim, maxsimBatch, maxsimOfSimilarities, maxsimTopK, type MaxsimOptions, type TopKReduce } from './maxsim';
export { dense, denseBatch, meanPool } from './dense';
export { topK, type ScoredId } from './topk';
export { knrm, knrmFeatures, similarityMatrix, KNRM_MU, KNRM_SIGMA, KNRM_MIN_K, type KnrmWeights } from './knrm';
export {
  liteReference, liteForward, litePaddedSimilarity, liteFlat, liteShapes, assertLiteWeights,
  LITE_DEFAULT, LITE_SMALL, LITE_LN_EPS, type LiteWeights, type LiteFlatWeights,
} from './lite';
export { signedMaxsim } from './signed-maxsim';
export { xtrAggregate, xtrScores, type XtrRetrieved, type XtrScores } from './xtr';
export { mebert, dedupMaxByDoc } from './mebert';
export { hybridLinear, normalizeScores, rrf, RRF_K, type ScoreNormalization } from './hybrid';
export { negationWeights } from './negation';
export { dcgAt, idealDcg, idealDcgAt, ndcgAt, type Judgments } from './ndcg';
