import type { CodecSettings } from '@lateral/shared';

/** What a segment records about how its vectors were coded (stored as JSON in the header). */
export interface CodecDescriptor {
  kind: CodecSettings['kind'];
  /** Bits per coordinate (eden: 1..8, residual: 1..4); absent for fp32 / fp16 / int8. */
  bits?: number;
  /** Dims after the codec's linear reduction (PCA); absent = the segment's dims. */
  codedDims?: number;
  layout?: 'token' | 'cross';
  /** Token layout: one random rotation (sign vector) per collection seed. */
  rotation?: 'collection';
  /** Storage of per-token (or per-block) scales / norms. */
  norms: 'fp32' | 'fp16';
  sideInfo: boolean;
  /** Identity of the fitted artifact the codes need: its format version and CRC32C. */
  artifact: { version: number; checksum: number } | null;
  /**
   * Segments only: the rows are token-pooling means, ceil(m / poolFactor) per document of m
   * tokens (`codec.poolFactor`, 2..16); absent = 1, one row per token. Not part of a codec's own descriptor.
   */
  poolFactor?: number;
}

/** Per-document context a codec may need (EDEN derives its random signs from it). */
export interface DocKey {
  docId: string;
  /** Collection / segment seed, 64-bit. */
  seed: bigint;
}

/** One document's coded bytes. */
export interface EncodedDoc {
  codes: Uint8Array;
  norms: Uint8Array;
}

/** All documents' coded bytes, document-major: doc i's bytes start at the prefix sum of docBytes(). */
export interface EncodedVectors {
  codes: Uint8Array;
  norms: Uint8Array;
}

export interface Codec {
  readonly descriptor: CodecDescriptor;
  /** Seed `writeSegment` records when none is given (a fitted codec's collection seed). */
  readonly defaultSeed?: bigint;
  /** Exact bytes of codes and norms for one document of `tokens` tokens of `dims` dims. */
  docBytes(tokens: number, dims: number): { codes: number; norms: number };
  /** Bytes per token for long documents (ignores last-block padding). */
  bytesPerTokenEstimate(dims: number): number;
  /**
   * Codes one document. `vectors`: tokens x dims. `side` (sideInfo codecs only): tokens x staticDims,
   * the static embedding of each token.
   */
  encodeDoc(vectors: Float32Array, dims: number, key: DocKey, side?: Float32Array): EncodedDoc;
  /** Reconstructs one document: returns tokens x dims. */
  decodeDoc(doc: EncodedDoc, tokens: number, dims: number, key: DocKey, side?: Float32Array): Float32Array;
  /** Codes a batch. `vectors`: T x dims, `tokenOffsets`: docs + 1, `keys`: docs. */
  encode(vectors: Float32Array, tokenOffsets: Uint32Array, dims: number, keys: DocKey[], side?: Float32Array): EncodedVectors;
  /** Reconstructs a batch: returns T x dims. */
  decode(encoded: EncodedVectors, tokenOffsets: Uint32Array, dims: number, keys: DocKey[], side?: Float32Array): Float32Array;
}

/**
 * Shared batch plumbing: a codec implements the per-document pair and gets `encode` / `decode`
 * over document-major concatenations for free.
 */
export abstract class DocCodec implements Codec {
  abstract readonly descriptor: CodecDescriptor;
  abstract docBytes(tokens: number, dims: number): { codes: number; norms: number };
  abstract bytesPerTokenEstimate(dims: number): number;
  abstract encodeDoc(vectors: Float32Array, dims: number, key: DocKey, side?: Float32Array): EncodedDoc;
  abstract decodeDoc(doc: EncodedDoc, tokens: number, dims: number, key: DocKey, side?: Float32Array): Float32Array;

  /** Side-information width the codec expects (0 = none). */
  sideDims(): number {
    return 0;
  }

  encode(vectors: Float32Array, tokenOffsets: Uint32Array, dims: number, keys: DocKey[], side?: Float32Array): EncodedVectors {
    const docs = tokenOffsets.length - 1;
    let codeTotal = 0;
    let normTotal = 0;
    for (let i = 0; i < docs; i++) {
      const b = this.docBytes(tokenOffsets[i + 1] - tokenOffsets[i], dims);
      codeTotal += b.codes;
      normTotal += b.norms;
    }
    const codes = new Uint8Array(codeTotal);
    const norms = new Uint8Array(normTotal);
    const sd = this.sideDims();
    let co = 0;
    let no = 0;
    for (let i = 0; i < docs; i++) {
      const a = tokenOffsets[i];
      const b = tokenOffsets[i + 1];
      const enc = this.encodeDoc(vectors.subarray(a * dims, b * dims), dims, keys[i], side?.subarray(a * sd, b * sd));
      codes.set(enc.codes, co);
      norms.set(enc.norms, no);
      co += enc.codes.length;
      no += enc.norms.length;
    }
    return { codes, norms };
  }

  decode(encoded: EncodedVectors, tokenOffsets: Uint32Array, dims: number, keys: DocKey[], side?: Float32Array): Float32Array {
    const docs = tokenOffsets.length - 1;
    const out = new Float32Array(tokenOffsets[docs] * dims);
    const sd = this.sideDims();
    let co = 0;
    let no = 0;
    for (let i = 0; i < docs; i++) {
      const a = tokenOffsets[i];
      const m = tokenOffsets[i + 1] - a;
      const b = this.docBytes(m, dims);
      const doc = { codes: encoded.codes.subarray(co, co + b.codes), norms: encoded.norms.subarray(no, no + b.norms) };
      out.set(this.decodeDoc(doc, m, dims, keys[i], side?.subarray(a * sd, (a + m) * sd)), a * dims);
      co += b.codes;
      no += b.norms;
    }
    return out;
  }
}

/** Copies the bytes of a typed array into a fresh Uint8Array (little-endian host). */
export function bytesOf(a: Float32Array | Uint16Array | Int8Array | Int32Array | Uint32Array): Uint8Array {
  return new Uint8Array(a.buffer.slice(a.byteOffset, a.byteOffset + a.byteLength));
}

/** An aligned copy of `bytes` viewed as `ctor` elements (the byte length must be a multiple of the element size). */
export function viewAs<T>(bytes: Uint8Array, ctor: new (b: ArrayBuffer) => T): T {
  return new ctor(bytes.slice().buffer);
}
