import * as ort from 'onnxruntime-node';
import { describe, expect, it } from 'vitest';
import { GraphBuilder, encodeModel, floatAttr, floatTensor, makeModel, makeNode, makeTensor, makeValueInfo } from './onnx-graph';

describe('onnx-graph helpers', () => {
  it('build a graph onnxruntime runs: y = relu(x * 2 + b)', async () => {
    const g = new GraphBuilder();
    const two = g.constant(floatTensor('two', [], [2]));
    const b = g.constant(floatTensor('b', [3], [1, -10, 0.5]));
    g.op('Relu', [g.op('Add', [g.op('Mul', ['x', two]), b])], {}, 'y');
    const model = makeModel(g.build('t', [makeValueInfo('x', 'FLOAT', ['n', 3])], [makeValueInfo('y', 'FLOAT', ['n', 3])]));
    const s = await ort.InferenceSession.create(encodeModel(model));
    const out = await s.run({ x: new ort.Tensor('float32', Float32Array.from([1, 2, 3, -1, 0, 1]), [2, 3]) });
    expect(Array.from(out.y!.data as Float32Array)).toEqual([3, 0, 6.5, 0, 0, 2.5]);
    await s.release();
  });

  it('reject inconsistent tensors and non-integer INT attributes', () => {
    expect(() => makeTensor('t', [2, 3], new Float32Array(5))).toThrow(/dims \[2,3\] hold 6 elements but data has 5/);
    expect(() => makeNode('LeakyRelu', ['x'], ['y'], { alpha: 0.1 })).toThrow(/use floatAttr/);
    expect(makeNode('LeakyRelu', ['x'], ['y'], { alpha: floatAttr(0.1) }).attribute[0]!.f).toBeCloseTo(0.1);
  });
});
