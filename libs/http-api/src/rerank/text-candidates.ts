import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { RequestTiming } from '../common/server-timing';
import { inlineRequest } from '../common/async-jobs';
import {
  assertModelId,
  ModelManifestSchema,
  ConflictError,
  NotFoundError,
  QueueName,
  ValidationError,
  isTextCandidate,
  jobIds,
  s3Keys,
  textCodecRef,
  textJobIds,
  textKeys,
  type Collection,
  type ModelManifest,
  type RerankRequest,
} from '@lateral/shared';
import type { ApiRepositories, QueuedJob } from '@lateral/infra';

/** The repositories this service is given (app.ts passes only these: pickRepositories). */
export const TEXT_RERANK_REPOSITORIES = ['config', 'serving', 'store', 'queues', 'flows'] as const satisfies readonly (keyof ApiRepositories)[];
/** What a re-rank submission uses: MODELS_DIR, the serving cache's collection records, S3, the queues and the flows. */
export type TextRerankDeps = Pick<ApiRepositories, (typeof TEXT_RERANK_REPOSITORIES)[number]>;

/**
 * Re-rank requests whose candidates may be texts: the request names a collection, a model, or
 * both (they must agree). Texts are never encoded here: a request with texts becomes a BullMQ flow,
 * the rerank job as parent of an encode-texts job that the encoder pool runs first (it reuses the
 * texts already in the text cache).
 */
export class TextRerankSubmitter {
  private readonly manifests = new Map<string, ModelManifest>();

  constructor(private readonly deps: TextRerankDeps) {}

  /** The manifest of a model directory under MODELS_DIR; 400 naming the model when there is none. */
  modelManifest(model: string, field = 'model'): ModelManifest {
    assertModelId(model, field);
    const cached = this.manifests.get(model);
    if (cached) return cached;
    let raw: unknown;
    try {
      raw = JSON.parse(readFileSync(path.resolve(this.deps.config.MODELS_DIR, model, 'manifest.json'), 'utf8'));
    } catch {
      throw new ValidationError(`unknown model '${model}': no model directory with a manifest.json of that name under MODELS_DIR`, [{ field, message: `unknown model '${model}'` }]);
    }
    const m = ModelManifestSchema.safeParse(raw);
    if (!m.success) throw new ValidationError(`model '${model}' has an invalid manifest.json`, [{ field, message: 'invalid manifest' }]);
    this.manifests.set(model, m.data);
    return m.data;
  }

  /** The request's collection (404 when unknown) or null; checks the model and the fields texts cannot use. */
  async target(tenantId: string, req: Pick<RerankRequest, 'collection' | 'model' | 'queries'> & { include?: unknown; group?: unknown }): Promise<Collection | null> {
    const collection = req.collection ? await this.deps.serving.collection(tenantId, req.collection) : null; // cached, fresh (serving-cache.ts)
    if (req.collection && !collection) throw new NotFoundError(`collection '${req.collection}' not found`);
    if (req.model) {
      this.modelManifest(req.model);
      if (collection && collection.model !== req.model) {
        // Well formed, but not what the stored collection holds: a conflict with its state (409).
        throw new ConflictError(`model '${req.model}' is not the model of collection '${collection.id}' (${collection.model}): leave model out, or name ${collection.model}`);
      }
    }
    const hasTexts = req.queries.some((q) => q.candidates.some(isTextCandidate));
    if (hasTexts && (req.include !== undefined || req.group !== undefined)) {
      throw new ValidationError('include and group read documents of a collection: they apply to id candidates only, not to text candidates', [
        { field: req.include !== undefined ? 'include' : 'group', message: 'not with text candidates' },
      ]);
    }
    return collection;
  }

  /** Writes the request (unless small) and its distinct texts to S3 and queues the job (returned), or the flow when there are texts (null). */
  async enqueue(tenantId: string, id: string, req: RerankRequest, collection: Collection | null, timing?: RequestTiming): Promise<QueuedJob | null> {
    const requestKey = s3Keys.rerankRequest(tenantId, id);
    // A small request travels in the job's data, a large one in S3 (INLINE_JOB_BYTES).
    const inline = inlineRequest(req);
    if (inline.request === undefined) await this.deps.store.putJson(requestKey, req);
    timing?.lap('request');
    const texts = [...new Set(req.queries.flatMap((q) => q.candidates.filter(isTextCandidate).map((c) => c.text)))];
    const payload = { tenantId, rerankId: id, requestKey, ...inline, ...(req.callback ? { callback: req.callback } : {}) };
    if (texts.length === 0) return this.deps.queues.add(QueueName.rerank, jobIds.rerank(tenantId, id), payload);
    const model = collection?.model ?? req.model!;
    const textsKey = textKeys.rerankTexts(tenantId, id);
    await this.deps.store.putJson(textsKey, texts);
    await this.deps.flows.add({
      queue: QueueName.rerank,
      jobId: jobIds.rerank(tenantId, id),
      payload,
      children: [
        {
          queue: QueueName.encodeTexts,
          jobId: textJobIds.rerankTexts(tenantId, id),
          payload: {
            tenantId,
            model,
            maxTokens: collection?.maxDocTokens ?? this.modelManifest(model).maxDocTokens,
            codec: textCodecRef(collection),
            textsKey,
            texts: texts.length,
          },
        },
      ],
    });
    return null;
  }

}
