import { ModelLoadError } from './errors';

/** One tensor of a safetensors file, as float32 (F32 as stored; F16 / BF16 widened). */
export interface NamedTensor {
  shape: number[];
  data: Float32Array;
}

/**
 * Reads a safetensors file (an 8-byte little-endian header length, a JSON header of
 * `name -> { dtype, shape, data_offsets }`, then the raw little-endian tensor bytes). Floating
 * tensors only (F32, F16, BF16); integer tensors (e.g. BERT's `position_ids` buffer) are skipped.
 */
export function readSafetensors(bytes: Uint8Array, source = 'model.safetensors'): Map<string, NamedTensor> {
  if (bytes.length < 8) throw new ModelLoadError(`${source}: ${bytes.length} bytes is too short for a safetensors file`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const n = Number(view.getBigUint64(0, true));
  if (n <= 0 || 8 + n > bytes.length) throw new ModelLoadError(`${source}: header length ${n} out of range (file is ${bytes.length} bytes)`);
  let header: Record<string, { dtype: string; shape: number[]; data_offsets: [number, number] }>;
  try {
    header = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + n)));
  } catch (err) {
    throw new ModelLoadError(`${source}: header is not JSON (${(err as Error).message})`);
  }
  const base = 8 + n;
  const out = new Map<string, NamedTensor>();
  for (const [name, t] of Object.entries(header)) {
    if (name === '__metadata__') continue;
    const [a, b] = t.data_offsets;
    const count = t.shape.reduce((p, x) => p * x, 1);
    if (base + b > bytes.length || b < a) throw new ModelLoadError(`${source}: tensor ${name} lies outside the file`);
    const raw = bytes.subarray(base + a, base + b);
    let data: Float32Array;
    if (t.dtype === 'F32') {
      if (raw.length !== count * 4) throw new ModelLoadError(`${source}: tensor ${name} has ${raw.length} bytes for ${count} F32 values`);
      data = new Float32Array(count);
      new Uint8Array(data.buffer).set(raw);
    } else if (t.dtype === 'F16' || t.dtype === 'BF16') {
      if (raw.length !== count * 2) throw new ModelLoadError(`${source}: tensor ${name} has ${raw.length} bytes for ${count} ${t.dtype} values`);
      data = new Float32Array(count);
      const dv = new DataView(raw.buffer, raw.byteOffset, raw.byteLength);
      for (let i = 0; i < count; i++) data[i] = t.dtype === 'BF16' ? bf16(dv.getUint16(2 * i, true)) : f16(dv.getUint16(2 * i, true));
    } else {
      continue;
    }
    out.set(name, { shape: t.shape, data });
  }
  return out;
}

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

function bf16(h: number): number {
  u32[0] = h << 16;
  return f32[0];
}

function f16(h: number): number {
  const s = h & 0x8000 ? -1 : 1;
  const e = (h >> 10) & 0x1f;
  const m = h & 0x3ff;
  if (e === 0) return s * m * 2 ** -24;
  if (e === 31) return m ? NaN : s * Infinity;
  return s * (1 + m / 1024) * 2 ** (e - 15);
}
