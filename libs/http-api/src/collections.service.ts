import { randomUUID } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import {
  CodecSettingsSchema,
  ConflictError,
  CreateCollectionSchema,
  ModelManifestSchema,
  NotFoundError,
  QueueName,
  ValidationError,
  jobIds,
  s3Keys,
  toNdjson,
  type Collection,
  type CodecSettings,
  type ModelManifest,
} from '@lateral/shared';
import type { Runtime } from '@lateral/infra';
import { currentTenant } from './request-context';
import { parseDocumentsBody, validateDocuments } from './documents';
import { z } from 'zod';
import { zodIssues } from './zod-issues';

/** Collections and ingestion: validation, S3-first writes, then the encode jobs. */
export class CollectionsService {
  private readonly manifests = new Map<string, ModelManifest>();

  constructor(private readonly rt: Runtime) {}

  /** The caller's tenant (request-context.ts): DEFAULT_TENANT with AUTH=none, the API key's with AUTH=keys. */
  private get tenant(): string {
    return currentTenant(this.rt.config);
  }

  modelManifest(model: string): ModelManifest {
    const cached = this.manifests.get(model);
    if (cached) return cached;
    const file = path.resolve(this.rt.config.MODELS_DIR, model, 'manifest.json');
    let raw: unknown;
    try {
      raw = JSON.parse(readFileSync(file, 'utf8'));
    } catch {
      throw new ValidationError(`model '${model}' not found: no readable ${path.join(model, 'manifest.json')} under MODELS_DIR (${this.rt.config.MODELS_DIR}); the built-in models are made by \`npm run build-model\``, [
        { field: 'model', message: 'unknown model' },
      ]);
    }
    const m = ModelManifestSchema.safeParse(raw);
    if (!m.success) throw new ValidationError(`model '${model}' has an invalid manifest.json`, zodIssues(m.error, 'manifest'));
    this.manifests.set(model, m.data);
    return m.data;
  }

  async create(body: unknown): Promise<Collection> {
    const parsed = CreateCollectionSchema.safeParse(body);
    if (!parsed.success) throw new ValidationError('invalid collection', zodIssues(parsed.error));
    const req = parsed.data;
    const model = req.model ?? this.rt.config.DEFAULT_MODEL;
    const manifest = this.modelManifest(model);
    if (req.maxDocTokens !== undefined && req.maxDocTokens > manifest.maxDocTokens) {
      throw new ValidationError(`maxDocTokens ${req.maxDocTokens} is over the model's limit (${manifest.maxDocTokens})`, [
        { field: 'maxDocTokens', message: `at most ${manifest.maxDocTokens} for model ${model}` },
      ]);
    }
    this.checkPipelineCodec(req.codec, model, manifest);
    if (await this.rt.collections.get(this.tenant, req.id)) throw new ConflictError(`collection '${req.id}' already exists`);
    // A collection deleted and created again starts over at generation 1.
    this.rt.generations.forget(this.tenant, req.id);
    const c: Collection = {
      tenantId: this.tenant,
      id: req.id,
      model,
      dims: manifest.dims,
      maxDocTokens: req.maxDocTokens ?? manifest.maxDocTokens,
      codec: req.codec,
      codecVersion: 1,
      createdAt: new Date().toISOString(),
    };
    if (!(await this.rt.collections.create(c))) throw new ConflictError(`collection '${req.id}' already exists`);
    return c;
  }

  /**
   * Re-compresses a collection at new codec settings from its stored raw vectors, without
   * re-encoding: every batch is compressed again at a new codec version, and the new generation
   * is committed only when every segment is written.
   */
  async recompress(id: string, body: unknown) {
    const collection = await this.require(id);
    const parsed = z.object({ codec: CodecSettingsSchema }).strict().safeParse(body);
    if (!parsed.success) throw new ValidationError('invalid re-compression request', zodIssues(parsed.error));
    this.checkPipelineCodec(parsed.data.codec, collection.model, this.modelManifest(collection.model));
    if (collection.pending) throw new ConflictError(`collection '${id}' is already being re-compressed to codec v${collection.pending.codecVersion}`);
    const manifest = await this.rt.generations.manifest(this.tenant, id);
    if (!manifest || manifest.segments.length === 0) throw new ConflictError(`collection '${id}' has no committed segments to re-compress`);
    const codecVersion = Math.max(collection.codecVersion, ...manifest.segments.map((s) => s.codecVersion)) + 1;
    const batches = manifest.segments.map((s) => s.batchId);
    await this.rt.collections.update({ ...collection, pending: { codecVersion, codec: parsed.data.codec, batches, startedAt: new Date().toISOString() } });
    await this.rt.queues.addBulk(
      QueueName.compress,
      manifest.segments.map((s) => ({
        jobId: jobIds.compress(this.tenant, id, s.batchId, codecVersion),
        payload: {
          tenantId: this.tenant,
          collectionId: id,
          ingestionId: null,
          batchId: s.batchId,
          rawKey: s3Keys.rawVectors(this.tenant, id, s.batchId),
          codecVersion,
          documents: s.documents,
        },
      })),
    );
    return { collection: id, codecVersion, batches: batches.length, status: `/v1/collections/${id}` };
  }

  /**
   * Codec settings the pipeline can serve for this model: side information needs kind 'eden'
   * and a model whose manifest declares its static input embedding table (the file must exist).
   */
  private checkPipelineCodec(codec: CodecSettings, model: string, manifest: ModelManifest): void {
    if (codec.sideInfo) {
      if (codec.kind !== 'eden') {
        throw new ValidationError(`codec.sideInfo needs codec.kind 'eden' (got '${codec.kind}')`, [
          { field: 'codec.sideInfo', message: `side information is only available with kind 'eden', not '${codec.kind}'` },
        ]);
      }
      const se = manifest.staticEmbeddings;
      if (!se) {
        throw new ValidationError(`codec.sideInfo needs a model with static input embeddings; model '${model}' declares no staticEmbeddings in its manifest.json`, [
          { field: 'codec.sideInfo', message: `model '${model}' has no static embedding table (manifest staticEmbeddings)` },
        ]);
      }
      if (!existsSync(path.resolve(this.rt.config.MODELS_DIR, model, se.file))) {
        throw new ValidationError(`codec.sideInfo needs model '${model}''s static embedding table, but ${path.join(model, se.file)} is missing under MODELS_DIR`, [
          { field: 'codec.sideInfo', message: `static embedding table ${se.file} of model '${model}' is missing` },
        ]);
      }
    }
    if (codec.dims !== undefined && codec.dims > manifest.dims) {
      throw new ValidationError(`codec.dims ${codec.dims} is over the model's ${manifest.dims} dims`, [{ field: 'codec.dims', message: `at most ${manifest.dims}` }]);
    }
  }

  async require(id: string): Promise<Collection> {
    const c = await this.rt.collections.get(this.tenant, id);
    if (!c) throw new NotFoundError(`collection '${id}' not found`);
    return c;
  }

  async describe(id: string) {
    const c = await this.require(id);
    const manifest = await this.rt.generations.manifest(this.tenant, id);
    const stats = await this.rt.ingestions.totals(this.tenant, id, manifest, codecVersions(c));
    const bytes = manifest?.segments.reduce((s, x) => s + x.bytes, 0) ?? 0;
    const tokens = manifest?.segments.reduce((s, x) => s + x.tokens, 0) ?? 0;
    return {
      ...c,
      generation: manifest?.generation ?? 0,
      segments: manifest?.segments.length ?? 0,
      // distinct live ids (an id ingested again counts once)
      documents: manifest?.documents ?? manifest?.segments.reduce((s, x) => s + x.documents, 0) ?? 0,
      tokens,
      segmentBytes: bytes,
      bytesPerToken: tokens ? bytes / tokens : null,
      codecVersions: [...new Set(manifest?.segments.map((x) => x.codecVersion) ?? [])],
      stages: stats,
    };
  }

  async list() {
    const ids = await this.rt.collections.list(this.tenant);
    return { collections: await Promise.all(ids.map((id) => this.describe(id).catch(() => ({ id, missing: true })))) };
  }

  async delete(id: string): Promise<void> {
    await this.require(id);
    await this.rt.collections.delete(this.tenant, id);
    this.rt.generations.forget(this.tenant, id);
  }

  /**
   * Accepts a batch of documents. Everything is validated first (all-or-nothing), the documents
   * are written to S3, and only then are the encode jobs enqueued and the request answered.
   */
  async ingest(id: string, body: string, contentType: string | undefined) {
    const collection = await this.require(id);
    const docs = validateDocuments(parseDocumentsBody(body, contentType), {
      maxDocumentBytes: this.rt.config.MAX_DOCUMENT_BYTES,
      maxBatchDocuments: this.rt.config.MAX_BATCH_DOCUMENTS,
    });
    const ingestionId = `ing-${randomUUID()}`;
    const size = this.rt.config.ENCODE_BATCH_DOCUMENTS;
    const batches: { batchId: string; key: string; documents: number }[] = [];
    for (let i = 0; i < docs.length; i += size) {
      const batchId = `${ingestionId}-${String(batches.length).padStart(5, '0')}`;
      const chunk = docs.slice(i, i + size);
      const key = s3Keys.batchDocuments(this.tenant, collection.id, batchId);
      await this.rt.store.put(key, toNdjson(chunk), 'application/x-ndjson');
      batches.push({ batchId, key, documents: chunk.length });
    }
    // The record first: it is what the ingestion's progress is measured against.
    const record = { ingestionId, createdAt: new Date().toISOString(), documents: docs.length, batches: batches.map((b) => ({ batchId: b.batchId, documents: b.documents })) };
    await this.rt.ingestions.create(this.tenant, collection.id, record);
    await this.rt.queues.addBulk(
      QueueName.encode,
      batches.map((b) => ({
        jobId: jobIds.encode(this.tenant, collection.id, b.batchId),
        payload: { tenantId: this.tenant, collectionId: collection.id, ingestionId, batchId: b.batchId, documentsKey: b.key, documents: b.documents },
      })),
    );
    return { ingestionId, collection: collection.id, documents: docs.length, batches: batches.length, status: `/v1/collections/${collection.id}/ingestions/${ingestionId}` };
  }

  async ingestion(id: string, ingestionId: string) {
    const c = await this.require(id);
    const manifest = await this.rt.generations.manifest(this.tenant, id);
    const s = await this.rt.ingestions.state(this.tenant, id, ingestionId, manifest, codecVersions(c));
    if (!s) throw new NotFoundError(`ingestion '${ingestionId}' not found in collection '${id}'`);
    return {
      ingestionId,
      collection: id,
      state: s.state,
      stages: s.stages,
      batches: s.record.batches.length,
      createdAt: s.record.createdAt,
      ...(s.failures.length ? { failures: s.failures.map((f) => ({ batchId: f.batchId, stage: f.queue, documents: f.documents, error: f.error })) } : {}),
    };
  }
}

/** Codec versions whose segments count as compressed: every version up to a re-compression in flight. */
function codecVersions(c: Collection): number[] {
  const top = Math.max(c.codecVersion, c.pending?.codecVersion ?? 0);
  return Array.from({ length: top }, (_, i) => i + 1);
}
