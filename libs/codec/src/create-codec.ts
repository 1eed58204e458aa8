import { CodecSettingsSchema, type CodecSettings } from '@lateral/shared';
import type { Codec, CodecDescriptor } from './codec';
import { Fp16Codec, Fp32Codec, Int8Codec } from './simple-codecs';
import type { CodecArtifact } from './artifact';
import { EdenCodec } from './eden-codec';
import { ResidualCodec } from './residual-codec';
import { DEFAULT_BITS } from './fit-codec';

export type { CodecArtifact } from './artifact';

/**
 * Builds the codec for `settings`. fp32, fp16 and int8 need no artifact; eden works without
 * one only with neither `dims` nor `sideInfo` (no mean, no PCA); residual always needs one.
 * Default bits: eden 6, residual 2.
 */
export function createCodec(settings: CodecSettings, artifact?: CodecArtifact): Codec {
  const s = CodecSettingsSchema.parse(settings);
  if (artifact && (s.kind === 'eden' || s.kind === 'residual')) {
    const a = CodecSettingsSchema.parse(artifact.settings);
    if (a.kind !== s.kind || a.dims !== s.dims || a.sideInfo !== s.sideInfo)
      throw new Error(`artifact was fitted for ${JSON.stringify(a)}, not ${JSON.stringify(s)}`);
  }
  switch (s.kind) {
    case 'fp32':
      return new Fp32Codec();
    case 'fp16':
      return new Fp16Codec();
    case 'int8':
      return new Int8Codec(s.norms);
    case 'eden':
      if (!artifact && (s.dims !== undefined || s.sideInfo)) throw new Error('codec "eden" with dims or sideInfo needs a fitted artifact (fitCodec)');
      return new EdenCodec(s.bits ?? DEFAULT_BITS.eden, s.layout, s.norms, artifact ?? null);
    case 'residual':
      if (!artifact) throw new Error('codec "residual" needs a fitted artifact (fitCodec)');
      if (s.bits !== undefined && s.bits > 8) throw new RangeError('residual bits must be 1..8');
      return new ResidualCodec(s.bits ?? DEFAULT_BITS.residual, artifact);
  }
}

/** Rebuilds the codec a segment was written with from its stored descriptor. */
export function codecFromDescriptor(d: CodecDescriptor, artifact?: CodecArtifact): Codec {
  if (d === null || typeof d !== 'object') throw new Error('descriptor is not an object');
  let codec: Codec;
  if (d.artifact) {
    if (!artifact) throw new Error(`codec "${d.kind}" needs its artifact (v${d.artifact.version}, checksum ${d.artifact.checksum})`);
    if (artifact.checksum !== d.artifact.checksum || artifact.version !== d.artifact.version)
      throw new Error(`artifact mismatch: segment needs v${d.artifact.version}/${d.artifact.checksum}, got v${artifact.version}/${artifact.checksum}`);
    codec = createCodec(artifact.settings, artifact);
  } else {
    const settings = CodecSettingsSchema.parse({ kind: d.kind, norms: d.norms, ...(d.kind === 'eden' ? { bits: d.bits, layout: d.layout } : {}) });
    codec = createCodec(settings);
  }
  if (JSON.stringify(codec.descriptor) !== JSON.stringify(d)) throw new Error(`descriptor ${JSON.stringify(d)} does not match the codec it names`);
  return codec;
}
