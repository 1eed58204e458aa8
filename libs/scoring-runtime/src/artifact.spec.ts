import { describe, expect, it } from 'vitest';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { liteShapes } from '@lateral/scoring';
import { parseArgs, writeScorerArtifact } from '../../../scripts/write-scorer-artifact';
import { randomLiteWeights, readLiteArtifact, seededUniform } from './artifact';

describe('write-scorer-artifact', () => {
  const sizes = { L1: 3, L2: 4, m1: 5, m2: 6 };
  it('writes LITE from JSON and from binary identically to the in-memory weights', () => {
    const dir = mkdtempSync(join(tmpdir(), 'artifact-'));
    try {
      const w = randomLiteWeights(3, sizes);
      const json: Record<string, unknown> = { ...sizes };
      const parts: Float32Array[] = [];
      for (const key of Object.keys(liteShapes(3, 4, 5, 6))) {
        const arr = (w as unknown as Record<string, Float32Array>)[key];
        json[key] = Array.from(arr);
        parts.push(arr);
      }
      writeFileSync(join(dir, 'w.json'), JSON.stringify(json));
      const bin = Buffer.alloc(parts.reduce((s, p) => s + p.length, 0) * 4);
      let o = 0;
      for (const p of parts) for (const x of p) { bin.writeFloatLE(x, o); o += 4; }
      writeFileSync(join(dir, 'w.bin'), bin);
      writeScorerArtifact(parseArgs(['lite', '--out', join(dir, 'a.onnx'), '--weights', join(dir, 'w.json')]));
      writeScorerArtifact(parseArgs(['lite', '--out', join(dir, 'b.onnx'), '--weights', join(dir, 'w.bin'), '--L1', '3', '--L2', '4', '--m1', '5', '--m2', '6']));
      const a = readLiteArtifact(join(dir, 'a.onnx'));
      const b = readLiteArtifact(join(dir, 'b.onnx'));
      expect(a).toEqual(w);
      expect(b).toEqual(w);
      expect(readFileSync(join(dir, 'a.onnx')).equals(readFileSync(join(dir, 'b.onnx')))).toBe(true);
      expect(() => writeScorerArtifact(parseArgs(['lite', '--out', join(dir, 'c.onnx'), '--weights', join(dir, 'w.bin'), '--size', 'small']))).toThrow('LITE binary: ');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
  it('seeded weights are reproducible and the CLI rejects bad arguments', () => {
    expect(randomLiteWeights(5, sizes)).toEqual(randomLiteWeights(5, sizes));
    expect(seededUniform(1)()).not.toBe(seededUniform(2)());
    expect(() => parseArgs(['lite'])).toThrow('--out FILE is required');
    expect(() => parseArgs(['foo'])).toThrow('usage:');
    expect(() => parseArgs(['lite', '--out', 'x', '--size', 'huge'])).toThrow('--size must be default or small');
  });
});
