import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { encoderDir } from './encoders';

describe('encoderDir (ENCODER_PRECISION)', () => {
  const root = mkdtempSync(join(tmpdir(), 'lateral-variants-'));
  afterAll(() => rmSync(root, { recursive: true, force: true }));
  for (const d of ['m', 'm-fp16', 'n']) {
    mkdirSync(join(root, d));
    writeFileSync(join(root, d, 'model.onnx'), '');
  }
  mkdirSync(join(root, 'n-int8')); // no graph in it

  it('picks <model>-<precision> when it holds a graph, else the model itself', () => {
    expect(encoderDir(root, 'm', 'fp32')).toBe(join(root, 'm'));
    expect(encoderDir(root, 'm', 'fp16')).toBe(join(root, 'm-fp16'));
    expect(encoderDir(root, 'm', 'int8')).toBe(join(root, 'm'));
    expect(encoderDir(root, 'n', 'int8')).toBe(join(root, 'n'));
    expect(encoderDir(root, 'm-fp16', 'fp16')).toBe(join(root, 'm-fp16'));
    expect(encoderDir(root, 'm')).toBe(join(root, 'm'));
  });
});
