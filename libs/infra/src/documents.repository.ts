import {
  batchInfoKey,
  fromNdjson,
  parentOf,
  passageId,
  s3Keys,
  segmentBatches,
  type IngestBatchDocumentInfo,
  type CollectionManifest,
  type HitDocumentFields,
  type HitField,
  type IngestDocument,
  type IngestionRecord,
  type SegmentRef,
  type StoredDocument,
  type StoredDocumentInfo,
} from '@lateral/shared';
import type { ObjectStore } from './object-store';

/** A small least-recently-used map (insertion order is recency). */
class Lru<K, V> {
  private readonly map = new Map<K, V>();
  constructor(private readonly max: number) {}
  get(k: K): V | undefined {
    const v = this.map.get(k);
    if (v !== undefined) {
      this.map.delete(k);
      this.map.set(k, v);
    }
    return v;
  }
  set(k: K, v: V): void {
    this.map.delete(k);
    this.map.set(k, v);
    while (this.map.size > this.max) this.map.delete(this.map.keys().next().value as K);
  }
  delete(k: K): void {
    this.map.delete(k);
  }
}

/** A batch's stored documents by id (info.json, or derived from documents.ndjson for batches encoded before it). */
interface IngestBatchEntries {
  info: IngestBatchDocumentInfo;
  byId: Map<string, StoredDocumentInfo>;
  /** false: the batch predates info.json, tokens and truncation are unknown. */
  recorded: boolean;
}

/** Which segment of a generation holds each live id (its last copy, unless that one is tombstoned). */
interface GenerationIndex {
  owner: Map<string, number>;
  sorted: string[] | null;
}

/** A stored document resolved to its segment, its info and its source document. */
interface Located {
  segment: SegmentRef;
  entry: StoredDocumentInfo;
  source: IngestDocument;
  recorded: boolean;
}

const LOAD_CONCURRENCY = 16;
/** Uncommitted batches `pending` looks in. */
export const PENDING_BATCHES_CHECKED = 16;
const baseName = (key: string) => key.slice(key.lastIndexOf('/') + 1).replace(/\.(json|seg)$/, '');

async function mapLimit<T, R>(items: T[], limit: number, fn: (x: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, items.length) }, async () => {
      while (next < items.length) {
        const i = next++;
        out[i] = await fn(items[i]);
      }
    }),
  );
  return out;
}

/**
 * Documents read back from S3: the text and metadata of a document are its line of the batch's
 * `documents.ndjson` (written by the API before it answered), its tokens and truncation the
 * batch's `info.json` (written by the encode job), and which segment holds a live id comes from
 * the current generation's segment list (the last committed occurrence of an id wins, as when
 * scoring). Everything read is immutable (batches, generations), so it is cached per process.
 */
export class DocumentRepository {
  private readonly batches = new Lru<string, Promise<IngestBatchEntries>>(512);
  private readonly sources = new Lru<string, Promise<IngestDocument[]>>(32);
  private readonly generations = new Lru<string, Promise<GenerationIndex>>(4);
  private readonly records = new Lru<string, IngestionRecord>(4096);

  constructor(private readonly store: Pick<ObjectStore, 'get' | 'getJson' | 'list'>) {}

  /** info.json of a batch, or null while its encode job has not written it (for ingestion status). */
  async encodedInfo(tenantId: string, collectionId: string, ingestBatchId: string): Promise<IngestBatchDocumentInfo | null> {
    const key = `${tenantId}/${collectionId}/${ingestBatchId}`;
    const cached = this.batches.get(key);
    if (cached) {
      const b = await cached;
      return b.recorded ? b.info : null;
    }
    const info = await this.store.getJson<IngestBatchDocumentInfo>(batchInfoKey(tenantId, collectionId, ingestBatchId));
    if (info) this.batches.set(key, Promise.resolve(entries(info, true)));
    return info;
  }

  /** The stored documents of a committed batch. */
  private batch(tenantId: string, collectionId: string, ingestBatchId: string): Promise<IngestBatchEntries> {
    const key = `${tenantId}/${collectionId}/${ingestBatchId}`;
    let p = this.batches.get(key);
    if (!p) {
      p = (async () => {
        const info = await this.store.getJson<IngestBatchDocumentInfo>(batchInfoKey(tenantId, collectionId, ingestBatchId));
        if (info) return entries(info, true);
        // Encoded before info.json existed: every document stored whole, tokens unknown.
        const docs = await this.source(tenantId, collectionId, ingestBatchId);
        return entries({ batchId: ingestBatchId, documents: docs.map((d, line) => ({ id: d.id, line, tokens: -1, truncated: false })) }, false);
      })();
      p.catch(() => this.batches.delete(key));
      this.batches.set(key, p);
    }
    return p;
  }

  private source(tenantId: string, collectionId: string, ingestBatchId: string): Promise<IngestDocument[]> {
    const key = `${tenantId}/${collectionId}/${ingestBatchId}`;
    let p = this.sources.get(key);
    if (!p) {
      p = (async () => {
        const docsKey = s3Keys.batchDocuments(tenantId, collectionId, ingestBatchId);
        const bytes = await this.store.get(docsKey);
        if (!bytes) throw new Error(`the accepted documents of committed batch ${ingestBatchId} are missing from S3 (${docsKey})`);
        return fromNdjson(bytes);
      })();
      p.catch(() => this.sources.delete(key));
      this.sources.set(key, p);
    }
    return p;
  }

  private index(manifest: CollectionManifest): Promise<GenerationIndex> {
    const key = `${manifest.tenantId}/${manifest.collectionId}/${manifest.generation}/${manifest.committedAt}`;
    let p = this.generations.get(key);
    if (!p) {
      p = (async () => {
        const batches = await mapLimit(manifest.segments, LOAD_CONCURRENCY, (s) => this.batch(manifest.tenantId, manifest.collectionId, s.batchId));
        // An id is live when its last copy is not tombstoned (deleted, or superseded: SegmentRef.tombstones
        // indexes a segment's documents, the order info.json lists them in).
        const owner = new Map<string, number>();
        batches.forEach((b, si) => {
          const dead = new Set(manifest.segments[si].tombstones ?? []);
          b.info.documents.forEach((d, i) => {
            if (dead.has(i)) owner.delete(d.id);
            else owner.set(d.id, si);
          });
        });
        return { owner, sorted: null };
      })();
      p.catch(() => this.generations.delete(key));
      this.generations.set(key, p);
    }
    return p;
  }

  private async locate(manifest: CollectionManifest, id: string, index: GenerationIndex): Promise<Located | null> {
    const si = index.owner.get(id);
    if (si === undefined) return null;
    const segment = manifest.segments[si];
    const b = await this.batch(manifest.tenantId, manifest.collectionId, segment.batchId);
    const entry = b.byId.get(id)!;
    const source = (await this.source(manifest.tenantId, manifest.collectionId, segment.batchId))[entry.line];
    if (!source) throw new Error(`batch ${segment.batchId}: info.json names line ${entry.line}, which documents.ndjson does not have`);
    return { segment, entry, source, recorded: b.recorded };
  }

  /**
   * One live document of `manifest` by id: a stored document or passage, or a document split
   * into passages (its whole text, with the ids of its passages). null when the id is not live.
   */
  async get(manifest: CollectionManifest, id: string): Promise<StoredDocument | null> {
    const index = await this.index(manifest);
    const where = (s: SegmentRef) => ({ batchId: s.batchId, key: s.key, codecVersion: s.codecVersion });
    const direct = await this.locate(manifest, id, index);
    if (direct) {
      const { entry, source, segment, recorded } = direct;
      return {
        id,
        collection: manifest.collectionId,
        text: entry.parent !== undefined ? source.text.slice(entry.start, entry.end) : source.text,
        metadata: source.metadata ?? null,
        tokens: recorded ? entry.tokens : null,
        truncated: recorded ? entry.truncated : null,
        ...(entry.originalTokens !== undefined ? { originalTokens: entry.originalTokens } : {}),
        ...(entry.parent !== undefined ? { parent: entry.parent } : {}),
        generation: manifest.generation,
        segment: where(segment),
      };
    }
    const first = await this.locate(manifest, passageId(id, 0), index);
    if (!first || first.entry.parent !== id) return null;
    const passages: string[] = [];
    let tokens = 0;
    for (let n = 0; ; n++) {
      const p = n === 0 ? first : await this.locate(manifest, passageId(id, n), index);
      if (!p || p.entry.parent !== id) break;
      passages.push(p.entry.id);
      tokens += p.entry.tokens;
    }
    return {
      id,
      collection: manifest.collectionId,
      text: first.source.text,
      metadata: first.source.metadata ?? null,
      tokens,
      truncated: false,
      ...(first.entry.originalTokens !== undefined ? { originalTokens: first.entry.originalTokens } : {}),
      passages,
      generation: manifest.generation,
      segment: where(first.segment),
    };
  }

  /**
   * The fields `include` asks for, for hit ids of `manifest` (passages: the passage's text and
   * its parent's metadata, and `parent`). Ids that are not live are left out of the map.
   */
  async hitFields(manifest: CollectionManifest, ids: string[], include: readonly HitField[]): Promise<Map<string, HitDocumentFields>> {
    const index = await this.index(manifest);
    const out = new Map<string, HitDocumentFields>();
    const unique = [...new Set(ids)];
    const located = await mapLimit(unique, LOAD_CONCURRENCY, (id) => this.locate(manifest, id, index));
    unique.forEach((id, i) => {
      const l = located[i];
      if (!l) return;
      const f: HitDocumentFields = {};
      if (include.includes('text')) f.text = l.entry.parent !== undefined ? l.source.text.slice(l.entry.start, l.entry.end) : l.source.text;
      if (include.includes('metadata')) f.metadata = l.source.metadata ?? null;
      if (l.entry.parent !== undefined) f.parent = l.entry.parent;
      out.set(id, f);
    });
    return out;
  }

  /**
   * Which of `ids` an ingestion still in progress accepted (id -> that ingestion): looks at the
   * `maxBatches` newest batches that are neither in `manifest` nor failed, in their accepted
   * documents (a passage id: its parent's). For telling "not live yet" from "unknown".
   */
  async pending(tenantId: string, collectionId: string, manifest: CollectionManifest | null, ids: string[], maxBatches = PENDING_BATCHES_CHECKED): Promise<Map<string, string>> {
    const out = new Map<string, string>();
    if (ids.length === 0) return out;
    const committed = new Set(manifest?.segments.flatMap((s) => segmentBatches(s)) ?? []);
    const [recordKeys, failureKeys] = await Promise.all([this.store.list(s3Keys.ingestionPrefix(tenantId, collectionId)), this.store.list(s3Keys.failurePrefix(tenantId, collectionId))]);
    const failed = new Set(failureKeys.map((k) => baseName(k.key)));
    const records = (await mapLimit(recordKeys.filter((k) => k.key.endsWith('.json')), LOAD_CONCURRENCY, (k) => this.record(k.key))).filter((r): r is IngestionRecord => r !== null);
    records.sort((a, b) => b.createdAt.localeCompare(a.createdAt));
    const batches = records.flatMap((r) => r.batches.filter((b) => !committed.has(b.batchId) && !failed.has(b.batchId)).map((b) => ({ ingestionId: r.ingestionId, batchId: b.batchId }))).slice(0, maxBatches);
    const wanted = new Map(ids.map((id) => [id, parentOf(id) ?? id]));
    for (const b of batches) {
      const accepted = new Set((await this.source(tenantId, collectionId, b.batchId)).map((d) => d.id));
      for (const [id, parent] of wanted) {
        if (accepted.has(id) || accepted.has(parent)) {
          out.set(id, b.ingestionId);
          wanted.delete(id);
        }
      }
      if (wanted.size === 0) break;
    }
    return out;
  }

  /** Ingestion records are immutable once written: cached. */
  private async record(key: string): Promise<IngestionRecord | null> {
    const cached = this.records.get(key);
    if (cached) return cached;
    const r = await this.store.getJson<IngestionRecord>(key);
    if (r) this.records.set(key, r);
    return r;
  }

  /** Whether an id is live in `manifest` (a stored document or passage). */
  async liveSet(manifest: CollectionManifest): Promise<{ has(id: string): boolean }> {
    const index = await this.index(manifest);
    return { has: (id) => index.owner.has(id) };
  }

  /** Live ids of `manifest`, sorted (UTF-16 code unit order), the `limit` after `after`; `more`: there are others after them. */
  async listIds(manifest: CollectionManifest, limit: number, after?: string): Promise<{ ids: string[]; more: boolean }> {
    const index = await this.index(manifest);
    index.sorted ??= [...index.owner.keys()].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    const sorted = index.sorted;
    let lo = 0;
    if (after !== undefined) {
      let hi = sorted.length;
      while (lo < hi) {
        const mid = (lo + hi) >> 1;
        if (sorted[mid] <= after) lo = mid + 1;
        else hi = mid;
      }
    }
    return { ids: sorted.slice(lo, lo + limit), more: lo + limit < sorted.length };
  }
}

function entries(info: IngestBatchDocumentInfo, recorded: boolean): IngestBatchEntries {
  return { info, byId: new Map(info.documents.map((d) => [d.id, d])), recorded };
}
