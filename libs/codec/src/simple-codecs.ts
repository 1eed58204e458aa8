import { DocCodec, type CodecDescriptor, type EncodedDoc, type EncodedVectors, bytesOf, viewAs } from './codec';
import { decodeHalf, encodeHalf } from './float16';

/** Raw float32: 4 d bytes per token, exact. */
export class Fp32Codec extends DocCodec {
  readonly descriptor: CodecDescriptor = { kind: 'fp32', norms: 'fp32', sideInfo: false, artifact: null };
  docBytes(tokens: number, dims: number) {
    return { codes: tokens * dims * 4, norms: 0 };
  }
  bytesPerTokenEstimate(dims: number): number {
    return dims * 4;
  }
  /** tokens x dims -> 4 tokens dims bytes. */
  encodeDoc(vectors: Float32Array): EncodedDoc {
    return { codes: bytesOf(vectors), norms: new Uint8Array(0) };
  }
  /** -> tokens x dims. */
  decodeDoc(doc: EncodedDoc): Float32Array {
    return viewAs(doc.codes, Float32Array);
  }
}

/** IEEE binary16, round to nearest even: 2 d bytes per token, relative error <= 2^-11 in the normal range. */
export class Fp16Codec extends DocCodec {
  readonly descriptor: CodecDescriptor = { kind: 'fp16', norms: 'fp32', sideInfo: false, artifact: null };
  docBytes(tokens: number, dims: number) {
    return { codes: tokens * dims * 2, norms: 0 };
  }
  bytesPerTokenEstimate(dims: number): number {
    return dims * 2;
  }
  /** tokens x dims -> 2 tokens dims bytes. */
  encodeDoc(vectors: Float32Array): EncodedDoc {
    return { codes: bytesOf(encodeHalf(vectors)), norms: new Uint8Array(0) };
  }
  /**
   * The batch at once: a document's codes are its values' halves, so the document-major
   * concatenation of encodeDoc is encodeHalf of the rows [tokenOffsets[0], T), with no copy per document.
   */
  override encode(vectors: Float32Array, tokenOffsets: Uint32Array, dims: number): EncodedVectors {
    const h = encodeHalf(vectors.subarray(tokenOffsets[0] * dims, tokenOffsets[tokenOffsets.length - 1] * dims));
    return { codes: new Uint8Array(h.buffer, h.byteOffset, h.byteLength), norms: new Uint8Array(0) };
  }
  /** -> tokens x dims. */
  decodeDoc(doc: EncodedDoc): Float32Array {
    return decodeHalf(viewAs(doc.codes, Uint16Array));
  }
}

/**
 * Per-token symmetric int8: scale s = max_j |x_j| / 127 (stored as fp32 or fp16 in the norms
 * section), q_j = round(x_j / s) in [-127, 127] (-128 unused, so the code is symmetric);
 * decode x^_j = q_j s. Error per coordinate <= s / 2 = max|x| / 254 (plus the fp16 rounding
 * of s when norms are fp16: x^ then uses the stored, rounded scale, and q is computed against
 * that same rounded scale so the bound still holds). An all-zero token has s = 0 and decodes to 0.
 * d + 4 (or d + 2) bytes per token.
 */
export class Int8Codec extends DocCodec {
  readonly descriptor: CodecDescriptor;
  constructor(readonly norms: 'fp32' | 'fp16') {
    super();
    this.descriptor = { kind: 'int8', norms, sideInfo: false, artifact: null };
  }
  private get scaleBytes(): number {
    return this.norms === 'fp32' ? 4 : 2;
  }
  docBytes(tokens: number, dims: number) {
    return { codes: tokens * dims, norms: tokens * this.scaleBytes };
  }
  bytesPerTokenEstimate(dims: number): number {
    return dims + this.scaleBytes;
  }
  /** tokens x dims -> tokens x dims int8 codes + tokens scales. */
  encodeDoc(vectors: Float32Array, dims: number): EncodedDoc {
    const m = dims === 0 ? 0 : vectors.length / dims;
    const codes = new Int8Array(m * dims);
    const scales = new Float32Array(m);
    for (let t = 0; t < m; t++) {
      let max = 0;
      for (let j = 0; j < dims; j++) max = Math.max(max, Math.abs(vectors[t * dims + j]));
      scales[t] = max / 127;
    }
    const stored = this.norms === 'fp32' ? scales : decodeHalf(encodeHalf(scales));
    for (let t = 0; t < m; t++) {
      const s = stored[t];
      if (s === 0 || !Number.isFinite(s)) continue; // zero token (or unrepresentable scale): codes stay 0
      for (let j = 0; j < dims; j++) {
        const q = Math.round(vectors[t * dims + j] / s);
        codes[t * dims + j] = q > 127 ? 127 : q < -127 ? -127 : q;
      }
    }
    const normBytes = this.norms === 'fp32' ? bytesOf(stored) : bytesOf(encodeHalf(scales));
    return { codes: bytesOf(codes), norms: normBytes };
  }
  /** -> tokens x dims. */
  decodeDoc(doc: EncodedDoc, tokens: number, dims: number): Float32Array {
    const codes = new Int8Array(doc.codes.buffer, doc.codes.byteOffset, doc.codes.byteLength);
    const scales = this.norms === 'fp32' ? viewAs(doc.norms, Float32Array) : decodeHalf(viewAs(doc.norms, Uint16Array));
    const out = new Float32Array(tokens * dims);
    for (let t = 0; t < tokens; t++) {
      const s = Number.isFinite(scales[t]) ? scales[t] : 0;
      for (let j = 0; j < dims; j++) out[t * dims + j] = codes[t * dims + j] * s;
    }
    return out;
  }
}
