import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ModelManifestSchema, type ModelManifest } from '@lateral/shared';
import { ModelLoadError } from './errors';

/** The three files of a model directory, read and validated (the ONNX graph itself is only located). */
export interface ModelDirFiles {
  dir: string;
  manifest: ModelManifest;
  tokenizerJson: Record<string, unknown>;
  modelPath: string;
}

function readJson(path: string, what: string): unknown {
  if (!existsSync(path)) throw new ModelLoadError(`${path}: ${what} not found`);
  try {
    return JSON.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new ModelLoadError(`${path}: invalid JSON (${err instanceof Error ? err.message : String(err)})`);
  }
}

/** Parses manifest JSON, throwing ModelLoadError naming the file and each failing field. */
export function parseManifest(raw: unknown, path = 'manifest.json'): ModelManifest {
  const res = ModelManifestSchema.safeParse(raw);
  if (!res.success) {
    const fields = res.error.issues.map((i) => `field '${i.path.join('.') || '(root)'}': ${i.message}`);
    throw new ModelLoadError(`${path}: invalid manifest: ${fields.join('; ')}`, res.error.issues);
  }
  return res.data;
}

export function readModelDir(dir: string): ModelDirFiles {
  const manifestPath = join(dir, 'manifest.json');
  const tokenizerPath = join(dir, 'tokenizer.json');
  const modelPath = join(dir, 'model.onnx');
  const manifest = parseManifest(readJson(manifestPath, 'model manifest'), manifestPath);
  const tokenizerJson = readJson(tokenizerPath, 'tokenizer (Hugging Face tokenizer.json)');
  if (typeof tokenizerJson !== 'object' || tokenizerJson === null || !('model' in tokenizerJson)) {
    throw new ModelLoadError(`${tokenizerPath}: field 'model' missing: not a Hugging Face tokenizer.json`);
  }
  if (!existsSync(modelPath)) throw new ModelLoadError(`${modelPath}: ONNX model not found`);
  return { dir, manifest, tokenizerJson: tokenizerJson as Record<string, unknown>, modelPath };
}
