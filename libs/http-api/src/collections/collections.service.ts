import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import {
  assertModelId,
  CodecSettingsSchema,
  ConflictError,
  CreateCollectionSchema,
  ModelManifestSchema,
  NotFoundError,
  QueueName,
  ReindexRequestSchema,
  ValidationError,
  jobIds,
  mergeJobId,
  warpLayoutOf,
  s3Keys,
  trainingKeys,
  type Collection,
  type CodecSettings,
  type ModelManifest,
} from '@lateral/shared';
import { deserializeArtifact } from '@lateral/codec';
import type { ApiRepositories } from '@lateral/infra';
import { currentTenant } from '../common/request-context';
import { z } from 'zod';
import { zodIssues } from '../common/zod-issues';
import { degradedOf } from './degraded';
import { codecVersions } from '../common/codec-versions';

/** The repositories this service is given (app.ts passes only these: pickRepositories). */
export const COLLECTIONS_REPOSITORIES = ['config', 'collections', 'generations', 'ingestions', 'store', 'queues'] as const satisfies readonly (keyof ApiRepositories)[];
/** What collections use: their records, manifests and ingestion totals, S3 (codec artifacts, degraded segments), the compress queue (re-compression). */
export type CollectionsDeps = Pick<ApiRepositories, (typeof COLLECTIONS_REPOSITORIES)[number]>;

/** Collections: create (model and codec checked against the model directory), describe, list, delete, re-compress. */
export class CollectionsService {
  private readonly manifests = new Map<string, ModelManifest>();

  constructor(private readonly deps: CollectionsDeps) {}

  /** The caller's tenant (request-context.ts): DEFAULT_TENANT with AUTH=none, the API key's with AUTH=keys. */
  private get tenantId(): string {
    return currentTenant(this.deps.config);
  }

  modelManifest(model: string): ModelManifest {
    assertModelId(model);
    const cached = this.manifests.get(model);
    if (cached) return cached;
    const file = path.resolve(this.deps.config.MODELS_DIR, model, 'manifest.json');
    let raw: unknown;
    try {
      raw = JSON.parse(readFileSync(file, 'utf8'));
    } catch {
      throw new ValidationError(`model '${model}' not found: no readable ${path.join(model, 'manifest.json')} under MODELS_DIR (${this.deps.config.MODELS_DIR}); the built-in models are made by \`npm run build-model\``, [
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
    const model = req.model ?? this.deps.config.DEFAULT_MODEL;
    const manifest = this.modelManifest(model);
    if (req.maxDocTokens !== undefined && req.maxDocTokens > manifest.maxDocTokens) {
      throw new ValidationError(`maxDocTokens ${req.maxDocTokens} is over the model's limit (${manifest.maxDocTokens})`, [
        { field: 'maxDocTokens', message: `at most ${manifest.maxDocTokens} for model ${model}` },
      ]);
    }
    this.checkPipelineCodec(req.codec, model, manifest);
    if (req.codec.trained) {
      throw new ValidationError('codec.trained names a codec trained on a collection\'s own vectors: create the collection, train (head aesi), then re-compress with it', [
        { field: 'codec.trained', message: 'only allowed in POST /v1/collections/{id}/recompress' },
      ]);
    }
    const maxDocTokens = req.maxDocTokens ?? manifest.maxDocTokens;
    if (req.passages && req.passages.overlap * 2 > maxDocTokens) {
      throw new ValidationError(`passages.overlap ${req.passages.overlap} is over half of maxDocTokens (${maxDocTokens}), the passage window`, [
        { field: 'passages.overlap', message: `at most ${Math.floor(maxDocTokens / 2)} (half of maxDocTokens ${maxDocTokens})` },
      ]);
    }
    const maxShards = this.deps.config.COLLECTION_MAX_SHARDS;
    if (req.shards !== undefined && req.shards > maxShards) {
      throw new ValidationError(`shards ${req.shards} is over this deployment's limit (COLLECTION_MAX_SHARDS = ${maxShards})`, [
        { field: 'shards', message: `at most ${maxShards} (COLLECTION_MAX_SHARDS)` },
      ]);
    }
    if (await this.deps.collections.get(this.tenantId, req.id)) throw new ConflictError(`collection '${req.id}' already exists`);
    // A collection deleted and created again starts over at generation 1.
    this.deps.generations.forget(this.tenantId, req.id);
    const c: Collection = {
      tenantId: this.tenantId,
      id: req.id,
      model,
      dims: manifest.dims,
      maxDocTokens: req.maxDocTokens ?? manifest.maxDocTokens,
      codec: req.codec,
      ...(req.passages ? { passages: req.passages } : {}),
      ...(req.shards !== undefined && req.shards > 1 ? { shards: req.shards } : {}),
      search: req.search,
      bm25: req.bm25,
      codecVersion: 1,
      createdAt: new Date().toISOString(),
    };
    if (!(await this.deps.collections.create(c))) throw new ConflictError(`collection '${req.id}' already exists`);
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
    // The collection's model bounds the codec (dims, side information): well-formed settings it cannot take are a 409.
    this.checkPipelineCodec(parsed.data.codec, collection.model, this.modelManifest(collection.model), true);
    if (parsed.data.codec.trained) await this.checkTrainedCodec(id, parsed.data.codec);
    if (collection.pending) throw new ConflictError(`collection '${id}' is already being re-compressed to codec v${collection.pending.codecVersion}`);
    if (collection.reindex) throw new ConflictError(`collection '${id}' is being re-indexed to WARP search layouts (since ${collection.reindex.startedAt}); re-compress once it is done (GET /v1/collections/${id}: \`search\` set, \`reindex\` gone)`);
    const manifest = await this.deps.generations.manifest(this.tenantId, id);
    if (!manifest || manifest.segments.length === 0) throw new ConflictError(`collection '${id}' has no committed segments to re-compress`);
    const codecVersion = Math.max(collection.codecVersion, ...manifest.segments.map((s) => s.codecVersion)) + 1;
    const batches = manifest.segments.map((s) => s.batchId);
    await this.deps.collections.update({ ...collection, pending: { codecVersion, codec: parsed.data.codec, batches, startedAt: new Date().toISOString() } });
    await this.deps.queues.addBulk(
      QueueName.compress,
      manifest.segments.map((s) => ({
        jobId: jobIds.compress(this.tenantId, id, s.batchId, codecVersion),
        payload: {
          tenantId: this.tenantId,
          collectionId: id,
          ingestionId: null,
          batchId: s.batchId,
          rawKey: s3Keys.rawVectors(this.tenantId, id, s.batchId),
          codecVersion,
          documents: s.documents,
        },
      })),
    );
    return { collection: id, codecVersion, batches: batches.length, status: `/v1/collections/${id}` };
  }

  /**
   * POST /v1/collections/{id}/reindex: gives an IVF collection (created with `search: { layout:
   * 'ivf' }`, or before WARP was the default) WARP search layouts. Records the re-index in the
   * collection (`reindex`) and queues a merge job, which builds every live segment's layout from its
   * codes and then sets `search` (libs/pipeline/src/maintenance/warp-reindex.ts); searches keep the
   * IVF path until then. 409 when the collection already has WARP layouts, is being re-compressed,
   * or is being re-indexed at other bits; asking again with the same settings queues the job again.
   */
  async reindex(id: string, body: unknown) {
    const collection = await this.require(id);
    const parsed = ReindexRequestSchema.safeParse(body ?? {});
    if (!parsed.success) throw new ValidationError('invalid re-index request', zodIssues(parsed.error));
    const search = parsed.data.search;
    const warp = warpLayoutOf(collection);
    if (warp) throw new ConflictError(`collection '${id}' already has WARP search layouts (bits ${warp.bits}); a collection's layout bits are fixed once built`);
    if (collection.pending) throw new ConflictError(`collection '${id}' is being re-compressed to codec v${collection.pending.codecVersion}; re-index once it is done`);
    if (collection.reindex && collection.reindex.search.bits !== search.bits) {
      throw new ConflictError(`collection '${id}' is already being re-indexed to WARP at ${collection.reindex.search.bits} bits (since ${collection.reindex.startedAt})`);
    }
    const reindex = collection.reindex ?? { search, codecVersion: collection.codecVersion, startedAt: new Date().toISOString() };
    if (!collection.reindex) await this.deps.collections.update({ ...collection, reindex });
    const generation = (await this.deps.generations.manifest(this.tenantId, id))?.generation ?? 0;
    // A job id of its own (a merge job of this generation may have run already: its id would not run again).
    await this.deps.queues.add(QueueName.merge, `${mergeJobId(this.tenantId, id, 'reindex', generation)}-${Date.now()}`, { op: 'merge', tenantId: this.tenantId, collectionId: id, trigger: 'reindex' });
    return { collection: id, search: reindex.search, startedAt: reindex.startedAt, status: `/v1/collections/${id}` };
  }

  /**
   * Codec settings the pipeline can serve for this model: side information needs kind 'eden'
   * and a model whose manifest declares its static input embedding table (the file must exist).
   */
  /** codec.trained: the trained AESI codec must exist for this collection and match kind 'eden', sideInfo and dims. */
  private async checkTrainedCodec(id: string, codec: CodecSettings): Promise<void> {
    const name = codec.trained!;
    const bytes = await this.deps.store.get(trainingKeys.trainedCodec(this.tenantId, id, name));
    // 409 naming codec.trained: the body is well formed (a 400 would call valid input invalid) and
    // the collection in the URL exists (a 404 would say it does not); the collection has no such
    // codec yet, a state a train job changes. As an unknown judgment set named in a train request.
    if (!bytes) throw new ConflictError(`codec.trained '${name}' is not a trained codec of collection '${id}' (POST /v1/collections/${id}/train with head 'aesi' writes one)`);
    const trained = deserializeArtifact(bytes);
    if (codec.kind !== 'eden' || !codec.sideInfo || codec.dims !== trained.codedDims) {
      throw new ConflictError(`codec.trained '${name}' is an AESI codec of ${trained.codedDims} code dims: it needs kind 'eden', sideInfo true and dims ${trained.codedDims}`);
    }
  }

  /** `stored`: the collection exists (re-compression): what its model cannot take is a 409, not a 400. */
  private checkPipelineCodec(codec: CodecSettings, model: string, manifest: ModelManifest, stored = false): void {
    const modelBound = (message: string, issues: { field: string; message: string }[]) => (stored ? new ConflictError(message) : new ValidationError(message, issues));
    // Side information decodes each stored row with its token's static embedding; a pooled row is
    // the mean of several tokens and has no one token id, so the two do not combine.
    if ((codec.poolFactor ?? 1) > 1 && codec.sideInfo) {
      throw new ValidationError(`codec.poolFactor ${codec.poolFactor} cannot be combined with codec.sideInfo (side information needs one token id per stored vector; pooled vectors are means of several tokens)`, [
        { field: 'codec.poolFactor', message: `must be 1 (or omitted) when codec.sideInfo is true` },
        { field: 'codec.sideInfo', message: `must be false when codec.poolFactor is above 1` },
      ]);
    }
    if (codec.sideInfo) {
      if (codec.kind !== 'eden') {
        throw new ValidationError(`codec.sideInfo needs codec.kind 'eden' (got '${codec.kind}')`, [
          { field: 'codec.sideInfo', message: `side information is only available with kind 'eden', not '${codec.kind}'` },
        ]);
      }
      const se = manifest.staticEmbeddings;
      if (!se) {
        throw modelBound(`codec.sideInfo needs a model with static input embeddings; model '${model}' declares no staticEmbeddings in its manifest.json`, [
          { field: 'codec.sideInfo', message: `model '${model}' has no static embedding table (manifest staticEmbeddings)` },
        ]);
      }
      if (!existsSync(path.resolve(this.deps.config.MODELS_DIR, model, se.file))) {
        throw modelBound(`codec.sideInfo needs model '${model}''s static embedding table, but ${path.join(model, se.file)} is missing under MODELS_DIR`, [
          { field: 'codec.sideInfo', message: `static embedding table ${se.file} of model '${model}' is missing` },
        ]);
      }
    }
    if (codec.dims !== undefined && codec.dims > manifest.dims) {
      throw modelBound(`codec.dims ${codec.dims} is over the model's ${manifest.dims} dims`, [{ field: 'codec.dims', message: `at most ${manifest.dims}` }]);
    }
  }

  async require(id: string): Promise<Collection> {
    const c = await this.deps.collections.get(this.tenantId, id);
    if (!c) throw new NotFoundError(`collection '${id}' not found`);
    return c;
  }

  async describe(id: string) {
    const c = await this.require(id);
    const manifest = await this.deps.generations.manifest(this.tenantId, id);
    const [stats, degraded] = await Promise.all([this.deps.ingestions.totals(this.tenantId, id, manifest, codecVersions(c)), degradedOf(this.deps, this.tenantId, id, manifest)]);
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
      // segments scorers could not read: re-rank and search answer without them
      ...(degraded ? { degraded } : {}),
    };
  }

  async list() {
    const ids = await this.deps.collections.list(this.tenantId);
    return { collections: await Promise.all(ids.map((id) => this.describe(id).catch(() => ({ id, missing: true })))) };
  }

  async delete(id: string): Promise<void> {
    await this.require(id);
    await this.deps.collections.delete(this.tenantId, id);
    this.deps.generations.forget(this.tenantId, id);
  }
}
