import { DocCodec, type CodecDescriptor, type DocKey, type EncodedDoc } from './codec';
import type { CodecArtifact } from './artifact';
import { LinearStage } from './linear-stage';
import { packCodes, packedBytes, unpackCodes } from './bitpack';
import { nearestRow } from './linalg';

/**
 * PLAID-style residual codec (Santhanam et al. 2022): each coded vector z is stored as the id
 * of its nearest k-means centroid (u32, as PLAID's 4-byte id) plus its residual z - c,
 * quantized per coordinate to B bits against global bucket cutoffs (quantiles of the fitted
 * residual values), decoded to the bucket's mean value. Codes per doc: m x 4 bytes of ids,
 * then one bit stream of m x c codes (ceil(m c B / 8) bytes). No norms.
 */
export class ResidualCodec extends DocCodec {
  readonly descriptor: CodecDescriptor;
  readonly defaultSeed: bigint;
  private readonly stage: LinearStage;
  private readonly centroids: Float32Array;
  private readonly cutoffs: Float32Array;
  private readonly weights: Float32Array;
  private readonly k: number;

  constructor(
    readonly bits: number,
    readonly artifact: CodecArtifact,
  ) {
    super();
    if (!artifact.centroids || !artifact.cutoffs || !artifact.weights) throw new Error('residual codec needs an artifact with centroids, cutoffs and weights');
    if (artifact.weights.length !== 1 << bits) throw new Error(`artifact has ${artifact.weights.length} buckets, ${bits} bits need ${1 << bits}`);
    this.stage = new LinearStage(artifact);
    this.centroids = artifact.centroids;
    this.cutoffs = artifact.cutoffs;
    this.weights = artifact.weights;
    this.k = artifact.centroids.length / artifact.codedDims;
    this.defaultSeed = artifact.seed;
    this.descriptor = {
      kind: 'residual',
      bits,
      ...(artifact.components ? { codedDims: artifact.codedDims } : {}),
      norms: artifact.settings.norms,
      sideInfo: artifact.sideDims > 0,
      artifact: { version: artifact.version, checksum: artifact.checksum },
    };
  }

  override sideDims(): number {
    return this.stage.sideDims;
  }

  docBytes(tokens: number, dims: number) {
    return { codes: 4 * tokens + packedBytes(tokens * this.stage.outDims(dims), this.bits), norms: 0 };
  }

  bytesPerTokenEstimate(dims: number): number {
    return 4 + (this.stage.outDims(dims) * this.bits) / 8;
  }

  /** tokens x dims -> ids + packed residual codes. */
  encodeDoc(vectors: Float32Array, dims: number, _key: DocKey, side?: Float32Array): EncodedDoc {
    const m = vectors.length / dims;
    const c = this.stage.outDims(dims);
    const z = this.stage.forward(vectors, dims, side);
    const out = new Uint8Array(this.docBytes(m, dims).codes);
    const view = new DataView(out.buffer);
    const codes = new Uint8Array(m * c);
    for (let t = 0; t < m; t++) {
      const id = nearestRow(z, t, this.centroids, this.k, c);
      view.setUint32(4 * t, id, true);
      for (let j = 0; j < c; j++) {
        const r = z[t * c + j] - this.centroids[id * c + j];
        let b = 0;
        while (b < this.cutoffs.length && r > this.cutoffs[b]) b++;
        codes[t * c + j] = b;
      }
    }
    packCodes(codes, this.bits, out, 32 * m);
    return { codes: out, norms: new Uint8Array(0) };
  }

  /** -> tokens x dims. */
  decodeDoc(doc: EncodedDoc, tokens: number, dims: number, _key: DocKey, side?: Float32Array): Float32Array {
    const m = tokens;
    const c = this.stage.outDims(dims);
    const view = new DataView(doc.codes.buffer, doc.codes.byteOffset, doc.codes.byteLength);
    const codes = unpackCodes(doc.codes, this.bits, m * c, 32 * m);
    const z = new Float64Array(m * c);
    for (let t = 0; t < m; t++) {
      const id = Math.min(view.getUint32(4 * t, true), this.k - 1);
      for (let j = 0; j < c; j++) z[t * c + j] = this.centroids[id * c + j] + this.weights[codes[t * c + j]];
    }
    return this.stage.inverse(z, m, dims, side);
  }
}
