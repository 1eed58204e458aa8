import { s3Keys, segmentBatches, type IngestBatchFailure, type CollectionManifest, type IngestionRecord, type StageCounts } from '@lateral/shared';
import type { ObjectStore } from './object-store';

export interface IngestionState {
  record: IngestionRecord;
  state: 'processing' | 'done' | 'failed';
  stages: StageCounts;
  failures: IngestBatchFailure[];
  /** Batch ids (of this ingestion) whose raw vectors exist: the LIST the `encoded` stage was counted from. */
  rawBatches: ReadonlySet<string>;
}

const batchOf = (key: string) => key.slice(key.lastIndexOf('/') + 1).replace(/\.(seg|json)$/, '');

/**
 * Ingestions and their progress, from S3 alone. An ingestion's record (its batches and their
 * document counts) is written before the API answers; a batch is `encoded` when its raw vectors
 * exist, `compressed` when a segment of it exists at any codec version, `indexed` when it is in the
 * current generation, `failed` when a failure record exists. Every stage is a set of batch ids,
 * so a job delivered twice counts once, and nothing is lost when Redis is.
 */
export class IngestionRepository {
  /** Records are immutable once written and ingestion ids are unique: cached per process. */
  private readonly records = new Map<string, IngestionRecord>();

  constructor(private readonly store: ObjectStore) {}

  async create(tenantId: string, id: string, record: IngestionRecord): Promise<void> {
    await this.store.putJson(s3Keys.ingestion(tenantId, id, record.ingestionId), record);
  }

  async record(tenantId: string, id: string, ingestionId: string): Promise<IngestionRecord | null> {
    const key = s3Keys.ingestion(tenantId, id, ingestionId);
    const cached = this.records.get(key);
    if (cached) return cached;
    const r = await this.store.getJson<IngestionRecord>(key);
    if (r) this.records.set(key, r);
    return r;
  }

  /** Every ingestion of a collection, oldest first. */
  async list(tenantId: string, id: string): Promise<IngestionRecord[]> {
    const keys = await this.store.list(s3Keys.ingestionPrefix(tenantId, id));
    const records = await Promise.all(keys.filter((k) => k.key.endsWith('.json')).map((k) => this.record(tenantId, id, batchOf(k.key))));
    return records.filter((r): r is IngestionRecord => r !== null).sort((a, b) => a.createdAt.localeCompare(b.createdAt));
  }

  /** Records that a batch failed for good (idempotent: one object per batch). */
  async recordFailure(tenantId: string, id: string, failure: IngestBatchFailure): Promise<void> {
    await this.store.putJson(s3Keys.batchFailure(tenantId, id, failure.batchId), failure);
  }

  /** The state of one ingestion against the collection's current manifest. */
  async state(tenantId: string, id: string, ingestionId: string, manifest: CollectionManifest | null, codecVersions: number[]): Promise<IngestionState | null> {
    const record = await this.record(tenantId, id, ingestionId);
    if (!record) return null;
    const done = await this.finishedBatches(tenantId, id, manifest, codecVersions, `${ingestionId}-`);
    return this.stateOf(record, done);
  }

  /**
   * Batches of every ingestion of the collection that are neither committed nor failed, with the
   * stage S3 says each reached (raw vectors written: `encoded`; a segment at `codecVersion`
   * written: `compressed`): what the reconciler re-enqueues when Redis lost their jobs.
   */
  async unfinished(
    tenantId: string,
    id: string,
    manifest: CollectionManifest | null,
    codecVersion: number,
  ): Promise<{ ingestionId: string; batchId: string; documents: number; encoded: boolean; compressed: boolean }[]> {
    const [records, done, current] = await Promise.all([
      this.list(tenantId, id),
      this.finishedBatches(tenantId, id, manifest, [], ''),
      this.store.list(s3Keys.segmentPrefix(tenantId, id, codecVersion)),
    ]);
    const compressed = new Set(current.map((k) => batchOf(k.key)));
    return records.flatMap((r) =>
      r.batches
        .filter((b) => !done.indexed.has(b.batchId) && !done.failed.has(b.batchId))
        .map((b) => ({ ingestionId: r.ingestionId, batchId: b.batchId, documents: b.documents, encoded: done.encoded.has(b.batchId), compressed: compressed.has(b.batchId) })),
    );
  }

  /** Stage counts summed over every ingestion of the collection. */
  async totals(tenantId: string, id: string, manifest: CollectionManifest | null, codecVersions: number[]): Promise<StageCounts> {
    const [records, done] = await Promise.all([this.list(tenantId, id), this.finishedBatches(tenantId, id, manifest, codecVersions, '')]);
    const sum: StageCounts = { accepted: 0, encoded: 0, compressed: 0, indexed: 0, failed: 0 };
    for (const r of records) {
      const s = this.stateOf(r, done).stages;
      for (const k of Object.keys(sum) as (keyof StageCounts)[]) sum[k] += s[k];
    }
    return sum;
  }

  private stateOf(record: IngestionRecord, done: FinishedBatches): IngestionState {
    const stages: StageCounts = { accepted: record.documents, encoded: 0, compressed: 0, indexed: 0, failed: 0 };
    const failures: IngestBatchFailure[] = [];
    for (const b of record.batches) {
      // A committed batch went through every stage, also once a merge and its clean-up removed its
      // own raw vectors and segment.
      const indexed = done.indexed.has(b.batchId);
      if (indexed || done.encoded.has(b.batchId)) stages.encoded += b.documents;
      if (indexed || done.compressed.has(b.batchId)) stages.compressed += b.documents;
      if (indexed) stages.indexed += b.documents;
      const f = done.failed.get(b.batchId);
      if (f) {
        stages.failed += b.documents;
        failures.push(f);
      }
    }
    const state = stages.indexed >= record.documents ? 'done' : stages.failed > 0 ? 'failed' : 'processing';
    return { record, state, stages, failures, rawBatches: done.encoded };
  }

  /** Batch ids (those starting with `batchPrefix`) that reached each stage. */
  private async finishedBatches(tenantId: string, id: string, manifest: CollectionManifest | null, codecVersions: number[], batchPrefix: string): Promise<FinishedBatches> {
    const [raw, failures, ...segments] = await Promise.all([
      this.store.list(s3Keys.rawPrefix(tenantId, id) + batchPrefix),
      this.store.list(s3Keys.failurePrefix(tenantId, id) + batchPrefix),
      ...codecVersions.map((v) => this.store.list(s3Keys.segmentPrefix(tenantId, id, v) + batchPrefix)),
    ]);
    const failed = new Map<string, IngestBatchFailure>();
    const records = await Promise.all(failures.map((f) => this.store.getJson<IngestBatchFailure>(f.key)));
    for (const f of records) if (f) failed.set(f.batchId, f);
    return {
      encoded: new Set(raw.map((k) => batchOf(k.key))),
      compressed: new Set(segments.flat().map((k) => batchOf(k.key))),
      indexed: new Set(manifest?.segments.flatMap((s) => segmentBatches(s)) ?? []),
      failed,
    };
  }
}

interface FinishedBatches {
  encoded: Set<string>;
  compressed: Set<string>;
  indexed: Set<string>;
  failed: Map<string, IngestBatchFailure>;
}
