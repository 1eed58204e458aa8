import { CodecSettingsSchema, type CodecSettings } from '@lateral/shared';
import type { Codec, CodecDescriptor } from './codec';
import { Fp16Codec, Fp32Codec, Int8Codec } from './simple-codecs';
import type { CodecArtifact } from './artifact';

export type { CodecArtifact } from './artifact';

/** Builds the codec for `settings`; fp32, fp16 and int8 need no artifact, eden and residual do. */
export function createCodec(settings: CodecSettings, artifact?: CodecArtifact): Codec {
  const s = CodecSettingsSchema.parse(settings);
  switch (s.kind) {
    case 'fp32':
      return new Fp32Codec();
    case 'fp16':
      return new Fp16Codec();
    case 'int8':
      return new Int8Codec(s.norms);
    case 'eden':
    case 'residual':
      if (!artifact) throw new Error(`codec "${s.kind}" needs a fitted artifact (fitCodec)`);
      throw new Error(`codec "${s.kind}" is not implemented yet`);
  }
}

/** Rebuilds the codec a segment was written with from its stored descriptor. */
export function codecFromDescriptor(d: CodecDescriptor, artifact?: CodecArtifact): Codec {
  if (d === null || typeof d !== 'object') throw new Error('descriptor is not an object');
  if (d.artifact !== null) {
    if (!artifact) throw new Error(`codec "${d.kind}" needs its artifact (checksum ${d.artifact.checksum})`);
    if (artifact.checksum !== d.artifact.checksum || artifact.version !== d.artifact.version)
      throw new Error(`artifact mismatch: segment needs v${d.artifact.version}/${d.artifact.checksum}, got v${artifact.version}/${artifact.checksum}`);
    return createCodec(artifact.settings, artifact);
  }
  const settings = CodecSettingsSchema.parse({ kind: d.kind, norms: d.norms });
  const codec = createCodec(settings);
  if (JSON.stringify(codec.descriptor) !== JSON.stringify(d)) throw new Error(`descriptor ${JSON.stringify(d)} does not round-trip`);
  return codec;
}
