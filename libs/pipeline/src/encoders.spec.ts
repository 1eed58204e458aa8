import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { encoderDir, encoderSessions } from './encoders';

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

  it("auto: int8 on the CPU provider, fp32 on CUDA", () => {
    mkdirSync(join(root, 'k'));
    writeFileSync(join(root, 'k', 'model.onnx'), '');
    mkdirSync(join(root, 'k-int8'));
    writeFileSync(join(root, 'k-int8', 'model.onnx'), '');
    expect(encoderDir(root, 'k', 'auto', 'cpu')).toBe(join(root, 'k-int8'));
    expect(encoderDir(root, 'k', 'auto', 'cuda')).toBe(join(root, 'k'));
    expect(encoderDir(root, 'm', 'auto', 'cpu')).toBe(join(root, 'm'));
  });
});

describe('encoderSessions (ENCODER_SESSIONS)', () => {
  it('0 (auto): two sessions on CUDA, one on the CPU provider; a configured count is kept on either', () => {
    expect(encoderSessions(0, 'cuda')).toBe(2);
    expect(encoderSessions(0, 'cpu')).toBe(1);
    expect(encoderSessions(3, 'cpu')).toBe(3);
    expect(encoderSessions(1, 'cuda')).toBe(1);
  });
});
