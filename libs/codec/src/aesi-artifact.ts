import { CodecSettingsSchema, type CodecSettings } from '@lateral/shared';
import { makeArtifact, type CodecArtifact } from './artifact';
import { aesiDecoderLength, aesiEncoderLength, type AesiShape } from './aesi';

/** Fitted AESI weights (what @lateral/training's trainAesi exports), packed as ./aesi.ts describes. */
export interface AesiWeights extends AesiShape {
  encoder: Float32Array;
  decoder: Float32Array;
}

/**
 * The codec artifact of a trained AESI autoencoder: settings must be EDEN with side information
 * and `dims` = the code size (the EDEN stage quantises the code, as SDR does). Seed: the
 * collection seed (EDEN signs).
 */
export function aesiArtifact(settings: CodecSettings, w: AesiWeights, seed: bigint | number): CodecArtifact {
  const s = CodecSettingsSchema.parse(settings);
  if (s.kind !== 'eden' || !s.sideInfo || s.dims !== w.codeDims)
    throw new RangeError(`an AESI artifact needs kind 'eden', sideInfo true and dims = its code size ${w.codeDims}, got ${JSON.stringify(s)}`);
  if (w.encoder.length !== aesiEncoderLength(w) || w.decoder.length !== aesiDecoderLength(w)) throw new RangeError(`AESI weights do not match ${JSON.stringify({ ...w, encoder: undefined, decoder: undefined })}`);
  return makeArtifact({
    settings: s,
    inputDims: w.inputDims,
    codedDims: w.codeDims,
    seed: BigInt.asUintN(64, BigInt(seed)),
    mean: null,
    components: null,
    variances: null,
    sideDims: w.sideDims,
    predictor: null,
    centroids: null,
    cutoffs: null,
    weights: null,
    aesiWidth: w.width,
    aesiEncoder: w.encoder,
    aesiDecoder: w.decoder,
  });
}

/** The same trained weights under other settings (a recompress request's bits / layout / norms): a new checksum. */
export function withSettings(a: CodecArtifact, settings: CodecSettings): CodecArtifact {
  const { version: _v, checksum: _c, ...fields } = a;
  return makeArtifact({ ...fields, settings: CodecSettingsSchema.parse(settings) });
}
