export { buildLiteModel, buildKnrmModel } from './graphs';
export { createScorerSession, type ScorerSessionOptions } from './session';
export { OnnxLite, OnnxKnrm } from './lite-onnx';
export { checkCsr, padCandidates, padRows } from './padding';
export {
  seededUniform, randomLiteWeights, randomKnrmWeights, writeLiteArtifact, writeKnrmArtifact, readLiteArtifact,
  liteWeightsFromJson, liteWeightsFromBinary, knrmWeightsFromJson,
} from './artifact';
export { GemmMaxsim, createMaxsimSession, columnLayout, type ColumnLayout, type QueryTokens } from './gemm-maxsim';
export { RotatedMaxsim, type RotatedImageSet } from './rotated-maxsim';
export { ScorerResources } from './scorer-resources';
export { OnnxNearestCentroid, onnxSphericalKmeans } from './nearest-centroid';
export { OnnxIvfProbe, type IvfProbe } from './ivf-probe';
