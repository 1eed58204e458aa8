export { buildLiteModel, buildKnrmModel } from './graphs';
export { ort, createSession, createScorerSession, baseSessionOptions, ORT_NO_SPINNING, type OrtSession, type SessionOptions, type ScorerSessionOptions } from './session';
export { SessionThread, type ThreadTensor, type ThreadRunResult } from './session-thread';
export { ThreadLink, ThreadReplyTimeout, type ThreadLinkOptions, type ThreadReply } from './thread-link';
export { OnnxLite, OnnxKnrm } from './lite-onnx';
export { checkCsr, padCandidates, padRows } from './padding';
export {
  seededUniform, randomLiteWeights, randomKnrmWeights, writeLiteArtifact, writeKnrmArtifact, readLiteArtifact,
  liteWeightsFromJson, liteWeightsFromBinary, knrmWeightsFromJson,
} from './artifact';
export { GemmMaxsim, createMaxsimSession, columnLayout, type ColumnLayout, type QueryTokens } from './gemm-maxsim';
export { RotatedMaxsim, type RotatedImageSet } from './rotated-maxsim';
export { ScorerResources } from './scorer-resources';
export { OnnxNearestCentroid, allotCentroids, groupCentroids, onnxSphericalKmeans, onnxTwoLevelKmeans, type CentroidGroups, type TwoLevelCentroids } from './nearest-centroid';
export { OnnxIvfProbe, type IvfProbe } from './ivf-probe';
export {
  onnx,
  DataType,
  makeTensor,
  floatTensor,
  int64Tensor,
  floatScalar,
  floatAttr,
  floatsAttr,
  tensorAttr,
  makeNode,
  makeValueInfo,
  makeGraph,
  makeModel,
  encodeModel,
  writeModel,
  GraphBuilder,
} from './onnx-graph';
export type {
  ModelProto,
  NodeProto,
  TensorProto,
  ValueInfoProto,
  GraphProto,
  DataTypeName,
  TensorData,
  AttrValue,
  GraphSpec,
  ModelOptions,
} from './onnx-graph';
export { setInferenceObserver, reportInference, type InferenceEvent, type InferenceObserver } from './inference-observer';
export { appendL2Normalize } from './l2-tail';
