export { crc32c, crc32cUpdate } from './crc32c';
export { toHalfBits, fromHalfBits, encodeHalf, decodeHalf, roundToHalf } from './float16';
export { SegmentCorruptError } from './errors';
export type { Codec, CodecDescriptor, DocKey, EncodedDoc, EncodedVectors } from './codec';
export { Fp32Codec, Fp16Codec, Int8Codec } from './simple-codecs';
export { createCodec, codecFromDescriptor } from './create-codec';
export type { CodecArtifact } from './artifact';
export { writeSegment, readSegment, SEGMENT_MAGIC, SEGMENT_VERSION, SECTION_IDS } from './segment';
export type { SegmentDocs, SegmentReader, WriteSegmentOptions, ReadSegmentOptions } from './segment';
