import { describe, expect, it } from 'vitest';
import type { EncodedText, TokenEncoder } from '@lateral/model';
import { EarlyQueryEncodings } from './early-encoding';

const encoded = (text: string): EncodedText => ({ tokenIds: Int32Array.of(text.length), vectors: Float32Array.of(text.length), weights: null, length: 1, truncated: false });

/** An encoder provider that records which model each call asked for. */
function provider(fail?: string) {
  const asked: string[] = [];
  const encoders = async (model: string) => {
    asked.push(model);
    if (model === fail) throw new Error(`no model ${model}`);
    return { encodeQueries: async (texts: string[]) => texts.map(encoded) } as unknown as TokenEncoder;
  };
  return { asked, encoders };
}

describe('EarlyQueryEncodings', () => {
  it('gives the encoding to a job whose collection uses the model it was started with, and its own time', async () => {
    const { asked, encoders } = provider();
    const early = EarlyQueryEncodings.start(encoders, 'm1', ['ab', 'abc']);
    const got = await early.take('m1')!;
    expect(asked).toEqual(['m1']);
    expect(got.queries.map((q) => q.tokenIds[0])).toEqual([2, 3]);
    expect(got.ms).toBeGreaterThanOrEqual(0);
  });

  it('gives nothing for another model, and an unused failed encoding is never an unhandled rejection', async () => {
    const { encoders } = provider('gone');
    const unhandled: unknown[] = [];
    const on = (e: unknown) => unhandled.push(e);
    process.on('unhandledRejection', on);
    try {
      const early = EarlyQueryEncodings.start(encoders, 'gone', ['q']);
      expect(early.take('other')).toBeUndefined();
      await new Promise((r) => setTimeout(r, 20));
      expect(unhandled).toEqual([]);
      // taken, the failure reaches the job
      await expect(early.take('gone')!).rejects.toThrow(/no model gone/);
    } finally {
      process.off('unhandledRejection', on);
    }
  });

  it('remembers the last model per collection, forgets on demand and keeps at most its bound', () => {
    const m = new EarlyQueryEncodings(2);
    expect(m.modelOf('t', 'a')).toBeUndefined();
    m.remember('t', 'a', 'm1');
    m.remember('t', 'a', 'm2');
    expect(m.modelOf('t', 'a')).toBe('m2');
    expect(m.modelOf('u', 'a')).toBeUndefined(); // per tenant
    m.remember('t', 'b', 'm1');
    m.remember('t', 'c', 'm1'); // over the bound: the oldest ('a') goes
    expect(m.modelOf('t', 'a')).toBeUndefined();
    expect(m.modelOf('t', 'b')).toBe('m1');
    m.forget('t', 'b');
    expect(m.modelOf('t', 'b')).toBeUndefined();
    expect(m.modelOf('t', 'c')).toBe('m1');
  });
});
