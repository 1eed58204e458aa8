import { readdirSync } from 'node:fs';
import path from 'node:path';
import { ID_PATTERN, type Config } from '@lateral/shared';
import { listModels } from '../collections/models.controller';
import { openApiDocument, type LiveLimits } from './document';

/** Operator artifacts in SCORERS_DIR (`<name>.onnx`, `<name>.json`), by extension, without it. */
export function operatorArtifacts(scorersDir: string): { onnx: string[]; json: string[] } {
  const out = { onnx: [] as string[], json: [] as string[] };
  let names: string[] = [];
  try {
    names = readdirSync(path.resolve(scorersDir), { withFileTypes: true }).filter((e) => e.isFile()).map((e) => e.name);
  } catch {
    return out;
  }
  for (const name of names.sort()) {
    const m = /^(.+)\.(onnx|json)$/.exec(name);
    if (m && ID_PATTERN.test(m[1]) && !m[1].endsWith('.training')) out[m[2] as 'onnx' | 'json'].push(m[1]);
  }
  return out;
}

type LiveConfig = Pick<Config, 'MODELS_DIR' | 'SCORERS_DIR' | 'DEFAULT_MODEL' | 'COHERE_MODEL' | 'RERANK_MAX_WAIT_SECONDS' | 'COLLECTION_MAX_SHARDS' | 'WEBHOOK_ALLOWED_HOSTS' | 'WEBHOOK_SECRET'>;

/** What the document states from this service's configuration and folders, now. */
export function liveLimits(config: LiveConfig): LiveLimits {
  const models = listModels(config);
  return {
    maxWaitSeconds: config.RERANK_MAX_WAIT_SECONDS,
    maxShards: config.COLLECTION_MAX_SHARDS,
    models: models.map((m) => m.id),
    modelLimits: models.map((m) => ({ id: m.id, dims: m.dims, maxDocTokens: m.maxDocTokens })),
    defaultModel: config.DEFAULT_MODEL,
    artifacts: operatorArtifacts(config.SCORERS_DIR),
    callbackHosts: config.WEBHOOK_SECRET ? config.WEBHOOK_ALLOWED_HOSTS.split(',').map((h) => h.trim()).filter(Boolean) : [],
  };
}

/**
 * The served /openapi.json: the document with the values only this service knows (the models
 * built under MODELS_DIR, the operator artifacts in SCORERS_DIR, RERANK_MAX_WAIT_SECONDS,
 * COLLECTION_MAX_SHARDS). Those are read at most once a second; the document is rebuilt when they
 * change (`npm run build-model` or a new artifact while the service runs).
 */
export function liveOpenApiDocument(config: LiveConfig): () => ReturnType<typeof openApiDocument> {
  let key = '';
  let at = 0;
  let doc: ReturnType<typeof openApiDocument> | null = null;
  return () => {
    if (doc && Date.now() - at < 1000) return doc;
    at = Date.now();
    const limits = liveLimits(config);
    const next = JSON.stringify(limits);
    if (!doc || next !== key) {
      doc = openApiDocument('0.1.0', limits);
      key = next;
    }
    return doc;
  };
}
