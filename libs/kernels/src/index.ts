export { buildMaxsimModel, buildLiteModel, buildKnrmModel, MASK_BIAS, type MaxsimGraphKind } from './graphs';
export { createScorerSession, type ScorerSessionOptions } from './session';
export { OnnxMaxsim } from './maxsim-onnx';
export { OnnxLite, OnnxKnrm } from './lite-onnx';
export { padCandidates, padRows } from './padding';
export {
  seededUniform, randomLiteWeights, randomKnrmWeights, writeLiteArtifact, writeKnrmArtifact, readLiteArtifact,
  liteWeightsFromJson, liteWeightsFromBinary, knrmWeightsFromJson,
} from './artifact';
export { GemmMaxsim, createMaxsimSession, columnLayout, type ColumnLayout, type QueryTokens } from './gemm-maxsim';
export { RotatedMaxsim, type RotatedImageSet } from './rotated-maxsim';
export { ScorerResources } from './scorer-resources';
