import { randomUUID } from 'node:crypto';
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
  ValidationError,
  jobIds,
  s3Keys,
  toNdjson,
  trainingKeys,
  DEFAULT_DOCUMENT_LIST_LIMIT,
  MAX_DOCUMENT_LIST_LIMIT,
  TRUNCATED_IDS_SHOWN,
  type Collection,
  type DocumentIdPage,
  type IngestionRecord,
  type StoredDocument,
  type CodecSettings,
  type ModelManifest,
} from '@lateral/shared';
import { deserializeArtifact } from '@lateral/codec';
import type { ApiRepositories, DocumentRepository } from '@lateral/infra';
import { currentTenant } from '../common/request-context';
import { parseDocumentsBody, validateDocuments } from '../documents/documents';
import { z } from 'zod';
import { zodIssues } from '../common/zod-issues';
import type { TenantQuotas } from '../auth/quotas';
import { degradedOf } from './degraded';

/** What collections and ingestion use: collection records, manifests, ingestions, stored documents, S3, the encode queue, the quotas. */
export type CollectionsDeps = Pick<ApiRepositories, 'config' | 'collections' | 'generations' | 'ingestions' | 'documents' | 'store' | 'queues'> & { quotas: TenantQuotas };

/** Collections and ingestion: validation, S3-first writes, then the encode jobs. */
export class CollectionsService {
  private readonly manifests = new Map<string, ModelManifest>();
  /** Documents read back from S3 (text, metadata, tokens, the segment holding them). */
  private readonly documents: DocumentRepository;
  /** Per-tenant quotas (documents, bytes, jobs in flight), checked before anything is written. */
  private readonly quotas: TenantQuotas;

  constructor(private readonly deps: CollectionsDeps) {
    this.documents = deps.documents;
    this.quotas = deps.quotas;
  }

  /** The caller's tenant (request-context.ts): DEFAULT_TENANT with AUTH=none, the API key's with AUTH=keys. */
  private get tenant(): string {
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
    if (await this.deps.collections.get(this.tenant, req.id)) throw new ConflictError(`collection '${req.id}' already exists`);
    // A collection deleted and created again starts over at generation 1.
    this.deps.generations.forget(this.tenant, req.id);
    const c: Collection = {
      tenantId: this.tenant,
      id: req.id,
      model,
      dims: manifest.dims,
      maxDocTokens: req.maxDocTokens ?? manifest.maxDocTokens,
      codec: req.codec,
      ...(req.passages ? { passages: req.passages } : {}),
      ...(req.shards !== undefined && req.shards > 1 ? { shards: req.shards } : {}),
      ...(req.search ? { search: req.search } : {}),
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
    const manifest = await this.deps.generations.manifest(this.tenant, id);
    if (!manifest || manifest.segments.length === 0) throw new ConflictError(`collection '${id}' has no committed segments to re-compress`);
    const codecVersion = Math.max(collection.codecVersion, ...manifest.segments.map((s) => s.codecVersion)) + 1;
    const batches = manifest.segments.map((s) => s.batchId);
    await this.deps.collections.update({ ...collection, pending: { codecVersion, codec: parsed.data.codec, batches, startedAt: new Date().toISOString() } });
    await this.deps.queues.addBulk(
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
  /** codec.trained: the trained AESI codec must exist for this collection and match kind 'eden', sideInfo and dims. */
  private async checkTrainedCodec(id: string, codec: CodecSettings): Promise<void> {
    const name = codec.trained!;
    const bytes = await this.deps.store.get(trainingKeys.trainedCodec(this.tenant, id, name));
    if (!bytes) throw new NotFoundError(`codec.trained '${name}' is not a trained codec of collection '${id}' (POST /v1/collections/${id}/train with head 'aesi' writes one)`);
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
    const c = await this.deps.collections.get(this.tenant, id);
    if (!c) throw new NotFoundError(`collection '${id}' not found`);
    return c;
  }

  async describe(id: string) {
    const c = await this.require(id);
    const manifest = await this.deps.generations.manifest(this.tenant, id);
    const [stats, degraded] = await Promise.all([this.deps.ingestions.totals(this.tenant, id, manifest, codecVersions(c)), degradedOf(this.deps, this.tenant, id, manifest)]);
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
    const ids = await this.deps.collections.list(this.tenant);
    return { collections: await Promise.all(ids.map((id) => this.describe(id).catch(() => ({ id, missing: true })))) };
  }

  async delete(id: string): Promise<void> {
    await this.require(id);
    await this.deps.collections.delete(this.tenant, id);
    this.deps.generations.forget(this.tenant, id);
  }

  /**
   * Accepts a batch of documents. Everything is validated first (all-or-nothing), the documents
   * are written to S3, and only then are the encode jobs enqueued and the request answered.
   */
  async ingest(id: string, body: string, contentType: string | undefined) {
    const collection = await this.require(id);
    const docs = validateDocuments(parseDocumentsBody(body, contentType), {
      maxDocumentBytes: this.deps.config.MAX_DOCUMENT_BYTES,
      maxBatchDocuments: this.deps.config.MAX_BATCH_DOCUMENTS,
      passages: collection.passages !== undefined,
    });
    const ingestionId = `ing-${randomUUID()}`;
    const release = await this.quotas.admit(this.tenant, { kind: 'ingest', collection: collection.id, id: ingestionId, documents: docs.length });
    try {
      return await this.accept(collection, ingestionId, docs);
    } catch (err) {
      await release();
      throw err;
    }
  }

  /** Writes an admitted ingestion: its documents to S3, its record, then its encode jobs. */
  private async accept(collection: Collection, ingestionId: string, docs: ReturnType<typeof validateDocuments>) {
    const size = this.deps.config.ENCODE_BATCH_DOCUMENTS;
    const batches: { batchId: string; key: string; documents: number }[] = [];
    for (let i = 0; i < docs.length; i += size) {
      const batchId = `${ingestionId}-${String(batches.length).padStart(5, '0')}`;
      const chunk = docs.slice(i, i + size);
      const key = s3Keys.batchDocuments(this.tenant, collection.id, batchId);
      await this.deps.store.put(key, toNdjson(chunk), 'application/x-ndjson');
      batches.push({ batchId, key, documents: chunk.length });
    }
    // The record first: it is what the ingestion's progress is measured against.
    const record = { ingestionId, createdAt: new Date().toISOString(), documents: docs.length, batches: batches.map((b) => ({ batchId: b.batchId, documents: b.documents })) };
    await this.deps.ingestions.create(this.tenant, collection.id, record);
    await this.deps.queues.addBulk(
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
    const manifest = await this.deps.generations.manifest(this.tenant, id);
    const s = await this.deps.ingestions.state(this.tenant, id, ingestionId, manifest, codecVersions(c));
    if (!s) throw new NotFoundError(`ingestion '${ingestionId}' not found in collection '${id}'`);
    return {
      ingestionId,
      collection: id,
      state: s.state,
      stages: s.stages,
      batches: s.record.batches.length,
      createdAt: s.record.createdAt,
      ...(await this.longDocuments(id, s.record)),
      ...(s.failures.length ? { failures: s.failures.map((f) => ({ batchId: f.batchId, stage: f.queue, documents: f.documents, error: f.error })) } : {}),
    };
  }

  /**
   * Long documents of an ingestion, over the batches encoded so far (their info.json): how many
   * were truncated to maxDocTokens (the first TRUNCATED_IDS_SHOWN ids named) and, in a collection
   * with passages, how many were split and into how many passages.
   */
  private async longDocuments(id: string, record: IngestionRecord) {
    // only batches with raw vectors have been encoded (one LIST), and a found info.json is cached: a status poll reads little
    const raw = await this.deps.store.list(`${s3Keys.rawPrefix(this.tenant, id)}${record.ingestionId}-`);
    const encoded = new Set(raw.map((k) => k.key.slice(k.key.lastIndexOf('/') + 1).replace(/\.seg$/, '')));
    const infos = await Promise.all(record.batches.filter((b) => encoded.has(b.batchId)).map((b) => this.documents.encodedInfo(this.tenant, id, b.batchId)));
    let truncated = 0;
    const ids: string[] = [];
    const split = new Set<string>();
    let passages = 0;
    for (const info of infos) {
      for (const d of info?.documents ?? []) {
        if (d.parent !== undefined) {
          split.add(d.parent);
          passages++;
        } else if (d.truncated) {
          truncated++;
          if (ids.length < TRUNCATED_IDS_SHOWN) ids.push(d.id);
        }
      }
    }
    return {
      encodedBatches: infos.filter((i) => i !== null).length,
      truncated: { documents: truncated, ids },
      ...(split.size > 0 ? { split: { documents: split.size, passages } } : {}),
    };
  }

  /** One live document of the current generation, read back from S3. */
  async document(id: string, docId: string): Promise<StoredDocument> {
    await this.require(id);
    const manifest = await this.deps.generations.manifest(this.tenant, id);
    const doc = manifest ? await this.documents.get(manifest, docId) : null;
    if (!doc) {
      const shown = docId.slice(0, 200);
      const pending = (await this.documents.pending(this.tenant, id, manifest, [docId])).get(docId);
      if (pending) {
        throw new NotFoundError(`document '${shown}' is not in collection '${id}' yet: ingestion ${pending} accepted it and is still in progress (${`/v1/collections/${id}/ingestions/${pending}`}; ingest with wait to answer when it is done)`);
      }
      throw new NotFoundError(`document '${shown}' not found in collection '${id}' (generation ${manifest?.generation ?? 0})`);
    }
    return doc;
  }

  /** Live document ids of the current generation, sorted, `limit` per page after an opaque cursor. */
  async documentIds(id: string, rawLimit: unknown, rawCursor: unknown): Promise<DocumentIdPage> {
    const limit = parseLimit(rawLimit);
    const after = rawCursor === undefined || rawCursor === '' ? undefined : decodeCursor(rawCursor);
    await this.require(id);
    const manifest = await this.deps.generations.manifest(this.tenant, id);
    if (!manifest) return { collection: id, generation: 0, documents: [] };
    const page = await this.documents.listIds(manifest, limit, after);
    return {
      collection: id,
      generation: manifest.generation,
      documents: page.ids,
      ...(page.more ? { nextCursor: encodeCursor(page.ids[page.ids.length - 1]) } : {}),
    };
  }

  /** `wait` of an ingest (query or body): seconds, at most RERANK_MAX_WAIT_SECONDS, as for re-rank. */
  parseWait(raw: unknown): number {
    if (raw === undefined || raw === '') return 0;
    const n = Number(raw);
    const max = this.deps.config.RERANK_MAX_WAIT_SECONDS;
    if (typeof raw === 'boolean' || !Number.isFinite(n) || n < 0 || n > max) {
      throw new ValidationError(`wait must be a number of seconds between 0 and ${max} (RERANK_MAX_WAIT_SECONDS)`, [{ field: 'wait', message: `0..${max}` }]);
    }
    return n;
  }

  /**
   * Ingest, then wait up to `waitSeconds` for the ingestion to finish: 200 with its final status
   * (done or failed), or 202 with the accepted ingestion as without `wait`.
   */
  async ingestAndWait(id: string, body: string, contentType: string | undefined, queryWait: string | undefined): Promise<{ status: number; body: Record<string, unknown> }> {
    const waitSeconds = this.parseWait(queryWait ?? bodyWait(body, contentType));
    const accepted = await this.ingest(id, body, contentType);
    if (waitSeconds <= 0) return { status: 202, body: accepted };
    const deadline = Date.now() + waitSeconds * 1000;
    let pause = 100;
    for (;;) {
      const st = await this.ingestion(id, accepted.ingestionId);
      if (st.state !== 'processing') return { status: 200, body: { ...accepted, ...st } };
      const left = deadline - Date.now();
      if (left <= 0) return { status: 202, body: accepted };
      await new Promise((r) => setTimeout(r, Math.min(pause, left)));
      pause = Math.min(1000, Math.round(pause * 1.5));
    }
  }
}

/** Codec versions whose segments count as compressed: every version up to a re-compression in flight. */
function codecVersions(c: Collection): number[] {
  const top = Math.max(c.codecVersion, c.pending?.codecVersion ?? 0);
  return Array.from({ length: top }, (_, i) => i + 1);
}

function parseLimit(raw: unknown): number {
  if (raw === undefined || raw === '') return DEFAULT_DOCUMENT_LIST_LIMIT;
  const n = Number(raw);
  if (typeof raw !== 'string' || !/^\d+$/.test(raw) || !Number.isInteger(n) || n < 1 || n > MAX_DOCUMENT_LIST_LIMIT) {
    throw new ValidationError(`limit must be an integer between 1 and ${MAX_DOCUMENT_LIST_LIMIT}`, [{ field: 'limit', message: `an integer in 1..${MAX_DOCUMENT_LIST_LIMIT} (default ${DEFAULT_DOCUMENT_LIST_LIMIT})` }]);
  }
  return n;
}

/**
 * Cursors are opaque to callers: `c1.` and the base64url of the last id of the page. Any string of
 * that form is a cursor (the listing starts after the id it decodes to, as UTF-8 text), so the
 * OpenAPI document states the whole rule as a pattern; anything else is a 400 naming `cursor`.
 */
export const CURSOR_PATTERN = /^c1\.[A-Za-z0-9_-]{1,4000}$/;
function encodeCursor(after: string): string {
  return `c1.${Buffer.from(after, 'utf8').toString('base64url')}`;
}

function decodeCursor(raw: unknown): string {
  if (typeof raw !== 'string' || !CURSOR_PATTERN.test(raw)) {
    throw new ValidationError('cursor is not a cursor this API returned (pass nextCursor from the previous page unchanged)', [{ field: 'cursor', message: `invalid cursor (${CURSOR_PATTERN.source})` }]);
  }
  return Buffer.from(raw.slice(3), 'base64url').toString('utf8');
}

/** The `wait` field of a `{ "documents": [...], "wait": n }` JSON body (other body forms carry none). */
function bodyWait(body: string, contentType: string | undefined): unknown {
  const ct = (contentType ?? '').split(';')[0].trim().toLowerCase();
  if (ct === 'application/x-ndjson' || ct === 'application/ndjson' || ct === 'application/jsonl' || !body.includes('"wait"') || !body.trimStart().startsWith('{')) return undefined;
  try {
    const v = JSON.parse(body) as unknown;
    return v && typeof v === 'object' && !Array.isArray(v) && Array.isArray((v as { documents?: unknown }).documents) ? (v as { wait?: unknown }).wait : undefined;
  } catch {
    return undefined; // the ingest reports the malformed body
  }
}
