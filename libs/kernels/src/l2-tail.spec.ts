import { describe, expect, it } from 'vitest';
import { appendL2Normalize } from './l2-tail';
import { encodeModel, floatScalar, GraphBuilder, makeModel, makeValueInfo } from './onnx-graph';
import { createSession, ort } from './session';

/** y = x * 3 - 1 over [batch, seq, 5]: the graph whose output gets the normalisation tail. */
function model(opset: number, irVersion = 8): Uint8Array {
  const g = new GraphBuilder();
  g.op('Sub', [g.op('Mul', ['x', g.constant(floatScalar('three', 3))]), g.constant(floatScalar('one', 1))], {}, 'y');
  return encodeModel(makeModel(g.build('affine', [makeValueInfo('x', 'FLOAT', ['b', 's', 5])], [makeValueInfo('y', 'FLOAT', ['b', 's', 5])]), { opset, irVersion }));
}

describe('appendL2Normalize', () => {
  for (const opset of [13, 17, 18]) {
    it(`adds an output with every row of the last axis L2-normalised, the original output kept (opset ${opset})`, async () => {
      const tail = appendL2Normalize(model(opset, opset >= 18 ? 9 : 8), 'y');
      expect(tail?.output).toBe('y/l2norm');
      const { session } = await createSession(tail!.bytes);
      try {
        expect(session.outputNames).toEqual(expect.arrayContaining(['y', 'y/l2norm']));
        // row 1 maps to zeros (x = 1/3): it must stay zero, not NaN
        const x = Float32Array.from([1, 2, 3, 4, 5, 1 / 3, 1 / 3, 1 / 3, 1 / 3, 1 / 3, -7, 0.5, 0, 2, 9]);
        const out = await session.run({ x: new ort.Tensor('float32', x, [1, 3, 5]) });
        const y = out.y!.data as Float32Array;
        const n = out['y/l2norm']!.data as Float32Array;
        expect(out['y/l2norm']!.dims).toEqual([1, 3, 5]);
        for (let r = 0; r < 3; r++) {
          let s = 0;
          for (let k = 0; k < 5; k++) s += y[r * 5 + k]! ** 2;
          for (let k = 0; k < 5; k++) expect(n[r * 5 + k]!).toBeCloseTo(s > 0 ? y[r * 5 + k]! / Math.sqrt(s) : 0, 6);
        }
        expect(Array.from(n.subarray(5, 10)).every((v) => v === 0)).toBe(true);
      } finally {
        await session.release();
      }
    });
  }

  it('returns null for an output the graph does not have, or bytes that are not a model', () => {
    expect(appendL2Normalize(model(17), 'z')).toBeNull();
    expect(appendL2Normalize(Uint8Array.from([0xff, 0xff, 0xff]), 'y')).toBeNull();
    expect(appendL2Normalize(model(7), 'y')).toBeNull();
  });
});
