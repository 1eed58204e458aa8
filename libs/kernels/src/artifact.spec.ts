import { describe, expect, it } from 'vitest';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { liteShapes } from '@lateral/scoring';
import {
  knrmWeightsFromJson, liteWeightsFromBinary, liteWeightsFromJson, randomLiteWeights, readLiteArtifact, seededUniform, writeLiteArtifact,
} from './artifact';

describe('LITE artifacts', () => {
  const sizes = { L1: 3, L2: 4, m1: 5, m2: 6 };
  it('JSON and binary weight files give the in-memory weights; the written artifact reads back identically', () => {
    const w = randomLiteWeights(3, sizes);
    const json: Record<string, unknown> = { ...sizes };
    const parts: Float32Array[] = [];
    for (const key of Object.keys(liteShapes(3, 4, 5, 6))) {
      const arr = (w as unknown as Record<string, Float32Array>)[key];
      json[key] = Array.from(arr);
      parts.push(arr);
    }
    const bin = Buffer.alloc(parts.reduce((s, p) => s + p.length, 0) * 4);
    let o = 0;
    for (const p of parts) for (const x of p) { bin.writeFloatLE(x, o); o += 4; }
    expect(liteWeightsFromJson(JSON.parse(JSON.stringify(json)))).toEqual(w);
    expect(liteWeightsFromBinary(bin, sizes)).toEqual(w);
    expect(() => liteWeightsFromBinary(bin, { ...sizes, m2: 7 })).toThrow('LITE binary: 576 bytes, expected 620 (155 float32) for L1=3 L2=4 m1=5 m2=7');
    expect(() => liteWeightsFromJson({ ...json, W2: [1] })).toThrow('LITE JSON: W2 must be an array of 24 numbers, got 1');
    const dir = mkdtempSync(join(tmpdir(), 'artifact-'));
    try {
      writeLiteArtifact(join(dir, 'a.onnx'), w);
      writeLiteArtifact(join(dir, 'b.onnx'), liteWeightsFromBinary(bin, sizes));
      expect(readLiteArtifact(join(dir, 'a.onnx'))).toEqual(w);
      expect(readFileSync(join(dir, 'a.onnx')).equals(readFileSync(join(dir, 'b.onnx')))).toBe(true);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
  it('seeded weights are reproducible; K-NRM JSON is validated', () => {
    expect(randomLiteWeights(5, sizes)).toEqual(randomLiteWeights(5, sizes));
    expect(seededUniform(1)()).not.toBe(seededUniform(2)());
    expect(knrmWeightsFromJson({ w: Array(11).fill(0.5), b: 1 }).w).toHaveLength(11);
    expect(() => knrmWeightsFromJson({ w: [1], b: 0 })).toThrow('K-NRM JSON: expected');
  });
});
