export { TokenEncoder, getEncoder, poolEncoded, DEFAULT_TOKEN_BUDGET } from './token-encoder';
export type { EncodedText, EncoderOptions, EncoderLogger, EncodeDocumentsOptions, Pooling } from './token-encoder';
export { ModelShapeError, ModelLoadError } from './errors';
export { planBatches } from './batching';
export { readModelDir, parseManifest, readEmbeddingTable } from './model-dir';
export type { ModelDirFiles, EmbeddingTable } from './model-dir';
export { TextTokenizer, prepareTokenizerJson } from './text-tokenizer';
export type { TextKind, TokenizedText } from './text-tokenizer';
export { makeWordLevelTokenizerJson, isPunctuation, isPreTokenizerAtom } from './tokenizer-json';
export type { WordLevelTokenizerSpec, TokenizerJson } from './tokenizer-json';
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
export { loadStaticEmbeddings, staticEmbeddingsFromTable } from './static-embeddings';
export type { StaticEmbeddings } from './static-embeddings';
export { TINY_TRANSFORMER_VERSION, writeTinyTransformer } from './testing/tiny-transformer';
export { readSafetensors, type NamedTensor } from './safetensors';
export { BertWeights, bertConfigFromJson, bertStaticEmbeddings, buildBertModel, quantizeColumns, BERT_INT8_WEIGHT_MAX, type BertConfig, type BertBuildOptions } from './bert-graph';
export { setInferenceObserver, reportInference, type InferenceEvent, type InferenceObserver } from './inference-observer';
