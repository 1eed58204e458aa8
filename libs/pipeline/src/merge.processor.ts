import {
  PermanentJobError,
  QueueName,
  batchInfoKey,
  collectionShards,
  fromNdjson,
  mergeJobId,
  s3Keys,
  segmentBatches,
  segmentShard,
  toNdjson,
  type BatchDocumentInfo,
  type IngestDocument,
  type JobResults,
  type MergeOutcome,
  type MergePayload,
  type SegmentRef,
  type StoredDocumentInfo,
} from '@lateral/shared';
import { SegmentCorruptError, crc32c, readSegment, writeSegment, type SegmentReader } from '@lateral/codec';
import type { CodecArtifactRepository, CollectionRepository, GenerationRepository, JobQueues, Logger, ObjectStore } from '@lateral/infra';
import type { SegmentIds } from './commit.processor';
import { compressRaw } from './compress.processor';
import { RAW_CODEC } from './encode.processor';
import { segmentIndexBytes, type IndexDeps } from './index.processor';
import { chooseMerge, type MergePolicySettings } from './merge-policy';
import { collectGarbage, gcKeys, segmentObjects, type GarbageRecord, type GcSettings } from './gc';
import { segmentReadOptions } from './static-embeddings';

/** What the merge processor touches. */
export interface MergeDeps extends Pick<IndexDeps, 'ivf' | 'encoders' | 'ivfCentroids' | 'assigner' | 'staticEmbeddings'> {
  store: Pick<ObjectStore, 'get' | 'put' | 'getJson' | 'list' | 'delete'>;
  collections: Pick<CollectionRepository, 'get'>;
  generations: Pick<GenerationRepository, 'manifest' | 'commit'>;
  codecs: Pick<CodecArtifactRepository, 'get' | 'ensure'>;
  liveIds: Pick<SegmentIds, 'remember' | 'live'>;
  policy: MergePolicySettings;
  /** Garbage collection of merged-away objects, run by every merge job; absent: none. */
  gc?: GcSettings;
  logger: Logger;
}

/** One input segment as read for the merge: which of its documents went into the output, and where. */
interface Input {
  ref: SegmentRef;
  /** Document index in the input -> index in the merged segment, -1 when dropped. */
  to: Int32Array;
}

const outcome = (status: MergeOutcome['status'], extra: Partial<MergeOutcome> = {}): MergeOutcome => ({ status, inputs: [], output: null, dropped: 0, ...extra });

/**
 * A merge, on the commit queue (serialised with segment commits and deletes): the tiered policy
 * (merge-policy.ts) picks segments of the current generation at the collection's codec version;
 * their live documents (tombstoned and superseded copies dropped) are re-coded from the batches'
 * raw fp16 vectors with the same codec artifact (so every document keeps its codes: scores do not
 * change), written as one segment with its raw vectors, its documents and their info (a merged
 * batch, read back like any other) and its search index (the collection's IVF centroids), then
 * committed as one generation replacing the inputs. The commit re-applies on the newest
 * generation: the merge applies only if every input is still listed (otherwise it is dropped, the
 * written objects unreferenced), and tombstones added to the inputs since they were read (deletes,
 * later ingests of their ids) are carried onto the merged segment, so nothing deleted comes back
 * and nothing ingested meanwhile is lost. Idempotent: the merged batch id derives from the inputs.
 * A committed merge records the inputs' objects (gc.ts); every merge job then removes the recorded
 * objects that no kept generation lists and whose grace period has passed.
 */
export async function mergeProcessor(deps: MergeDeps, p: MergePayload): Promise<JobResults[QueueName.commit]> {
  const collection = await deps.collections.get(p.tenantId, p.collectionId);
  if (!collection) throw new PermanentJobError(`collection ${p.tenantId}/${p.collectionId} no longer exists`);
  const manifest = await deps.generations.manifest(p.tenantId, p.collectionId);
  if (!manifest) return { generation: 0, committed: false, merged: outcome('nothing-to-merge') };
  // A re-compression rewrites every segment anyway; merging meanwhile would race it.
  if (collection.pending) return { generation: manifest.generation, committed: false, merged: outcome('recompressing') };
  const shards = collectionShards(collection);
  const spec = chooseMerge(manifest.segments, collection.codecVersion, deps.policy, shards);
  if (!spec) {
    if (deps.gc) await collectGarbage({ store: deps.store, generations: deps.generations, logger: deps.logger }, p.tenantId, p.collectionId, deps.gc);
    return { generation: manifest.generation, committed: false, merged: outcome('nothing-to-merge') };
  }

  const refs = spec.segments.map((i) => manifest.segments[i]);
  const cv = collection.codecVersion;
  const batchId = `merge-${crc32c(new TextEncoder().encode(refs.map((r) => `${r.key}:${r.checksum}:${(r.tombstones ?? []).join(',')}`).join('\n'))).toString(16).padStart(8, '0')}-g${manifest.generation}`;
  const inputs: Input[] = [];
  const docIds: string[] = [];
  const offsets: number[] = [0];
  const tokenIdParts: Int32Array[] = [];
  const vectorParts: Float32Array[] = [];
  const docVectorParts: Float32Array[] = [];
  const metadata: (Record<string, unknown> | null)[] = [];
  const sources: IngestDocument[] = [];
  const infos: StoredDocumentInfo[] = [];
  let dims = 0;
  let withDocVectors = true;
  let dropped = 0;
  for (const ref of refs) {
    const raw = await readRaw(deps, p, ref);
    const { info, docs } = await readBatch(deps, p, ref, raw);
    dims = raw.dims;
    const dead = new Set(ref.tombstones ?? []);
    const to = new Int32Array(raw.documents).fill(-1);
    const lines = new Map<number, number>(); // source line in the input batch -> line in the merged one
    const all = raw.decodeAll();
    for (let i = 0; i < raw.documents; i++) {
      if (dead.has(i)) {
        dropped++;
        continue;
      }
      to[i] = docIds.length;
      docIds.push(raw.docIds[i]);
      const a = raw.tokenOffsets[i];
      const b = raw.tokenOffsets[i + 1];
      offsets.push(offsets[offsets.length - 1] + (b - a));
      tokenIdParts.push(raw.tokenIds.subarray(a, b));
      vectorParts.push(all.subarray(a * dims, b * dims));
      if (raw.docVectors) docVectorParts.push(raw.docVectors.subarray(i * dims, (i + 1) * dims));
      else withDocVectors = false;
      metadata.push(raw.metadata(i));
      const e = info.documents[i];
      let line = lines.get(e.line);
      if (line === undefined) {
        line = sources.length;
        lines.set(e.line, line);
        sources.push(docs[e.line]);
      }
      infos.push({ ...e, line });
    }
    inputs.push({ ref, to });
  }

  let output: SegmentRef | null = null;
  if (docIds.length > 0) {
    const rawDocs = {
      docIds,
      tokenOffsets: Uint32Array.from(offsets),
      tokenIds: concat(Int32Array, tokenIdParts),
      vectors: concat(Float32Array, vectorParts),
      dims,
      ...(withDocVectors ? { docVectors: concat(Float32Array, docVectorParts) } : {}),
      metadata,
    };
    const rawKey = s3Keys.rawVectors(p.tenantId, p.collectionId, batchId);
    const rawBytes = writeSegment(rawDocs, RAW_CODEC);
    // The merged batch is read back like an ingested one: its source documents and their info.
    await deps.store.put(s3Keys.batchDocuments(p.tenantId, p.collectionId, batchId), toNdjson(sources));
    const info: BatchDocumentInfo = { batchId, documents: infos };
    await deps.store.put(batchInfoKey(p.tenantId, p.collectionId, batchId), JSON.stringify(info), 'application/json');
    await deps.store.put(rawKey, rawBytes);
    const raw = readSegment(rawBytes, rawKey);
    const bytes = await compressRaw(deps, collection, raw, cv, rawKey);
    const key = s3Keys.segment(p.tenantId, p.collectionId, batchId, cv);
    const artifact = await deps.codecs.get(p.tenantId, p.collectionId, cv);
    const reader = readSegment(bytes, key, artifact, await segmentReadOptions(artifact, collection, deps.staticEmbeddings));
    // The index first: a committed segment always has one.
    await deps.store.put(s3Keys.segmentIndex(p.tenantId, p.collectionId, batchId, cv), await segmentIndexBytes(deps, collection, reader, cv, { tokenIds: raw.tokenIds, tokenOffsets: raw.tokenOffsets }));
    await deps.store.put(key, bytes);
    deps.liveIds.remember(key, docIds);
    output = {
      batchId, codecVersion: cv, key, documents: reader.documents, tokens: reader.tokens, bytes: bytes.byteLength, checksum: crc32c(bytes).toString(16).padStart(8, '0'),
      // the ingest batches it now stands for (ingestion progress keeps counting them as committed)
      batches: [...new Set(refs.flatMap((r) => segmentBatches(r)))].sort(),
      // the inputs' shard (chooseMerge keeps a merge within one)
      ...(shards > 1 ? { shard: segmentShard(refs[0], shards) } : {}),
    };
  }

  const state: { status: MergeOutcome['status'] } = { status: 'merged' };
  const result = await deps.generations.commit(p.tenantId, p.collectionId, async (segments, current) => {
    state.status = 'merged';
    const at = inputs.map((x) => segments.findIndex((s) => s.key === x.ref.key));
    // An input replaced meanwhile (another merge, a re-compression): this merge no longer applies.
    if (at.some((i) => i < 0)) {
      state.status = 'inputs-gone';
      return null;
    }
    // Tombstones added to the inputs since they were read, carried onto the merged segment.
    const carried = new Set<number>();
    inputs.forEach((x, k) => {
      const before = new Set(x.ref.tombstones ?? []);
      for (const t of segments[at[k]].tombstones ?? []) {
        if (before.has(t)) continue;
        const j = x.to[t];
        if (j < 0) throw new Error(`merge ${batchId}: tombstone ${t} of ${x.ref.key} names a document the merge dropped`);
        carried.add(j);
      }
    });
    const gone = new Set(at);
    // The merged segment takes the place of the latest input: every live copy it holds was the
    // last copy of its id among the inputs, and copies in segments after it stay the later ones.
    const last = Math.max(...at);
    const next: SegmentRef[] = [];
    segments.forEach((s, i) => {
      if (i === last && output) next.push(carried.size > 0 ? { ...output, tombstones: [...carried].sort((a, b) => a - b) } : output);
      if (!gone.has(i)) next.push(s);
    });
    const live = await deps.liveIds.live(p.tenantId, p.collectionId, next);
    return { segments: live.segments, codecVersion: current?.codecVersion ?? cv, documents: live.documents };
  });
  const { status } = state;
  const merged: MergeOutcome = { status, inputs: refs.map((r) => r.key), output: status === 'merged' ? (output?.key ?? null) : null, dropped, reason: spec.reason };
  if (result.committed && status === 'merged') {
    // The inputs' objects, for garbage collection once no kept generation lists them.
    const record: GarbageRecord = { generation: result.manifest.generation, committedAt: result.manifest.committedAt, objects: refs.flatMap((r) => segmentObjects(p.tenantId, p.collectionId, r)) };
    for (const r of refs) await deps.store.put(gcKeys.mergedAway(p.tenantId, p.collectionId, r.batchId), JSON.stringify({ batchId: r.batchId, into: output?.key ?? null, generation: record.generation }), 'application/json');
    await deps.store.put(gcKeys.record(p.tenantId, p.collectionId, record.generation), JSON.stringify(record), 'application/json');
  }
  if (deps.gc) await collectGarbage({ store: deps.store, generations: deps.generations, logger: deps.logger }, p.tenantId, p.collectionId, deps.gc);
  if (result.committed) deps.logger.info(`merged ${refs.length} segments of ${p.collectionId} (${spec.reason}, tier ${spec.tier}) into ${output?.key ?? 'nothing'}: generation ${result.manifest.generation}`);
  else if (status === 'inputs-gone') deps.logger.info(`merge of ${p.collectionId} dropped: its inputs changed before it committed`);
  return { generation: result.manifest.generation, committed: result.committed, documents: result.manifest.documents, merged };
}

/** Enqueues a merge of a collection for the generation just committed (deterministic job id: one per generation). */
export async function enqueueMerge(queues: Pick<JobQueues, 'add'>, tenantId: string, collectionId: string, trigger: MergePayload['trigger'], generation: number) {
  return queues.add(QueueName.commit, mergeJobId(tenantId, collectionId, trigger, generation), { op: 'merge', tenantId, collectionId, trigger });
}

async function readRaw(deps: MergeDeps, p: MergePayload, ref: SegmentRef): Promise<SegmentReader> {
  const key = s3Keys.rawVectors(p.tenantId, p.collectionId, ref.batchId);
  const bytes = await deps.store.get(key);
  if (!bytes) throw new PermanentJobError(`merge: raw vectors of ${ref.key} are missing from S3 (${key})`);
  let raw: SegmentReader;
  try {
    raw = readSegment(bytes, key);
  } catch (err) {
    if (err instanceof SegmentCorruptError) throw new PermanentJobError(err.message);
    throw err;
  }
  if (raw.documents !== ref.documents) throw new PermanentJobError(`merge: ${key} holds ${raw.documents} documents, segment ${ref.key} ${ref.documents}`);
  return raw;
}

/** The batch's source documents and its info (one entry per document, segment order); info derived from the ids for batches encoded before info.json. */
async function readBatch(deps: MergeDeps, p: MergePayload, ref: SegmentRef, raw: SegmentReader): Promise<{ info: BatchDocumentInfo; docs: IngestDocument[] }> {
  const docsKey = s3Keys.batchDocuments(p.tenantId, p.collectionId, ref.batchId);
  const bytes = await deps.store.get(docsKey);
  if (!bytes) throw new PermanentJobError(`merge: the documents of ${ref.key} are missing from S3 (${docsKey})`);
  const docs = fromNdjson(bytes);
  const infoBytes = await deps.store.get(batchInfoKey(p.tenantId, p.collectionId, ref.batchId));
  const info: BatchDocumentInfo = infoBytes
    ? (JSON.parse(new TextDecoder().decode(infoBytes)) as BatchDocumentInfo)
    : { batchId: ref.batchId, documents: docs.map((d, line) => ({ id: d.id, line, tokens: -1, truncated: false })) };
  if (info.documents.length !== raw.documents || info.documents.some((d, i) => d.id !== raw.docIds[i])) {
    throw new PermanentJobError(`merge: the document info of ${ref.batchId} does not list the ids of its raw vectors in order`);
  }
  return { info, docs };
}

function concat<T extends Int32Array | Float32Array>(Type: { new (n: number): T }, parts: T[]): T {
  const out = new Type(parts.reduce((s, x) => s + x.length, 0));
  let o = 0;
  for (const x of parts) {
    out.set(x, o);
    o += x.length;
  }
  return out;
}
