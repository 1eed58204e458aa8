import { DataType, floatScalar, int64Tensor, makeNode, onnx } from './onnx-graph';

/**
 * Appends an L2 normalisation of one output to a serialised ONNX model, so that ONNX Runtime
 * normalises the token vectors (SIMD on the CPU, on the GPU under CUDA) instead of JavaScript on
 * the event-loop thread: `y = x / max(sqrt(sum(x^2, last axis)), FLT_MIN)` (a zero row stays
 * zero), in the output's own element type, float32.
 *
 * The model is not decoded: the new nodes, initializers and graph output are protobuf fields
 * appended to the GraphProto's payload (repeated fields concatenate), and the ModelProto's graph
 * field gets its new length. The original output stays; the normalised one is `<output>/l2norm`.
 *
 * Returns null when the bytes are not a model this can extend: no graph, no default-domain opset
 * or one below 8 (Max with broadcasting), no graph output named `output`, or the name taken.
 */
export function appendL2Normalize(model: Uint8Array, output: string): { bytes: Uint8Array; output: string } | null {
  const top = fields(model, 0, model.length);
  if (!top) return null;
  const graph = top.filter((f) => f.field === 7 && f.wire === 2).at(-1);
  if (!graph) return null;
  let opset = 0;
  for (const f of top) {
    if (f.field !== 8 || f.wire !== 2) continue; // ModelProto.opset_import: OperatorSetIdProto { domain = 1, version = 2 }
    const sub = fields(model, f.from, f.to);
    if (!sub) return null;
    const domain = sub.find((g) => g.field === 1 && g.wire === 2);
    const name = domain ? text(model, domain) : '';
    const version = sub.find((g) => g.field === 2 && g.wire === 0);
    if ((name === '' || name === 'ai.onnx') && version) opset = version.value;
  }
  if (opset < 8) return null;
  const graphFields = fields(model, graph.from, graph.to);
  if (!graphFields) return null;
  const outputs = new Set<string>();
  for (const f of graphFields) {
    if (f.field !== 12 || f.wire !== 2) continue; // GraphProto.output: ValueInfoProto { name = 1 }
    const name = fields(model, f.from, f.to)?.find((g) => g.field === 1 && g.wire === 2);
    if (name) outputs.add(text(model, name));
  }
  const out = `${output}/l2norm`;
  if (!outputs.has(output) || outputs.has(out)) return null;

  const p = `${output}/l2norm/`;
  const axes = int64Tensor(`${p}axes`, [1], [-1]);
  const sumSq =
    opset >= 18
      ? makeNode('ReduceSumSquare', [output, axes.name!], [`${p}sumsq`], { keepdims: 1 }, `${p}ReduceSumSquare`)
      : makeNode('ReduceSumSquare', [output], [`${p}sumsq`], { axes: [-1], keepdims: 1 }, `${p}ReduceSumSquare`);
  const tail = onnx.GraphProto.encode(
    onnx.GraphProto.create({
      node: [
        sumSq,
        makeNode('Sqrt', [`${p}sumsq`], [`${p}norm`], {}, `${p}Sqrt`),
        makeNode('Max', [`${p}norm`, `${p}floor`], [`${p}safe`], {}, `${p}Max`),
        makeNode('Div', [output, `${p}safe`], [out], {}, `${p}Div`),
      ],
      initializer: [...(opset >= 18 ? [axes] : []), floatScalar(`${p}floor`, 1.1754943508222875e-38)],
      // element type only, no shape (an empty shape would say rank 0): ONNX Runtime infers [batch, seq, dims]
      output: [onnx.ValueInfoProto.create({ name: out, type: { tensorType: { elemType: DataType.FLOAT } } })],
    }),
  ).finish();
  const payload = graph.to - graph.from + tail.length;
  const header = [...varint(7 * 8 + 2), ...varint(payload)];
  const bytes = new Uint8Array(graph.tag + header.length + payload + (model.length - graph.to));
  bytes.set(model.subarray(0, graph.tag), 0);
  bytes.set(header, graph.tag);
  bytes.set(model.subarray(graph.from, graph.to), graph.tag + header.length);
  bytes.set(tail, graph.tag + header.length + (graph.to - graph.from));
  bytes.set(model.subarray(graph.to), graph.tag + header.length + payload);
  return { bytes, output: out };
}

interface Field {
  field: number;
  wire: number;
  /** first byte of the key */
  tag: number;
  /** varint value (wire 0) */
  value: number;
  /** payload bounds (wire 2) */
  from: number;
  to: number;
}

function readVarint(b: Uint8Array, pos: number): [number, number] | null {
  let value = 0;
  for (let shift = 0; shift < 70 && pos < b.length; shift += 7) {
    const x = b[pos++]!;
    value += (x & 0x7f) * 2 ** shift;
    if (x < 0x80) return [value, pos];
  }
  return null;
}

/** The fields of the message in b[from, to), or null when it is not well-formed protobuf. */
function fields(b: Uint8Array, from: number, to: number): Field[] | null {
  const out: Field[] = [];
  let pos = from;
  while (pos < to) {
    const tag = pos;
    const key = readVarint(b, pos);
    if (!key) return null;
    const field = Math.floor(key[0] / 8);
    const wire = key[0] % 8;
    pos = key[1];
    if (wire === 0) {
      const v = readVarint(b, pos);
      if (!v) return null;
      out.push({ field, wire, tag, value: v[0], from: pos, to: v[1] });
      pos = v[1];
    } else if (wire === 2) {
      const len = readVarint(b, pos);
      if (!len) return null;
      out.push({ field, wire, tag, value: len[0], from: len[1], to: len[1] + len[0] });
      pos = len[1] + len[0];
    } else if (wire === 1 || wire === 5) pos += wire === 1 ? 8 : 4;
    else return null;
  }
  return pos === to ? out : null;
}

const text = (b: Uint8Array, f: Field) => Buffer.from(b.buffer, b.byteOffset + f.from, f.to - f.from).toString('utf8');

function varint(n: number): number[] {
  const out: number[] = [];
  while (n >= 0x80) {
    out.push((n % 0x80) | 0x80);
    n = Math.floor(n / 0x80);
  }
  out.push(n);
  return out;
}
