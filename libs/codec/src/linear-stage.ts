import type { CodecArtifact } from './artifact';
import { aesiDecode, aesiEncode, type AesiShape } from './aesi';

/**
 * The artifact's linear stage (see CodecArtifact): raw vectors <-> coded vectors.
 * Identity when there is no artifact (or it has no mean / PCA / predictor). With an AESI
 * artifact the stage is SDR's autoencoder instead (./aesi.ts): not linear, so only forward and
 * inverse exist (no query projection: side information already rules out rotated-domain scoring).
 */
export class LinearStage {
  readonly inputDims: number | null;
  readonly codedDims: number | null;
  readonly sideDims: number;
  private readonly aesi: (AesiShape & { encoder: Float32Array; decoder: Float32Array }) | null;
  constructor(private readonly a: CodecArtifact | null) {
    this.inputDims = a?.inputDims ?? null;
    this.codedDims = a ? a.codedDims : null;
    this.sideDims = a?.sideDims ?? 0;
    this.aesi =
      a && (a.aesiWidth ?? 0) > 0 && a.aesiEncoder && a.aesiDecoder
        ? { inputDims: a.inputDims, sideDims: a.sideDims, codeDims: a.codedDims, width: a.aesiWidth!, encoder: a.aesiEncoder, decoder: a.aesiDecoder }
        : null;
  }

  /** Output dims for input dims `d`. */
  outDims(d: number): number {
    return this.codedDims ?? d;
  }

  private check(d: number, m: number, side: Float32Array | undefined) {
    if (this.inputDims !== null && d !== this.inputDims) throw new RangeError(`codec was fitted on ${this.inputDims} dims, got ${d}`);
    if (this.sideDims > 0 && (!side || side.length !== m * this.sideDims))
      throw new RangeError(`side information needs tokens x ${this.sideDims} static embeddings, got ${side?.length ?? 'none'} values for ${m} tokens`);
  }

  /** x -> z. Shape: m x d (+ side m x s) -> m x c. */
  forward(x: Float32Array, d: number, side?: Float32Array): Float64Array {
    const m = d === 0 ? 0 : x.length / d;
    this.check(d, m, side);
    if (this.aesi) return aesiEncode(this.aesi, this.aesi.encoder, x, side!, m);
    const a = this.a;
    const r = new Float64Array(m * d);
    for (let i = 0; i < m * d; i++) r[i] = x[i];
    if (!a) return r;
    if (a.predictor && side) this.addPrediction(r, m, d, side, -1);
    if (a.mean) for (let t = 0; t < m; t++) for (let j = 0; j < d; j++) r[t * d + j] -= a.mean[j];
    if (!a.components) return r;
    const c = a.codedDims;
    const p = a.components;
    const z = new Float64Array(m * c);
    for (let t = 0; t < m; t++)
      for (let k = 0; k < c; k++) {
        let s = 0;
        for (let j = 0; j < d; j++) s += p[k * d + j] * r[t * d + j];
        z[t * c + k] = s;
      }
    return z;
  }

  /**
   * Whether `inverse` is a copy plus the mean (no PCA, predictor or AESI) for input dims d: then
   * its mean (null: none), which a decoder may add itself, value by value as `inverse` does
   * (float64 sum, one rounding to float32), saving the intermediate arrays. false otherwise.
   */
  plainInverse(d: number): { mean: Float64Array | Float32Array | null } | false {
    const a = this.a;
    if (this.aesi || this.sideDims > 0 || a?.components || a?.predictor) return false;
    if (this.inputDims !== null && d !== this.inputDims) throw new RangeError(`codec was fitted on ${this.inputDims} dims, got ${d}`);
    return { mean: a?.mean ?? null };
  }

  /** z -> x^. Shape: m x c (+ side m x s) -> m x d. */
  inverse(z: Float64Array, m: number, d: number, side?: Float32Array): Float32Array {
    this.check(d, m, side);
    if (this.aesi) return Float32Array.from(aesiDecode(this.aesi, this.aesi.decoder, z, side!, m));
    const a = this.a;
    const x = new Float64Array(m * d);
    if (a?.components) {
      const c = a.codedDims;
      const p = a.components;
      for (let t = 0; t < m; t++)
        for (let k = 0; k < c; k++) {
          const zk = z[t * c + k];
          if (zk === 0) continue;
          for (let j = 0; j < d; j++) x[t * d + j] += zk * p[k * d + j];
        }
    } else x.set(z.subarray(0, m * d));
    if (a?.mean) for (let t = 0; t < m; t++) for (let j = 0; j < d; j++) x[t * d + j] += a.mean[j];
    if (a?.predictor && side) this.addPrediction(x, m, d, side, 1);
    return Float32Array.from(x);
  }

  /** Projects query tokens into the coded space without the mean: P q. Shape: n x d -> n x c. */
  projectQuery(q: Float32Array, d: number): Float64Array {
    const n = q.length / d;
    const a = this.a;
    if (this.aesi) throw new Error('an AESI codec has no linear query projection');
    if (!a?.components) return Float64Array.from(q);
    const c = a.codedDims;
    const out = new Float64Array(n * c);
    for (let i = 0; i < n; i++)
      for (let k = 0; k < c; k++) {
        let s = 0;
        for (let j = 0; j < d; j++) s += a.components[k * d + j] * q[i * d + j];
        out[i * c + k] = s;
      }
    return out;
  }

  /** <q_i, mean> per query token. Shape: n x d -> n. */
  queryOffsets(q: Float32Array, d: number): Float64Array {
    const n = q.length / d;
    const out = new Float64Array(n);
    const mean = this.a?.mean;
    if (mean) for (let i = 0; i < n; i++) for (let j = 0; j < d; j++) out[i] += q[i * d + j] * mean[j];
    return out;
  }

  /** r += sign * W^T [u; 1] per token. */
  private addPrediction(r: Float64Array, m: number, d: number, side: Float32Array, sign: number) {
    const w = this.a!.predictor!;
    const s = this.sideDims;
    for (let t = 0; t < m; t++) {
      for (let j = 0; j < d; j++) r[t * d + j] += sign * w[s * d + j];
      for (let k = 0; k < s; k++) {
        const uk = side[t * s + k] * sign;
        if (uk === 0) continue;
        for (let j = 0; j < d; j++) r[t * d + j] += uk * w[k * d + j];
      }
    }
  }
}
