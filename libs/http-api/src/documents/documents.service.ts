import { randomUUID } from 'node:crypto';
import {
  NotFoundError,
  QueueName,
  UnavailableError,
  ValidationError,
  collectionShards,
  segmentsByShard,
  warpLayoutOf,
  jobIds,
  s3Keys,
  toNdjson,
  DEFAULT_DOCUMENT_LIST_LIMIT,
  MAX_DOCUMENT_LIST_LIMIT,
  TRUNCATED_IDS_SHOWN,
  type Collection,
  type DocumentIdPage,
  type IngestionRecord,
  type StoredDocument,
} from '@lateral/shared';
import type { ApiRepositories, DocumentRepository } from '@lateral/infra';
import { currentTenant } from '../common/request-context';
import { codecVersions } from '../common/codec-versions';
import { parseWaitSeconds, requestedWait } from '../common/json-body';
import type { TenantQuotas } from '../auth/quotas';
import { parseDocumentsBody, validateDocuments } from './documents';

/** Retry-After of an ingest refused for a WARP collection's segment count (a merge of small segments takes seconds). */
export const BACKPRESSURE_RETRY_AFTER_SECONDS = 10;

/** The ingest batch ids of an ingestion of `documents` documents, `size` per batch (one encode job, and one segment, each). */
export function ingestBatchIds(ingestionId: string, documents: number, size: number): string[] {
  return Array.from({ length: Math.ceil(documents / size) }, (_, i) => `${ingestionId}-${String(i).padStart(5, '0')}`);
}

/** The repositories this service is given (app.ts passes only these: pickRepositories). */
export const DOCUMENTS_REPOSITORIES = ['config', 'collections', 'generations', 'ingestions', 'ingestBacklog', 'documents', 'store', 'queues', 'serving'] as const satisfies readonly (keyof ApiRepositories)[];
/** What ingestion and document reads use: collection records, manifests (the serving cache's for status reads), ingestions, stored documents, S3, the encode queue, the quotas. */
export type DocumentsDeps = Pick<ApiRepositories, (typeof DOCUMENTS_REPOSITORIES)[number]> & { quotas: TenantQuotas };

/** The documents of a collection: ingestion (validation, S3-first writes, then the encode jobs), its progress, and reads of live documents. */
export class DocumentsService {
  /** Documents read back from S3 (text, metadata, tokens, the segment holding them). */
  private readonly documents: DocumentRepository;
  /** Per-tenant quotas (documents, bytes, jobs in flight), checked before anything is written. */
  private readonly quotas: TenantQuotas;

  constructor(private readonly deps: DocumentsDeps) {
    this.documents = deps.documents;
    this.quotas = deps.quotas;
  }

  /** The caller's tenant (request-context.ts): DEFAULT_TENANT with AUTH=none, the API key's with AUTH=keys. */
  private get tenantId(): string {
    return currentTenant(this.deps.config);
  }

  private async require(id: string): Promise<Collection> {
    const c = await this.deps.collections.get(this.tenantId, id);
    if (!c) throw new NotFoundError(`collection '${id}' not found`);
    return c;
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
    const batchIds = ingestBatchIds(ingestionId, docs.length, this.deps.config.ENCODE_BATCH_DOCUMENTS);
    const unreserve = await this.segmentBackPressure(collection, batchIds);
    let release: (() => Promise<void>) | undefined;
    try {
      release = await this.quotas.admit(this.tenantId, { kind: 'ingest', collection: collection.id, id: ingestionId, documents: docs.length });
      return await this.accept(collection, ingestionId, docs);
    } catch (err) {
      // Nothing was queued: the batches are not in flight, and the job does not count against the quotas.
      await release?.();
      await unreserve();
      throw err;
    }
  }

  /**
   * Ingest back-pressure on a WARP collection's segment count (INGEST_WARP_SEGMENTS_FACTOR x
   * MERGE_WARP_MAX_SEGMENTS per shard): each accepted batch becomes one segment, so the request's
   * batches are admitted only while the committed segments (of the fullest shard) plus the batches
   * accepted and not yet committed plus the request's stay within the bound (a request is let in
   * alone when nothing is committed or in flight). Over it, 503 with Retry-After naming the counts
   * and the bound, so a client slows down while background merges (MERGE_AFTER_COMMIT) bring it
   * back, instead of every search paying per segment (docs/scaling.md, "Ingest back-pressure").
   * The admission is atomic in Redis (IngestBacklogRepository); returns what undoes it for a
   * request that fails before its jobs are queued.
   */
  private async segmentBackPressure(collection: Collection, batchIds: readonly string[]): Promise<() => Promise<void>> {
    const none = async () => undefined;
    const { INGEST_WARP_SEGMENTS_FACTOR: factor, MERGE_WARP_MAX_SEGMENTS: bound, MERGE_AFTER_COMMIT: merging } = this.deps.config;
    if (factor <= 0 || bound <= 0 || !merging || !warpLayoutOf(collection)) return none;
    const manifest = await this.deps.generations.manifest(this.tenantId, collection.id);
    const shards = collectionShards(collection);
    const limit = factor * bound;
    // The fullest shard: a new segment goes to the shard with the fewest live documents, which need not be the one with the fewest segments.
    let committed = 0;
    let fullest = 0;
    for (const [shard, members] of manifest ? segmentsByShard(manifest.segments, collection.codecVersion, shards) : []) {
      if (members.length > committed) [committed, fullest] = [members.length, shard];
    }
    const tenantId = this.tenantId;
    const out = await this.deps.ingestBacklog.admit(tenantId, collection.id, batchIds, committed, limit);
    if (out.admitted) return () => this.deps.ingestBacklog.done(tenantId, collection.id, ...batchIds).catch(() => undefined);
    throw new UnavailableError(
      `collection '${collection.id}' is overloaded: ${committed} segments${shards > 1 ? ` in shard ${fullest}` : ''} at generation ${manifest?.generation ?? 0} + ${out.inFlight} batches accepted and not yet committed + this request's ${batchIds.length}, over ${limit} (INGEST_WARP_SEGMENTS_FACTOR ${factor} x MERGE_WARP_MAX_SEGMENTS ${bound}); merges are catching up: send the documents again after Retry-After`,
      BACKPRESSURE_RETRY_AFTER_SECONDS,
      'overloaded',
    );
  }

  /** Writes an admitted ingestion: its documents to S3, its record, then its encode jobs. */
  private async accept(collection: Collection, ingestionId: string, docs: ReturnType<typeof validateDocuments>) {
    const size = this.deps.config.ENCODE_BATCH_DOCUMENTS;
    const batches: { batchId: string; key: string; documents: number }[] = [];
    const ids = ingestBatchIds(ingestionId, docs.length, size);
    for (let i = 0; i < docs.length; i += size) {
      const ingestBatchId = ids[batches.length];
      const chunk = docs.slice(i, i + size);
      const key = s3Keys.batchDocuments(this.tenantId, collection.id, ingestBatchId);
      await this.deps.store.put(key, toNdjson(chunk), 'application/x-ndjson');
      batches.push({ batchId: ingestBatchId, key, documents: chunk.length });
    }
    // The record first: it is what the ingestion's progress is measured against.
    const record = { ingestionId, createdAt: new Date().toISOString(), documents: docs.length, batches: batches.map((b) => ({ batchId: b.batchId, documents: b.documents })) };
    await this.deps.ingestions.create(this.tenantId, collection.id, record);
    await this.deps.queues.addBulk(
      QueueName.encode,
      batches.map((b) => ({
        jobId: jobIds.encode(this.tenantId, collection.id, b.batchId),
        payload: { tenantId: this.tenantId, collectionId: collection.id, ingestionId, batchId: b.batchId, documentsKey: b.key, documents: b.documents },
      })),
    );
    return { ingestionId, collection: collection.id, documents: docs.length, batches: batches.length, status: `/v1/collections/${collection.id}/ingestions/${ingestionId}` };
  }

  async ingestion(id: string, ingestionId: string) {
    // The record and the current manifest from the serving cache (one Redis GET each while they are
    // unchanged, as searches read them; any commit acknowledged before this read is seen): a client
    // polling its ingestions cost the service an S3 GET of the record and a LIST of the manifests
    // at every read, two of a status read's five S3 requests (issue 29's ingest profile).
    const c = await this.deps.serving.collection(this.tenantId, id);
    if (!c) throw new NotFoundError(`collection '${id}' not found`);
    const manifest = await this.deps.serving.manifest(this.tenantId, id);
    const s = await this.deps.ingestions.state(this.tenantId, id, ingestionId, manifest, codecVersions(c));
    if (!s) throw new NotFoundError(`ingestion '${ingestionId}' not found in collection '${id}'`);
    return {
      ingestionId,
      collection: id,
      state: s.state,
      stages: s.stages,
      batches: s.record.batches.length,
      createdAt: s.record.createdAt,
      ...(await this.longDocuments(id, s.record, s.rawBatches)),
      ...(s.failures.length ? { failures: s.failures.map((f) => ({ batchId: f.batchId, stage: f.queue, documents: f.documents, error: f.error })) } : {}),
    };
  }

  /**
   * Long documents of an ingestion, over the batches encoded so far (their info.json): how many
   * were truncated to maxDocTokens (the first TRUNCATED_IDS_SHOWN ids named) and, in a collection
   * with passages, how many were split and into how many passages.
   */
  private async longDocuments(id: string, record: IngestionRecord, encoded: ReadonlySet<string>) {
    // only batches with raw vectors have been encoded (`encoded`: the state's LIST of them, not a second one), and a found info.json is cached: a status poll reads little
    const infos = await Promise.all(record.batches.filter((b) => encoded.has(b.batchId)).map((b) => this.documents.encodedInfo(this.tenantId, id, b.batchId)));
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
    const manifest = await this.deps.generations.manifest(this.tenantId, id);
    const doc = manifest ? await this.documents.get(manifest, docId) : null;
    if (!doc) {
      const shown = docId.slice(0, 200);
      const pending = (await this.documents.pending(this.tenantId, id, manifest, [docId])).get(docId);
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
    const manifest = await this.deps.generations.manifest(this.tenantId, id);
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
    return parseWaitSeconds(raw, this.deps.config.RERANK_MAX_WAIT_SECONDS);
  }

  /**
   * Ingest, then wait up to `waitSeconds` for the ingestion to finish: 200 with its final status
   * (done or failed), or 202 with the accepted ingestion as without `wait`.
   */
  async ingestAndWait(id: string, body: string, contentType: string | undefined, queryWait: string | undefined): Promise<{ status: number; body: Record<string, unknown> }> {
    const waitSeconds = this.parseWait(requestedWait(queryWait, bodyWait(body, contentType)));
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
