import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { Controller, Get, Inject } from '@nestjs/common';
import { ID_PATTERN, ModelManifestSchema, type Config, type ModelListSchema, type Produces } from '@lateral/shared';
import { CONFIG } from '../common/tokens';

/** One model directory under MODELS_DIR, as GET /v1/models lists it. */
export interface ModelInfo {
  id: string;
  dims: number;
  maxQueryTokens: number;
  maxDocTokens: number;
  pooling: 'mean' | 'cls';
  /** The model a request without `model` (and without a collection) gets: DEFAULT_MODEL. */
  default: boolean;
  /** The model the Cohere-compatible route uses for Cohere's own model names (COHERE_MODEL). */
  cohere: boolean;
  description: string;
}

/** The answer fits the documented schema (a compile-time check). */
export type ModelListBody = Produces<typeof ModelListSchema, { models: ModelInfo[]; default: string; cohere: string }>;

/**
 * The models this service can encode with: every directory under MODELS_DIR whose manifest.json
 * parses (a directory without one, or with a broken one, is not a model and is left out). Read on
 * each call: `npm run build-model` adds models while the service runs.
 */
export function listModels(config: Pick<Config, 'MODELS_DIR' | 'DEFAULT_MODEL' | 'COHERE_MODEL'>): ModelInfo[] {
  const dir = path.resolve(config.MODELS_DIR);
  let names: string[];
  try {
    names = readdirSync(dir, { withFileTypes: true }).filter((e) => e.isDirectory() && ID_PATTERN.test(e.name)).map((e) => e.name);
  } catch {
    return [];
  }
  const cohere = config.COHERE_MODEL ?? config.DEFAULT_MODEL;
  const out: ModelInfo[] = [];
  for (const id of names.sort()) {
    let m;
    try {
      m = ModelManifestSchema.safeParse(JSON.parse(readFileSync(path.join(dir, id, 'manifest.json'), 'utf8')));
    } catch {
      continue;
    }
    if (!m.success) continue;
    const d = m.data;
    out.push({ id, dims: d.dims, maxQueryTokens: d.maxQueryTokens, maxDocTokens: d.maxDocTokens, pooling: d.pooling, default: id === config.DEFAULT_MODEL, cohere: id === cohere, description: d.description });
  }
  return out;
}

@Controller('v1/models')
export class ModelsController {
  constructor(@Inject(CONFIG) private readonly config: Config) {}

  /** GET /v1/models: `{ models: [...], default, cohere }`. */
  @Get()
  list() {
    return { models: listModels(this.config), default: this.config.DEFAULT_MODEL, cohere: this.config.COHERE_MODEL ?? this.config.DEFAULT_MODEL };
  }
}
