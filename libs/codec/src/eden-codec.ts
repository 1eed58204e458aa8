import { DocCodec, type CodecDescriptor, type DocKey, type EncodedDoc } from './codec';
import type { CodecArtifact } from './artifact';
import { LinearStage } from './linear-stage';
import { lloydMax, type LloydMaxTable } from './lloyd-max';
import { nextPow2 } from './hadamard';
import { fnv1a64, rademacher, signKey } from './prng';
import { packCodes, packedBytes, unpackCodes } from './bitpack';
import { edenDecodeBlock, edenEncodeBlock, edenRotate } from './eden';
import { fromHalfBits, toHalfBits } from './float16';
import { kernels, type RowMaximaInput } from '@lateral/simd';

/** SDR's cross-token block length. */
export const CROSS_BLOCK = 128;
const HALF_MAX = 65504;

/** Writes norms as fp32 or fp16 (fp16 clamps to the largest finite half, 65504). */
export function writeNorms(values: Float64Array, format: 'fp32' | 'fp16'): Uint8Array {
  const out = new Uint8Array(values.length * (format === 'fp32' ? 4 : 2));
  const view = new DataView(out.buffer);
  for (let i = 0; i < values.length; i++) {
    if (format === 'fp32') view.setFloat32(4 * i, values[i], true);
    else view.setUint16(2 * i, toHalfBits(Math.min(values[i], HALF_MAX)), true);
  }
  return out;
}

/** Shape: bytes -> count norms. */
export function readNorms(bytes: Uint8Array, count: number, format: 'fp32' | 'fp16'): Float64Array {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const out = new Float64Array(count);
  for (let i = 0; i < count; i++) out[i] = format === 'fp32' ? view.getFloat32(4 * i, true) : fromHalfBits(view.getUint16(2 * i, true));
  return out;
}

/** A query prepared for rotated-domain scoring against one document (token layout). */
export interface RotatedQuery {
  /** n x p: H Dg P q_i for each query token (p = padded coded dims). */
  rotated: Float64Array;
  /** n: <q_i, mean> (the part of the score the codes do not carry). */
  offsets: Float64Array;
  n: number;
}

/**
 * EDEN codec over the artifact's linear stage (PCA / side information / mean) or the identity.
 *
 * - layout `token`: each token's coded vector (c dims) is zero-padded to p = nextPow2(c) and is
 *   one EDEN block with its own norm. Every token of the collection shares one sign vector,
 *   key = seed (the codec artifact's collection seed), so a query is rotated once and scored
 *   against any document in the rotated domain (`rotateQuery` + `scoreRotated`, or the int8
 *   image of `rotatedImage`). Codes: ceil(m p B / 8) bytes per doc (one bit stream),
 *   norms: m x 4 (fp32) or m x 2 (fp16). The descriptor records `rotation: 'collection'`.
 * - layout `cross` (SDR): the document's coded values, token-major (m x c), are cut into
 *   128-blocks across token boundaries, the last block zero-padded; block b's signs use key =
 *   seed xor fnv1a64(docId) xor b. Bytes per doc: ceil(m c / 128) x (16 B + 4) with fp32 norms.
 */
export class EdenCodec extends DocCodec {
  readonly descriptor: CodecDescriptor;
  readonly defaultSeed: bigint | undefined;
  private readonly stage: LinearStage;
  private readonly table: LloydMaxTable;
  private readonly normBytes: number;
  private signCache: { seed: bigint; signs: Float64Array } | null = null;
  private byteLut: Uint8Array | null = null;
  private codeLut: Uint8Array | null = null;

  constructor(
    readonly bits: number,
    readonly layout: 'token' | 'cross',
    readonly norms: 'fp32' | 'fp16',
    readonly artifact: CodecArtifact | null,
  ) {
    super();
    this.stage = new LinearStage(artifact);
    this.table = lloydMax(bits);
    this.normBytes = norms === 'fp32' ? 4 : 2;
    this.defaultSeed = artifact?.seed;
    this.descriptor = {
      kind: 'eden',
      bits,
      ...(artifact?.components ? { codedDims: artifact.codedDims } : {}),
      layout,
      ...(layout === 'token' ? { rotation: 'collection' as const } : {}),
      norms,
      sideInfo: (artifact?.sideDims ?? 0) > 0,
      artifact: artifact ? { version: artifact.version, checksum: artifact.checksum } : null,
    };
  }

  override sideDims(): number {
    return this.stage.sideDims;
  }

  /** Coded dims c and per-token block length p for input dims d. */
  private shape(d: number): { c: number; p: number } {
    const c = this.stage.outDims(d);
    return { c, p: nextPow2(c) };
  }

  docBytes(tokens: number, dims: number) {
    const { c, p } = this.shape(dims);
    if (this.layout === 'token') return { codes: packedBytes(tokens * p, this.bits), norms: tokens * this.normBytes };
    const blocks = Math.ceil((tokens * c) / CROSS_BLOCK);
    return { codes: blocks * packedBytes(CROSS_BLOCK, this.bits), norms: blocks * this.normBytes };
  }

  bytesPerTokenEstimate(dims: number): number {
    const { c, p } = this.shape(dims);
    if (this.layout === 'token') return (p * this.bits) / 8 + this.normBytes;
    return (c / CROSS_BLOCK) * (packedBytes(CROSS_BLOCK, this.bits) + this.normBytes);
  }

  /** tokens x dims (+ side tokens x s) -> packed codes + norms. */
  encodeDoc(vectors: Float32Array, dims: number, key: DocKey, side?: Float32Array): EncodedDoc {
    const m = vectors.length / dims;
    const { c, p } = this.shape(dims);
    const z = this.stage.forward(vectors, dims, side);
    const sizes = this.docBytes(m, dims);
    const packed = new Uint8Array(sizes.codes);
    const h = fnv1a64(key.docId);
    if (this.layout === 'token') {
      const signs = this.tokenSigns(key.seed, p);
      const block = new Float64Array(p);
      const codes = new Uint8Array(p);
      const scratch = new Float64Array(p);
      const norms = new Float64Array(m);
      for (let t = 0; t < m; t++) {
        block.fill(0);
        block.set(z.subarray(t * c, (t + 1) * c));
        norms[t] = edenEncodeBlock(block, signs, this.table, codes, scratch);
        packCodes(codes, this.bits, packed, t * p * this.bits);
      }
      return { codes: packed, norms: writeNorms(norms, this.norms) };
    }
    const blocks = Math.ceil((m * c) / CROSS_BLOCK);
    const norms = new Float64Array(blocks);
    const block = new Float64Array(CROSS_BLOCK);
    const codes = new Uint8Array(CROSS_BLOCK);
    const scratch = new Float64Array(CROSS_BLOCK);
    const blockBytes = packedBytes(CROSS_BLOCK, this.bits);
    for (let b = 0; b < blocks; b++) {
      block.fill(0);
      block.set(z.subarray(b * CROSS_BLOCK, Math.min((b + 1) * CROSS_BLOCK, m * c)));
      norms[b] = edenEncodeBlock(block, rademacher(signKey(key.seed, h, b), CROSS_BLOCK), this.table, codes, scratch);
      packCodes(codes, this.bits, packed.subarray(b * blockBytes, (b + 1) * blockBytes));
    }
    return { codes: packed, norms: writeNorms(norms, this.norms) };
  }

  /** -> tokens x dims. */
  decodeDoc(doc: EncodedDoc, tokens: number, dims: number, key: DocKey, side?: Float32Array): Float32Array {
    const m = tokens;
    const { c, p } = this.shape(dims);
    const h = fnv1a64(key.docId);
    const plain = this.layout === 'token' ? this.stage.plainInverse(dims) : false;
    if (plain && c === dims) return this.decodeTokensPlain(doc, m, dims, p, key.seed, plain.mean);
    const z = new Float64Array(m * c);
    if (this.layout === 'token') {
      const norms = readNorms(doc.norms, m, this.norms);
      const signs = this.tokenSigns(key.seed, p);
      const codes = new Uint8Array(p);
      const out = new Float64Array(p);
      for (let t = 0; t < m; t++) {
        unpackCodes(doc.codes, this.bits, p, t * p * this.bits, codes);
        edenDecodeBlock(codes, norms[t], signs, this.table, out);
        z.set(out.subarray(0, c), t * c);
      }
    } else {
      const blocks = Math.ceil((m * c) / CROSS_BLOCK);
      const norms = readNorms(doc.norms, blocks, this.norms);
      const codes = new Uint8Array(CROSS_BLOCK);
      const out = new Float64Array(CROSS_BLOCK);
      const blockBytes = packedBytes(CROSS_BLOCK, this.bits);
      for (let b = 0; b < blocks; b++) {
        unpackCodes(doc.codes.subarray(b * blockBytes, (b + 1) * blockBytes), this.bits, CROSS_BLOCK, 0, codes);
        edenDecodeBlock(codes, norms[b], rademacher(signKey(key.seed, h, b), CROSS_BLOCK), this.table, out);
        const end = Math.min(CROSS_BLOCK, m * c - b * CROSS_BLOCK);
        z.set(out.subarray(0, end), b * CROSS_BLOCK);
      }
    }
    return this.stage.inverse(z, m, dims, side);
  }

  /**
   * decodeDoc of the token layout when the linear stage is a copy plus the mean: the same
   * arithmetic, in the same order (EDEN block decode in float64, the mean added in float64, one
   * rounding to float32), written straight into the result without the intermediate arrays;
   * whole-byte 4-bit codes are unpacked two per byte. Search and training decode millions of
   * tokens this way.
   */
  private decodeTokensPlain(doc: EncodedDoc, m: number, dims: number, p: number, seed: bigint, mean: Float64Array | Float32Array | null): Float32Array {
    const norms = readNorms(doc.norms, m, this.norms);
    const signs = this.tokenSigns(seed, p);
    const codes = new Uint8Array(p);
    const block = new Float64Array(p);
    const res = new Float32Array(m * dims);
    const packed = doc.codes;
    const bits = this.bits;
    const nibbles = bits === 4 && p % 2 === 0;
    for (let t = 0; t < m; t++) {
      if (nibbles) {
        // low bits first, as packCodes stores them; token t starts at byte t p / 2
        let b = (t * p) >> 1;
        for (let i = 0; i < p; i += 2, b++) {
          const v = packed[b];
          codes[i] = v & 15;
          codes[i + 1] = v >> 4;
        }
      } else unpackCodes(packed, bits, p, t * p * bits, codes);
      edenDecodeBlock(codes, norms[t], signs, this.table, block);
      const base = t * dims;
      if (mean) for (let j = 0; j < dims; j++) res[base + j] = block[j] + mean[j];
      else for (let j = 0; j < dims; j++) res[base + j] = block[j];
    }
    return res;
  }

  /** The token layout's sign vector: one per collection seed (cached, it is used for every token). */
  private tokenSigns(seed: bigint, p: number): Float64Array {
    if (this.signCache?.seed !== seed || this.signCache.signs.length !== p) this.signCache = { seed, signs: rademacher(signKey(seed, 0n, 0), p) };
    return this.signCache.signs;
  }

  /**
   * Prepares query tokens for rotated-domain scoring against documents coded with collection
   * seed `seed` (token layout, no side information). Shape: q n x dims -> n x p rotated + n offsets.
   */
  rotateQuery(q: Float32Array, dims: number, seed: bigint): RotatedQuery {
    if (this.layout !== 'token') throw new Error('rotated-domain scoring needs the token layout');
    if (this.stage.sideDims > 0) throw new Error('rotated-domain scoring is not available with side information');
    const { c, p } = this.shape(dims);
    const n = q.length / dims;
    const pq = this.stage.projectQuery(q, dims);
    const signs = this.tokenSigns(seed, p);
    const rotated = new Float64Array(n * p);
    for (let i = 0; i < n; i++) edenRotate(pq.subarray(i * c, (i + 1) * c), signs, rotated.subarray(i * p, (i + 1) * p));
    return { rotated, offsets: this.stage.queryOffsets(q, dims), n };
  }

  /**
   * What scoring token rows from their codes in the rotated domain needs (token layout without side
   * information; else null): <q_i, x^_r> = offsets_i + scale_r <H Dg P q_i, levels[C_r]> with
   * rotateQuery's rotated query and offsets, levels the centroid table (2^bits values) and
   * scale_r = ||z_r|| / sqrt p (0 for a zero or non-finite norm, which decodes to the mean alone):
   * the decoded row's inner product up to rounding, no row decoded. WARP's exact final stage.
   */
  rotatedRows(dims: number): { p: number; levels: Float64Array; scales: (norms: Uint8Array, tokens: number) => Float32Array } | null {
    if (this.layout !== 'token' || this.stage.sideDims > 0) return null;
    const { p } = this.shape(dims);
    const inv = 1 / Math.sqrt(p);
    return {
      p,
      levels: Float64Array.from(this.table.centroids),
      scales: (norms, tokens) => {
        const z = readNorms(norms, tokens, this.norms);
        const out = new Float32Array(tokens);
        for (let t = 0; t < tokens; t++) out[t] = z[t] === 0 || !Number.isFinite(z[t]) ? 0 : z[t] * inv;
        return out;
      },
    };
  }

  /**
   * Query tokens prepared to score token rows straight from their codes (token layout, no side
   * information): per query token i and row r, <q_i, x^_r> = offsets_i + ||z_r|| / sqrt p
   * <H Dg P q_i, C[X_r]>, summed from a table of the rotated query times every centroid (for
   * 4-bit codes, per code byte: two coordinates at once). Equal to the inner product with the
   * decoded row up to rounding (the decode rounds x^ to float32; this sums in float64), and no
   * row is decoded: XTR scores its probed rows this way. Shape: q n x dims.
   */
  queryLut(q: Float32Array, dims: number, seed: bigint): EdenQueryLut {
    const { rotated, offsets, n } = this.rotateQuery(q, dims, seed);
    const { p } = this.shape(dims);
    const cent = this.table.centroids;
    const bits = this.bits;
    const rowBytes = (p * bits) / 8;
    const byteWise = bits === 4 && Number.isInteger(rowBytes);
    // byte-wise: table[i][b][v] = R_i[2b] C[v & 15] + R_i[2b+1] C[v >> 4]; else table[i][k][c] = R_i[k] C[c]
    const width = byteWise ? rowBytes * 256 : p * cent.length;
    const table = new Float64Array(n * width);
    for (let i = 0; i < n; i++) {
      const r = rotated.subarray(i * p, (i + 1) * p);
      const t = table.subarray(i * width, (i + 1) * width);
      if (byteWise) {
        for (let b = 0; b < rowBytes; b++) for (let v = 0; v < 256; v++) t[b * 256 + v] = r[2 * b] * cent[v & 15] + r[2 * b + 1] * cent[v >> 4];
      } else for (let k = 0; k < p; k++) for (let c = 0; c < cent.length; c++) t[k * cent.length + c] = r[k] * cent[c];
    }
    return new EdenQueryLut({ n, p, bits, byteWise, table, width, offsets, normFormat: this.norms });
  }

  /** The centroid grid of `rotatedImage`: 127 / max|C| (see rotated-image.ts). */
  get imageScale(): number {
    const c = this.table.centroids;
    return 127 / Math.max(Math.abs(c[0]), Math.abs(c[c.length - 1]));
  }

  /** Per-token coded width p (the image's row length). */
  paddedDims(dims: number): number {
    return this.shape(dims).p;
  }

  /**
   * One document's codes as the uint8 centroid image of rotated-image.ts (token layout, no side
   * information): image m x p (written at `image[at * p ...]`), scales m (at `scales[at ...]`).
   */
  rotatedImage(doc: EncodedDoc, tokens: number, dims: number, image: Uint8Array, scales: Float32Array, at = 0): void {
    if (this.layout !== 'token') throw new Error('the rotated image needs the token layout');
    if (this.stage.sideDims > 0) throw new Error('the rotated image is not available with side information');
    const { p } = this.shape(dims);
    const S = this.imageScale;
    const norms = readNorms(doc.norms, tokens, this.norms);
    const inv = 1 / (Math.sqrt(p) * S);
    for (let t = 0; t < tokens; t++) scales[at + t] = Number.isFinite(norms[t]) ? norms[t] * inv : 0;
    const bits = this.bits;
    if (8 % bits === 0 && (p * bits) % 8 === 0) {
      // Whole bytes: one table lookup per byte gives its 8 / B image values.
      const per = 8 / bits;
      const byteLut = this.imageByteLut(per);
      const codes = doc.codes;
      const end = (tokens * p) / per;
      const start = image.byteOffset + at * p;
      if ((per === 2 || per === 4) && start % per === 0) {
        // Each byte's values written as one u16 / u32 (little-endian host, as the segment format assumes).
        const words = per === 2 ? new Uint16Array(byteLut.buffer, byteLut.byteOffset, 256) : new Uint32Array(byteLut.buffer, byteLut.byteOffset, 256);
        const out = per === 2 ? new Uint16Array(image.buffer, start, end) : new Uint32Array(image.buffer, start, end);
        for (let b = 0; b < end; b++) out[b] = words[codes[b]];
        return;
      }
      let o = at * p;
      for (let b = 0; b < end; b++) {
        const e = codes[b] * per;
        for (let i = 0; i < per; i++) image[o++] = byteLut[e + i];
      }
      return;
    }
    const lut = this.imageValues();
    const codes = new Uint8Array(p);
    for (let t = 0; t < tokens; t++) {
      unpackCodes(doc.codes, bits, p, t * p * bits, codes);
      const base = (at + t) * p;
      for (let k = 0; k < p; k++) image[base + k] = lut[codes[k]];
    }
  }

  /** code -> its image value, 128 + round(C[code] S), cached. */
  private imageValues(): Uint8Array {
    this.codeLut ??= Uint8Array.from(this.table.centroids, (c) => 128 + Math.round(c * this.imageScale));
    return this.codeLut;
  }

  /** byte -> its 8 / B image values (low bits first, as packCodes stores them), cached. */
  private imageByteLut(per: number): Uint8Array {
    if (this.byteLut) return this.byteLut;
    const values = this.imageValues();
    const mask = (1 << this.bits) - 1;
    const lut = new Uint8Array(256 * per);
    for (let v = 0; v < 256; v++) for (let i = 0; i < per; i++) lut[v * per + i] = values[(v >> (i * this.bits)) & mask];
    this.byteLut = lut;
    return lut;
  }


  /**
   * S_ij = <q_i, x^_j> straight from the codes: offsets_i + (||z_j|| / sqrt p) <H Dg P q_i, C[X_j]>.
   * Shape: rotated query n x p, doc of m tokens -> n x m.
   */
  scoreRotated(query: RotatedQuery, doc: EncodedDoc, tokens: number, dims: number): Float32Array {
    const { p } = this.shape(dims);
    const { n, rotated, offsets } = query;
    const norms = readNorms(doc.norms, tokens, this.norms);
    const codes = new Uint8Array(p);
    const values = new Float64Array(p);
    const out = new Float32Array(n * tokens);
    const inv = 1 / Math.sqrt(p);
    const cent = this.table.centroids;
    for (let t = 0; t < tokens; t++) {
      unpackCodes(doc.codes, this.bits, p, t * p * this.bits, codes);
      const scale = Number.isFinite(norms[t]) ? norms[t] * inv : 0;
      for (let k = 0; k < p; k++) values[k] = cent[codes[k]] * scale;
      for (let i = 0; i < n; i++) {
        let s = 0;
        const base = i * p;
        for (let k = 0; k < p; k++) s += rotated[base + k] * values[k];
        out[i * tokens + t] = offsets[i] + s;
      }
    }
    return out;
  }
}

/** What a query's table holds (EdenCodec.queryLut). */
interface QueryTable {
  /** query tokens */
  n: number;
  /** padded coded dims */
  p: number;
  bits: number;
  /** 4-bit codes: one entry per (query token, code byte, byte value); else per (query token, coordinate, code) */
  byteWise: boolean;
  table: Float64Array;
  /** entries per query token */
  width: number;
  /** n: <q_i, mean> */
  offsets: Float64Array;
  normFormat: 'fp32' | 'fp16';
}

/** A query's table for scoring token rows from their codes (EdenCodec.queryLut). */
export class EdenQueryLut {
  constructor(private readonly q: QueryTable) {}

  get n(): number {
    return this.q.n;
  }

  /** A scorer over one segment's rows (SegmentReader.rowCodes of a segment coded by the same codec and seed). */
  rows(rowCodes: { codes: Uint8Array; norms: Uint8Array }): EdenRowScorer {
    return new EdenRowScorer(this.q, rowCodes.codes, rowCodes.norms);
  }
}

/** <q_i, x^_r> for token rows r of one segment, from their codes (EdenQueryLut.rows). */
export class EdenRowScorer {
  private readonly view: DataView;
  private readonly rowBytes: number;
  private readonly inv: number;
  private readonly unpacked: Uint8Array;
  private readonly levels: number;
  private input: RowMaximaInput | null = null;

  constructor(
    private readonly q: QueryTable,
    private readonly codes: Uint8Array,
    private readonly norms: Uint8Array,
  ) {
    this.view = new DataView(norms.buffer, norms.byteOffset, norms.byteLength);
    this.rowBytes = (q.p * q.bits) / 8;
    this.inv = 1 / Math.sqrt(q.p);
    this.unpacked = new Uint8Array(q.p);
    this.levels = 1 << q.bits;
  }

  /**
   * ME-BERT's per-document best row: for each document k in [from, to) (its rows
   * [start[k], start[k + 1]) of this scorer's rows), best[k - from] = the largest score(i, r) over
   * its first min(m, rows) rows, the first on ties (-Infinity without rows), arg[k - from] = that
   * row's place among the document's rows (0 when none exceeds -Infinity). The same values as
   * score, bit for bit: 4-bit codes go through the rowMaxima kernel of @lateral/simd (WebAssembly
   * SIMD, or its JavaScript twin; a block of documents per call), other widths through score.
   */
  maxRows(i: number, start: Uint32Array, from: number, to: number, m: number, best: Float64Array, arg: Int32Array): void {
    const q = this.q;
    if (q.byteWise) {
      const input = (this.input ??= { table: q.table, to: 0, bpt: this.rowBytes, offset: 0, inv: this.inv, codes: this.codes, norms: this.norms, half: q.normFormat === 'fp16', start });
      input.to = i * q.width;
      input.offset = q.offsets[i];
      input.start = start;
      kernels().rowMaxima(input, from, to, m, best, arg);
      return;
    }
    for (let k = from; k < to; k++) {
      const r0 = start[k];
      const rows = Math.min(m, start[k + 1] - r0);
      let b = -Infinity;
      let a = 0;
      for (let j = 0; j < rows; j++) {
        const s = this.score(i, r0 + j);
        if (s > b) {
          b = s;
          a = j;
        }
      }
      best[k - from] = b;
      arg[k - from] = a;
    }
  }

  /** Query token i against token row r. */
  score(i: number, r: number): number {
    const q = this.q;
    const norm = q.normFormat === 'fp32' ? this.view.getFloat32(4 * r, true) : fromHalfBits(this.view.getUint16(2 * r, true));
    // a zero or non-finite norm decodes to the mean alone (edenDecodeBlock gives zeros)
    if (norm === 0 || !Number.isFinite(norm)) return q.offsets[i];
    const t = q.table;
    const o = i * q.width;
    let s = 0;
    if (q.byteWise) {
      const codes = this.codes;
      const base = r * this.rowBytes;
      for (let b = 0; b < this.rowBytes; b++) s += t[o + b * 256 + codes[base + b]];
    } else {
      const c = unpackCodes(this.codes, q.bits, q.p, r * q.p * q.bits, this.unpacked);
      const L = this.levels;
      for (let k = 0; k < q.p; k++) s += t[o + k * L + c[k]];
    }
    return q.offsets[i] + norm * this.inv * s;
  }
}
