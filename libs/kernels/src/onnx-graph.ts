/**
 * Small helpers for writing ONNX models with `onnx-proto` (protobufjs-generated ONNX 1.10 protos).
 *
 * The kernels own ONNX (issue 28): this graph builder lives here and is used by the kernels' own
 * graphs (MaxSim, LITE, KNRM, IVF), by the model library (the BERT graph, the tiny test
 * transformer), by `scripts/build-model.ts` and the benches. Import it as `@lateral/kernels`.
 * Everything here is plain data in, protobuf objects out; `writeModel` is the only function that
 * touches the disk.
 *
 * Conventions: tensors are stored as little-endian `rawData` (Node is little-endian on every
 * platform we ship); symbolic dimensions are strings ('batch', 'seq'); plain numbers given as
 * attributes are INTs, use `floatAttr` / `floatsAttr` for FLOAT attributes.
 */
import { mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import onnxProto from 'onnx-proto';

export const { onnx } = onnxProto;
export type ModelProto = InstanceType<typeof onnx.ModelProto>;
export type NodeProto = InstanceType<typeof onnx.NodeProto>;
export type TensorProto = InstanceType<typeof onnx.TensorProto>;
export type ValueInfoProto = InstanceType<typeof onnx.ValueInfoProto>;
export type GraphProto = InstanceType<typeof onnx.GraphProto>;

/** ONNX TensorProto.DataType values for the element types we use. */
export const DataType = {
  FLOAT: 1,
  UINT8: 2,
  INT8: 3,
  INT32: 6,
  INT64: 7,
  BOOL: 9,
  FLOAT16: 10,
  DOUBLE: 11,
} as const;
export type DataTypeName = keyof typeof DataType;

export type TensorData = Float32Array | Float64Array | Int32Array | BigInt64Array | Uint8Array | Int8Array | Uint16Array;

function rawBytes(data: TensorData): Uint8Array {
  return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
}

function elementTypeOf(data: TensorData): number {
  if (data instanceof Float32Array) return DataType.FLOAT;
  if (data instanceof Float64Array) return DataType.DOUBLE;
  if (data instanceof Int32Array) return DataType.INT32;
  if (data instanceof BigInt64Array) return DataType.INT64;
  if (data instanceof Int8Array) return DataType.INT8;
  if (data instanceof Uint16Array) return DataType.FLOAT16; // raw fp16 bits
  return DataType.UINT8;
}

/**
 * A constant tensor (initializer) with `dims`, stored as raw little-endian bytes.
 * The element type follows the typed array (Uint16Array is taken as fp16 bits).
 */
export function makeTensor(name: string, dims: readonly number[], data: TensorData): TensorProto {
  const count = dims.reduce((a, b) => a * b, 1);
  if (count !== data.length) {
    throw new Error(`tensor '${name}': dims [${dims.join(',')}] hold ${count} elements but data has ${data.length}`);
  }
  return onnx.TensorProto.create({ name, dims: [...dims], dataType: elementTypeOf(data), rawData: rawBytes(data) });
}

export const floatTensor = (name: string, dims: readonly number[], values: ArrayLike<number>): TensorProto =>
  makeTensor(name, dims, Float32Array.from(values));
export const int64Tensor = (name: string, dims: readonly number[], values: ArrayLike<number>): TensorProto =>
  makeTensor(name, dims, BigInt64Array.from(Array.from(values), (v) => BigInt(v)));
/** A 0-d (scalar) float tensor. */
export const floatScalar = (name: string, value: number): TensorProto => floatTensor(name, [], [value]);

/** Attribute values: number -> INT, number[] -> INTS, string -> STRING, or a tagged float / tensor. */
export type AttrValue =
  | number
  | number[]
  | string
  | { kind: 'float'; value: number }
  | { kind: 'floats'; value: number[] }
  | { kind: 'tensor'; value: TensorProto };

export const floatAttr = (value: number): AttrValue => ({ kind: 'float', value });
export const floatsAttr = (value: number[]): AttrValue => ({ kind: 'floats', value });
export const tensorAttr = (value: TensorProto): AttrValue => ({ kind: 'tensor', value });

const AttributeType = onnx.AttributeProto.AttributeType;

function makeAttribute(name: string, value: AttrValue) {
  if (typeof value === 'number') {
    if (!Number.isInteger(value)) throw new Error(`attribute '${name}': ${value} is not an integer; use floatAttr()`);
    return onnx.AttributeProto.create({ name, type: AttributeType.INT, i: value });
  }
  if (typeof value === 'string') {
    return onnx.AttributeProto.create({ name, type: AttributeType.STRING, s: new TextEncoder().encode(value) });
  }
  if (Array.isArray(value)) return onnx.AttributeProto.create({ name, type: AttributeType.INTS, ints: value });
  switch (value.kind) {
    case 'float':
      return onnx.AttributeProto.create({ name, type: AttributeType.FLOAT, f: value.value });
    case 'floats':
      return onnx.AttributeProto.create({ name, type: AttributeType.FLOATS, floats: value.value });
    case 'tensor':
      return onnx.AttributeProto.create({ name, type: AttributeType.TENSOR, t: value.value });
  }
}

/** One graph node. `domain` defaults to the standard ONNX domain. */
export function makeNode(
  opType: string,
  inputs: readonly string[],
  outputs: readonly string[],
  attrs: Record<string, AttrValue> = {},
  name?: string,
): NodeProto {
  return onnx.NodeProto.create({
    opType,
    input: [...inputs],
    output: [...outputs],
    name: name ?? `${opType}_${outputs[0] ?? ''}`,
    attribute: Object.entries(attrs).map(([k, v]) => makeAttribute(k, v)),
  });
}

/** A typed graph input / output; string dims are symbolic ('batch', 'seq'). */
export function makeValueInfo(name: string, elemType: DataTypeName, shape: readonly (number | string)[]): ValueInfoProto {
  return onnx.ValueInfoProto.create({
    name,
    type: {
      tensorType: {
        elemType: DataType[elemType],
        shape: { dim: shape.map((d) => (typeof d === 'number' ? { dimValue: d } : { dimParam: d })) },
      },
    },
  });
}

export interface GraphSpec {
  name: string;
  nodes: NodeProto[];
  inputs: ValueInfoProto[];
  outputs: ValueInfoProto[];
  initializers?: TensorProto[];
  docString?: string;
}

export function makeGraph(spec: GraphSpec): GraphProto {
  return onnx.GraphProto.create({
    name: spec.name,
    node: spec.nodes,
    input: spec.inputs,
    output: spec.outputs,
    initializer: spec.initializers ?? [],
    docString: spec.docString ?? '',
  });
}

export interface ModelOptions {
  /** Default-domain opset; 17 is supported by every onnxruntime >= 1.14. */
  opset?: number;
  /** IR version; 8 is the newest the bundled ONNX 1.10 protos describe. */
  irVersion?: number;
  producerName?: string;
  producerVersion?: string;
  docString?: string;
  /** Free-form string metadata (`metadata_props`), readable with onnxruntime's session metadata. */
  metadata?: Record<string, string>;
  /** Further operator sets, e.g. onnxruntime's contrib ops `{ domain: 'com.microsoft', version: 1 }`. */
  extraOpsets?: { domain: string; version: number }[];
}

export function makeModel(graph: GraphProto | GraphSpec, opts: ModelOptions = {}): ModelProto {
  const g = graph instanceof onnx.GraphProto ? graph : makeGraph(graph as GraphSpec);
  return onnx.ModelProto.create({
    irVersion: opts.irVersion ?? 8,
    opsetImport: [{ domain: '', version: opts.opset ?? 17 }, ...(opts.extraOpsets ?? [])],
    producerName: opts.producerName ?? 'lateral',
    producerVersion: opts.producerVersion ?? '1',
    docString: opts.docString ?? '',
    graph: g,
    metadataProps: Object.entries(opts.metadata ?? {}).map(([key, value]) => ({ key, value })),
  });
}

export function encodeModel(model: ModelProto): Uint8Array {
  return onnx.ModelProto.encode(model).finish();
}

/** Serialises `model` to `path` atomically (write to a temp file, then rename). Returns the byte size. */
export function writeModel(path: string, model: ModelProto): number {
  const bytes = encodeModel(model);
  mkdirSync(dirname(path), { recursive: true });
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, bytes);
  renameSync(tmp, path);
  return bytes.byteLength;
}

/**
 * Accumulates nodes and initializers with unique generated names, so graph code reads like
 * expressions: `const y = g.op('Add', [x, g.const('one', floatScalar(...))])`.
 */
export class GraphBuilder {
  readonly nodes: NodeProto[] = [];
  readonly initializers: TensorProto[] = [];
  private counter = 0;

  /** A fresh value name with a readable prefix. */
  fresh(prefix: string): string {
    return `${prefix}_${this.counter++}`;
  }

  /** Adds an initializer and returns its name (the tensor's own name is replaced by a unique one if taken). */
  constant(tensor: TensorProto): string {
    if (this.initializers.some((t) => t.name === tensor.name)) tensor.name = this.fresh(tensor.name);
    this.initializers.push(tensor);
    return tensor.name;
  }

  /** Adds a single-output node and returns the output name (or `output` when given). */
  op(opType: string, inputs: readonly string[], attrs: Record<string, AttrValue> = {}, output?: string, domain?: string): string {
    const out = output ?? this.fresh(opType.toLowerCase());
    const node = makeNode(opType, inputs, [out], attrs);
    if (domain) node.domain = domain;
    this.nodes.push(node);
    return out;
  }

  /** A node with several named outputs (TopK: values and indices). */
  opOutputs(opType: string, inputs: readonly string[], outputs: readonly string[], attrs: Record<string, AttrValue> = {}): readonly string[] {
    this.nodes.push(makeNode(opType, inputs, [...outputs], attrs));
    return outputs;
  }

  build(name: string, inputs: ValueInfoProto[], outputs: ValueInfoProto[], docString?: string): GraphProto {
    return makeGraph({ name, nodes: this.nodes, inputs, outputs, initializers: this.initializers, docString });
  }
}
