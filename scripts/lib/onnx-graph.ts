/**
 * ONNX graph-writing helpers for scripts: the ones `@lateral/model` exports (implemented in
 * libs/model/src/onnx-graph.ts, so libraries use them without importing from scripts/, which Nx's
 * module-boundary rule forbids). Scripts may import them from `@lateral/model` directly.
 */
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
} from '@lateral/model';
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
} from '@lateral/model';
