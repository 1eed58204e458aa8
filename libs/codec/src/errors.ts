/**
 * A segment failed validation: bad magic/version, a checksum mismatch, a truncation, or
 * contents inconsistent with the header. Never retried: the bytes will not get better.
 */
export class SegmentCorruptError extends Error {
  constructor(
    readonly segment: string,
    readonly section: string,
    detail: string,
  ) {
    super(`segment "${segment}" is corrupt in section "${section}": ${detail}`);
    this.name = 'SegmentCorruptError';
  }
}
