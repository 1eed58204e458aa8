import { closeSync, existsSync, fstatSync, openSync, readFileSync, readSync } from 'node:fs';
import { join } from 'node:path';
import { ModelManifestSchema, type ModelManifest } from '@lateral/shared';
import { ModelLoadError } from './errors';

/** The three files of a model directory, read and validated (the ONNX graph itself is only located). */
export interface ModelDirFiles {
  dir: string;
  manifest: ModelManifest;
  tokenizerJson: Record<string, unknown>;
  modelPath: string;
}

function readJson(path: string, what: string): unknown {
  if (!existsSync(path)) throw new ModelLoadError(`${path}: ${what} not found`);
  try {
    return JSON.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new ModelLoadError(`${path}: invalid JSON (${err instanceof Error ? err.message : String(err)})`);
  }
}

/** Parses manifest JSON, throwing ModelLoadError naming the file and each failing field. */
export function parseManifest(raw: unknown, path = 'manifest.json'): ModelManifest {
  const res = ModelManifestSchema.safeParse(raw);
  if (!res.success) {
    const fields = res.error.issues.map((i) => `field '${i.path.join('.') || '(root)'}': ${i.message}`);
    throw new ModelLoadError(`${path}: invalid manifest: ${fields.join('; ')}`, res.error.issues);
  }
  return res.data;
}

export function readModelDir(dir: string): ModelDirFiles {
  const manifestPath = join(dir, 'manifest.json');
  const tokenizerPath = join(dir, 'tokenizer.json');
  const modelPath = join(dir, 'model.onnx');
  const manifest = parseManifest(readJson(manifestPath, 'model manifest'), manifestPath);
  const tokenizerJson = readJson(tokenizerPath, 'tokenizer (Hugging Face tokenizer.json)');
  if (typeof tokenizerJson !== 'object' || tokenizerJson === null || !('model' in tokenizerJson)) {
    throw new ModelLoadError(`${tokenizerPath}: field 'model' missing: not a Hugging Face tokenizer.json`);
  }
  if (!existsSync(modelPath)) throw new ModelLoadError(`${modelPath}: ONNX model not found`);
  return { dir, manifest, tokenizerJson: tokenizerJson as Record<string, unknown>, modelPath };
}

/** The token embedding table of a graph: the initializer its ids are looked up in. */
export interface EmbeddingTable {
  /** Initializer name, e.g. `embeddings.word_embeddings.weight`. */
  name: string;
  /** Rows = the largest token id the graph accepts, plus one. */
  rows: number;
}

/** Positioned reads through a small window, so a 400 MB model.onnx is walked without loading its weights. */
class FileBytes {
  private readonly buf = Buffer.alloc(1 << 16);
  private start = 0;
  private end = 0;

  constructor(private readonly fd: number) {}

  byte(pos: number): number {
    if (pos < this.start || pos >= this.end) {
      const n = readSync(this.fd, this.buf, 0, this.buf.length, pos);
      if (n <= 0) throw new RangeError(`unexpected end of file at byte ${pos}`);
      this.start = pos;
      this.end = pos + n;
    }
    return this.buf[pos - this.start]!;
  }

  bytes(pos: number, len: number): Buffer {
    const out = Buffer.alloc(len);
    for (let i = 0; i < len; i++) out[i] = this.byte(pos + i);
    return out;
  }
}

interface PbField {
  field: number;
  wire: number;
  /** varint value (wire 0) */
  value: number;
  /** payload start and end (wire 2) */
  from: number;
  to: number;
}

function readVarint(r: FileBytes, pos: number): [number, number] {
  let value = 0;
  for (let shift = 0; shift < 70; shift += 7) {
    const b = r.byte(pos++);
    value += (b & 0x7f) * 2 ** shift;
    if (b < 0x80) return [value, pos];
  }
  throw new RangeError('malformed varint');
}

/** The fields of the protobuf message in bytes [from, to), in order; payloads are skipped, not read. */
function* pbFields(r: FileBytes, from: number, to: number): Generator<PbField> {
  let pos = from;
  while (pos < to) {
    const [key, p] = readVarint(r, pos);
    const field = Math.floor(key / 8);
    const wire = key % 8;
    pos = p;
    if (wire === 0) {
      const [value, q] = readVarint(r, pos);
      yield { field, wire, value, from: pos, to: q };
      pos = q;
    } else if (wire === 2) {
      const [len, q] = readVarint(r, pos);
      yield { field, wire, value: len, from: q, to: q + len };
      pos = q + len;
    } else if (wire === 1 || wire === 5) {
      pos += wire === 1 ? 8 : 4;
    } else throw new RangeError(`unsupported protobuf wire type ${wire}`);
  }
  if (pos !== to) throw new RangeError('protobuf message overruns its length');
}

const pbString = (r: FileBytes, f: PbField) => r.bytes(f.from, f.to - f.from).toString('utf8');

/**
 * The token embedding table of `model.onnx`, read from the protobuf without loading the weights:
 * the first `Gather` whose indices are the ids input (directly or through `Cast` / `Identity`) and
 * whose data is a 2-d initializer, or the word embedding of onnxruntime's fused
 * `EmbedLayerNormalization`. null when there is no such node (e.g. the table is computed, or
 * quantised and dequantised before the lookup) or the file cannot be walked: callers then skip
 * the checks that need it.
 */
export function readEmbeddingTable(modelPath: string, inputIds: string): EmbeddingTable | null {
  let fd: number;
  try {
    fd = openSync(modelPath, 'r');
  } catch {
    return null;
  }
  try {
    return findEmbeddingTable(new FileBytes(fd), fstatSync(fd).size, inputIds);
  } catch {
    return null;
  } finally {
    closeSync(fd);
  }
}

interface GraphNode {
  op: string;
  inputs: string[];
  outputs: string[];
}

function findEmbeddingTable(r: FileBytes, size: number, inputIds: string): EmbeddingTable | null {
  let graph: PbField | null = null;
  for (const f of pbFields(r, 0, size)) if (f.field === 7 && f.wire === 2) graph = f; // ModelProto.graph
  if (!graph) return null;
  const nodes: GraphNode[] = [];
  const initializers = new Map<string, number[]>();
  for (const f of pbFields(r, graph.from, graph.to)) {
    if (f.wire !== 2) continue;
    if (f.field === 1) {
      // GraphProto.node: NodeProto { input = 1, output = 2, op_type = 4 }
      const node: GraphNode = { op: '', inputs: [], outputs: [] };
      for (const g of pbFields(r, f.from, f.to)) {
        if (g.wire !== 2) continue;
        if (g.field === 1) node.inputs.push(pbString(r, g));
        else if (g.field === 2) node.outputs.push(pbString(r, g));
        else if (g.field === 4) node.op = pbString(r, g);
      }
      nodes.push(node);
    } else if (f.field === 5) {
      // GraphProto.initializer: TensorProto { dims = 1 (int64, packed or not), name = 8 }
      const dims: number[] = [];
      let name = '';
      for (const g of pbFields(r, f.from, f.to)) {
        if (g.field === 1 && g.wire === 0) dims.push(g.value);
        else if (g.field === 1 && g.wire === 2) {
          for (let pos = g.from; pos < g.to; ) {
            const [v, next] = readVarint(r, pos);
            dims.push(v);
            pos = next;
          }
        } else if (g.field === 8 && g.wire === 2) name = pbString(r, g);
      }
      initializers.set(name, dims);
    }
  }
  const ids = new Set([inputIds]);
  const table = (name: string | undefined): EmbeddingTable | null => {
    const dims = name === undefined ? undefined : initializers.get(name);
    return dims && dims.length === 2 ? { name: name!, rows: dims[0]! } : null;
  };
  for (const n of nodes) {
    if ((n.op === 'Cast' || n.op === 'Identity') && ids.has(n.inputs[0] ?? '')) n.outputs.forEach((o) => ids.add(o));
    const found =
      n.op === 'Gather' && ids.has(n.inputs[1] ?? '')
        ? table(n.inputs[0])
        : n.op === 'EmbedLayerNormalization' && ids.has(n.inputs[0] ?? '')
          ? table(n.inputs[2])
          : null;
    if (found) return found;
  }
  return null;
}
