import {
  MEBERT_PREFIX_ROWS,
  PermanentJobError,
  QueueName,
  warpLayoutOf,
  warpEpochOf,
  batchInfoKey,
  bm25AnalyzerOf,
  collectionShards,
  fromNdjson,
  s3Keys,
  segmentBatches,
  segmentShard,
  toNdjson,
  type IngestBatchDocumentInfo,
  type IngestDocument,
  type JobResults,
  type MergeOutcome,
  type MergePayload,
  type SegmentRef,
  type StoredDocumentInfo,
  type Collection,
  type CollectionManifest,
} from '@lateral/shared';
import { SegmentCopier, SegmentCorruptError, crc32c, readSegment, type CodecArtifact, type SegmentReader } from '@lateral/codec';
import { WarpLayoutCorruptError, centroidsChecksum, deserializeSegmentIndex, mergeWarpLayouts, serializeSegmentIndex, serializeWarpLayout, warpLayoutFromBytes, type SegmentIndex, type WarpMergePart } from '@lateral/search';
import { LeaseBusyError, type WarpCodecRepository, type CodecArtifactRepository, type CollectionRepository, type GenerationRepository, type IvfCentroidRepository, type Logger, type ObjectStore } from '@lateral/infra';
import type { SegmentIds } from '../segment-ids';
import { compressRaw } from '../ingest/segment-writer';
import { segmentSearchObjects, type SegmentIndexerDeps } from '../ingest/segment-indexer';
import { analysedBatchTerms } from '../ingest/bm25-terms';
import { SegmentIndexCopier } from './merge-index';
import { chooseMerge, type MergePolicySettings } from './merge-policy';
import { mergeDue, mergePolicyFor } from './merge-schedule';
import { collectGarbage, gcKeys, segmentObjects, type GarbageRecord, type GcSettings } from './gc';
import { warpReindex, type WarpReindexOutcome } from './warp-reindex';
import { segmentHeadData, segmentReadOptions, serializeSegmentHead, type StaticEmbeddingsCache } from '@lateral/serving';

/** What the merge processor touches. */
export interface MergeDeps extends Pick<SegmentIndexerDeps, 'encoders' | 'ivfCentroids' | 'assigner'> {
  /** WARP residual codecs (collections with `search.layout` 'warp'): fitted per codec version and refit epoch. */
  warpCodecs?: Pick<WarpCodecRepository, 'ensure' | 'get'>;
  /** Static tables of the models, for segments written with side information. */
  staticEmbeddings: Pick<StaticEmbeddingsCache, 'forCollection'>;
  /** The collection's IVF centroids: looked up (the inputs' indexes were built with them), fitted only when an index must be rebuilt and none exist. */
  ivf: Pick<IvfCentroidRepository, 'ensure' | 'get'>;
  store: Pick<ObjectStore, 'get' | 'put' | 'getJson' | 'list' | 'delete' | 'exists'>;
  /** `update`: a re-index switches the record to its WARP layout when every layout is built (warp-reindex.ts). */
  collections: Pick<CollectionRepository, 'get' | 'update'>;
  generations: Pick<GenerationRepository, 'manifest' | 'commit'>;
  codecs: Pick<CodecArtifactRepository, 'get' | 'ensure'>;
  liveIds: Pick<SegmentIds, 'remember' | 'live'>;
  policy: MergePolicySettings;
  /** Garbage collection of merged-away objects, run by every merge job; absent: none. */
  gc?: GcSettings;
  /**
   * Runs `fn` while holding the collection's merge lease (one merge per collection at a time,
   * across processes: a second merge job waits for the first, and returns 'busy' when the wait
   * ends in LeaseBusyError); absent: no guard.
   */
  exclusive?: <T>(tenantId: string, collectionId: string, fn: () => Promise<T>) => Promise<T>;
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
 * A merge, on the merge queue (off the commit queue: commits and deletes go on while it runs),
 * one per collection at a time (`deps.exclusive`): the tiered policy (merge-policy.ts) picks
 * segments of the current generation at the collection's codec version; their live documents
 * (tombstoned and superseded copies dropped) are copied, never decoded nor re-coded: each kept
 * document's coded rows, token ids, doc vector, id and metadata from its input segment
 * (SegmentCopier: segments of one codec version share artifact and seed, and every codec codes
 * a document on its own, so the copied rows are the codes it had: scores do not change), its fp16
 * rows from the input's raw batch (the merged raw batch, kept for re-compressions), its source
 * document and info (a merged batch, read back like any other), and its IVF and BM25 postings
 * from the input's search index (SegmentIndexCopier; rebuilt from the merged segment only when an
 * input's index is missing, corrupt or was built with other centroids). An input segment missing
 * or corrupt in S3 is coded again from its raw batch (compressRaw: same codes), so a merge repairs it. Inputs are read one at a time and
 * released once copied: a merge holds the copied bytes of its output (capped by the policy's
 * maxBytes) and one input. Then only the reference swap is committed, as one generation replacing
 * the inputs, re-applied on the newest generation: the merge applies only if every input is still
 * listed (otherwise it is dropped, the written objects unreferenced), and tombstones added to the
 * inputs since they were read (deletes, later ingests of their ids) are carried onto the merged
 * segment, so nothing deleted comes back and nothing ingested meanwhile is lost. Idempotent: the
 * merged batch id derives from the inputs. A committed merge records the inputs' objects (gc.ts);
 * every merge job then removes the recorded objects that no kept generation lists and whose grace
 * period has passed.
 */
export async function mergeProcessor(deps: MergeDeps, p: MergePayload): Promise<JobResults[QueueName.merge]> {
  if (!deps.exclusive) return merge(deps, p);
  try {
    return await deps.exclusive(p.tenantId, p.collectionId, () => merge(deps, p));
  } catch (err) {
    // Another merge of the collection held the lease for the whole wait: this job gives its slot
    // back ('busy'; the caller queues a merge again) instead of holding it for the other's length.
    if (!(err instanceof LeaseBusyError)) throw err;
    deps.logger.info(`merge of ${p.tenantId}/${p.collectionId}: ${err.message}; queued again`);
    const manifest = await deps.generations.manifest(p.tenantId, p.collectionId);
    return { generation: manifest?.generation ?? 0, committed: false, merged: outcome('busy') };
  }
}

async function merge(deps: MergeDeps, p: MergePayload): Promise<JobResults[QueueName.merge]> {
  const collection = await deps.collections.get(p.tenantId, p.collectionId);
  if (!collection) throw new PermanentJobError(`collection ${p.tenantId}/${p.collectionId} no longer exists`);
  let manifest = await deps.generations.manifest(p.tenantId, p.collectionId);
  if (!manifest) {
    // Nothing committed yet: a re-index only switches the record (the index jobs write the layouts from then on).
    const reindexed = collection.reindex ? await warpReindex(deps, collection, { tenantId: p.tenantId, collectionId: p.collectionId, generation: 0, codecVersion: collection.codecVersion, committedAt: '', segments: [] }) : null;
    return { generation: 0, committed: false, merged: outcome('nothing-to-merge'), ...(reindexed ? { reindex: reindexed } : {}) };
  }
  // A re-compression rewrites every segment anyway; merging meanwhile would race it.
  if (collection.pending) return { generation: manifest.generation, committed: false, merged: outcome('recompressing') };
  // A re-index in flight (POST /v1/collections/{id}/reindex): every segment's WARP layout built, then the record switched to it (warp-reindex.ts).
  let current = collection;
  const reindexed: WarpReindexOutcome | null = collection.reindex ? await warpReindex(deps, collection, manifest) : null;
  if (collection.reindex) {
    current = (await deps.collections.get(p.tenantId, p.collectionId)) ?? collection;
    manifest = (await deps.generations.manifest(p.tenantId, p.collectionId)) ?? manifest;
  }
  // WARP: centroid refits are the refit queue's (refit.processor.ts), beside merges: this merge
  // works at the generation's current epoch, whatever refit is running.
  const withReindex = <T extends JobResults[QueueName.merge]>(r: T): T => (reindexed ? { ...r, reindex: reindexed } : r);
  return withReindex(await mergeOn(deps, p, current, manifest));
}

async function mergeOn(deps: MergeDeps, p: MergePayload, collection: Collection, manifest: CollectionManifest): Promise<JobResults[QueueName.merge]> {
  const shards = collectionShards(collection);
  // The segment bound (maxSegments) is for WARP searches, whose ranged reads grow with the segment count.
  // On the generation read now, not the one the job was asked on: one pending merge serves every request made before it started (merge-schedule.ts).
  const spec = chooseMerge(manifest.segments, collection.codecVersion, mergePolicyFor(collection, deps.policy), shards);
  if (!spec) {
    if (deps.gc) await collectGarbage({ store: deps.store, generations: deps.generations, logger: deps.logger }, p.tenantId, p.collectionId, deps.gc);
    return { generation: manifest.generation, committed: false, merged: outcome('nothing-to-merge'), again: false };
  }

  const refs = spec.segments.map((i) => manifest.segments[i]);
  const cv = collection.codecVersion;
  const batchId = `merge-${crc32c(new TextEncoder().encode(refs.map((r) => `${r.key}:${r.checksum}:${(r.tombstones ?? []).join(',')}`).join('\n'))).toString(16).padStart(8, '0')}-g${manifest.generation}`;
  const artifact = await deps.codecs.get(p.tenantId, p.collectionId, cv);
  // The collection's centroids for this codec version (the inputs' indexes were built with them).
  const centroids = (await deps.ivf.get(p.tenantId, p.collectionId, cv))?.centroids;
  // WARP: the output's layout is at the generation's newest centroid epoch (inputs at another epoch are rebuilt, not merged).
  const warpEpoch = warpEpochOf(manifest.segments);
  const warpCentroids = warpEpoch === 0 ? centroids : (await deps.ivf.get(p.tenantId, p.collectionId, cv, warpEpoch))?.centroids;
  const inputs: Input[] = [];
  const docIds: string[] = [];
  const sources: IngestDocument[] = [];
  const infos: StoredDocumentInfo[] = [];
  // ME-BERT's prefix section (row-wise codecs): made from each kept document's codes, whether its input held one or not.
  const codes = new SegmentCopier({ prefixRows: MEBERT_PREFIX_ROWS });
  const raws = new SegmentCopier();
  let index: SegmentIndexCopier | null = new SegmentIndexCopier();
  // A WARP collection's search layouts: the inputs' lists concatenated centroid by centroid (null: one is missing or unusable, rebuilt from the merged segment).
  const warp = !!warpLayoutOf(collection);
  let warpParts: WarpMergePart[] | null = warp ? [] : null;
  let dropped = 0;
  let recoded = 0;
  // One input at a time: read, copy what is kept, release.
  for (const ref of refs) {
    const rawKey = s3Keys.rawVectors(p.tenantId, p.collectionId, ref.batchId);
    const raw = await readRaw(deps, rawKey, ref);
    // A segment missing or corrupt in S3 is coded again from its raw batch (same artifact and seed: the same codes), so a merge repairs it.
    let seg = await readStored(deps, ref.key, artifact, ref);
    if (!seg) {
      seg = readSegment(await compressRaw(deps, collection, raw, cv, rawKey), ref.key, artifact);
      recoded++;
    }
    if (raw.docIds.some((id, i) => id !== seg!.docIds[i])) throw new PermanentJobError(`merge: ${rawKey} does not hold the documents of segment ${ref.key} in its order`);
    const { info, docs } = await readBatch(deps, p, ref, raw);
    const dead = new Set(ref.tombstones ?? []);
    const to = new Int32Array(seg.documents).fill(-1);
    const keep: number[] = [];
    const lines = new Map<number, number>(); // source line in the input batch -> line in the merged one
    for (let i = 0; i < seg.documents; i++) {
      if (dead.has(i)) {
        dropped++;
        continue;
      }
      to[i] = docIds.length;
      keep.push(i);
      docIds.push(seg.docIds[i]);
      const e = info.documents[i];
      let line = lines.get(e.line);
      if (line === undefined) {
        line = sources.length;
        lines.set(e.line, line);
        sources.push(docs[e.line]);
      }
      infos.push({ ...e, line });
    }
    try {
      codes.append(seg, keep);
      raws.append(raw, keep);
    } catch (err) {
      // Segments of one codec version are written with one artifact and seed; anything else is not this merge's to fix.
      if (err instanceof RangeError) throw new PermanentJobError(`merge: ${err.message}`);
      throw err;
    }
    if (index) {
      const idx = await readIndex(deps, p, ref, seg, centroids);
      try {
        if (idx) index.append(idx, seg.tokenOffsets, keep);
      } catch (err) {
        if (!(err instanceof RangeError)) throw err;
        deps.logger.warn(`merge of ${p.collectionId}: the index of ${ref.key} cannot be copied (${err.message}); rebuilding the merged segment's index`);
      }
      if (!idx || index.documents !== docIds.length) index = null;
    }
    if (warpParts) {
      const layout = (ref.warpEpoch ?? 0) === warpEpoch ? await readWarpLayout(deps, p, ref, seg, warpCentroids) : null;
      if (layout) warpParts.push({ layout, docMap: to });
      else warpParts = null;
    }
    inputs.push({ ref, to });
  }

  let output: SegmentRef | null = null;
  const indexMade: MergeOutcome['index'] = index ? 'copied' : 'rebuilt';
  if (docIds.length > 0) {
    const rawKey = s3Keys.rawVectors(p.tenantId, p.collectionId, batchId);
    // The merged batch is read back like an ingested one: its source documents and their info.
    await deps.store.put(s3Keys.batchDocuments(p.tenantId, p.collectionId, batchId), toNdjson(sources));
    const info: IngestBatchDocumentInfo = { batchId, documents: infos };
    await deps.store.put(batchInfoKey(p.tenantId, p.collectionId, batchId), JSON.stringify(info), 'application/json');
    const tokens = codes.tokens;
    let rawBytes: Uint8Array | null = raws.finish();
    await deps.store.put(rawKey, rawBytes);
    // An index or search layout rebuilt (an input without a usable one) reads the terms of pooled rows from the merged raw batch.
    const rawTerms = index && (!warp || warpParts) ? undefined : readSegment(rawBytes, rawKey);
    rawBytes = null;
    const bytes = codes.finish();
    const key = s3Keys.segment(p.tenantId, p.collectionId, batchId, cv);
    // The index first: a committed segment always has one.
    const merged = readSegment(bytes, key, artifact, await segmentReadOptions(artifact, collection, deps.staticEmbeddings));
    // BM25's terms of a rebuilt index: the merged documents' analysed words (analyser 'english'), else the raw batch's token ids.
    const terms = bm25AnalyzerOf(collection) === 'english' ? analysedBatchTerms(sources, info) : rawTerms && { tokenIds: rawTerms.tokenIds, tokenOffsets: rawTerms.tokenOffsets };
    let indexBytes: Uint8Array;
    let layoutBytes: Uint8Array | null = null;
    if (index) indexBytes = serializeSegmentIndex(index.finish());
    else ({ index: indexBytes, warp: layoutBytes } = await segmentSearchObjects(deps, collection, merged, cv, terms, warpEpoch));
    // WARP: the inputs' layouts merged (mergeWarpLayouts: no vector decoded or assigned again), else rebuilt from the merged segment.
    if (warp && !layoutBytes && warpParts) layoutBytes = mergedLayout(deps, p, warpParts, docIds.length);
    if (warp && !layoutBytes) layoutBytes = (await segmentSearchObjects(deps, collection, merged, cv, terms, warpEpoch)).warp;
    warpParts = null;
    if (layoutBytes) await deps.store.put(s3Keys.searchLayout(p.tenantId, p.collectionId, batchId, cv, warpEpoch), layoutBytes);
    await deps.store.put(s3Keys.segmentIndex(p.tenantId, p.collectionId, batchId, cv), indexBytes);
    await deps.store.put(s3Keys.segmentHead(p.tenantId, p.collectionId, batchId, cv), serializeSegmentHead(segmentHeadData(merged, bytes.byteLength)));
    await deps.store.put(key, bytes);
    deps.liveIds.remember(p.tenantId, p.collectionId, key, docIds);
    output = {
      batchId, codecVersion: cv, key, documents: docIds.length, tokens, bytes: bytes.byteLength, checksum: crc32c(bytes).toString(16).padStart(8, '0'), head: true,
      // the ingest batches it now stands for (ingestion progress keeps counting them as committed)
      batches: [...new Set(refs.flatMap((r) => segmentBatches(r)))].sort(),
      // the inputs' shard (chooseMerge keeps a merge within one)
      ...(shards > 1 ? { shard: segmentShard(refs[0], shards) } : {}),
      ...(warp && warpEpoch > 0 ? { warpEpoch } : {}),
    };
  }

  // `listed`: the inputs as the generation committed on lists them (a refit may have moved them to a newer epoch since they were read).
  const state: { status: MergeOutcome['status']; listed: SegmentRef[] } = { status: 'merged', listed: [] };
  const result = await deps.generations.commit(p.tenantId, p.collectionId, async (segments, current) => {
    state.status = 'merged';
    state.listed = [];
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
    state.listed = at.map((i) => segments[i]);
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
  const merged: MergeOutcome = { status, inputs: refs.map((r) => r.key), output: status === 'merged' ? (output?.key ?? null) : null, dropped, reason: spec.reason, ...(output ? { index: indexMade } : {}), ...(recoded > 0 ? { recoded } : {}) };
  if (result.committed && status === 'merged') {
    // The inputs' objects, for garbage collection once no kept generation lists them.
    // With a refit's commit between this merge's read and its commit, an input is listed at the refit's epoch: its layouts of both epochs go.
    const objects = [...new Set([...refs, ...state.listed].flatMap((r) => segmentObjects(p.tenantId, p.collectionId, r, { warp })))];
    const record: GarbageRecord = { generation: result.manifest.generation, committedAt: result.manifest.committedAt, objects };
    for (const r of refs) await deps.store.put(gcKeys.mergedAway(p.tenantId, p.collectionId, r.batchId), JSON.stringify({ batchId: r.batchId, into: output?.key ?? null, generation: record.generation }), 'application/json');
    await deps.store.put(gcKeys.record(p.tenantId, p.collectionId, record.generation), JSON.stringify(record), 'application/json');
  }
  if (deps.gc) await collectGarbage({ store: deps.store, generations: deps.generations, logger: deps.logger }, p.tenantId, p.collectionId, deps.gc);
  if (result.committed) deps.logger.info(`merged ${refs.length} segments of ${p.collectionId} (${spec.reason}, tier ${spec.tier}) into ${output?.key ?? 'nothing'}: generation ${result.manifest.generation}`);
  else if (status === 'inputs-gone') deps.logger.info(`merge of ${p.collectionId} dropped: its inputs changed before it committed`);
  // The newest generation (committed here, or the one that made this merge drop): does the policy want another merge (the next tier, more segments over the bound)?
  return { generation: result.manifest.generation, committed: result.committed, documents: result.manifest.documents, merged, again: mergeDue(collection, result.manifest, deps.policy) };
}

/** A segment of the generation, read with its codec artifact (ids, offsets, coded rows; nothing decoded); null when missing or corrupt in S3. */
async function readStored(deps: MergeDeps, key: string, artifact: CodecArtifact, ref: SegmentRef): Promise<SegmentReader | null> {
  const bytes = await deps.store.get(key);
  if (!bytes) {
    deps.logger.warn(`merge: segment ${key} is missing from S3; coding its raw batch again`);
    return null;
  }
  let seg: SegmentReader;
  try {
    seg = readSegment(bytes, key, artifact);
  } catch (err) {
    if (!(err instanceof SegmentCorruptError)) throw err;
    deps.logger.warn(`merge: ${err.message}; coding its raw batch again`);
    return null;
  }
  if (seg.documents !== ref.documents) throw new PermanentJobError(`merge: ${key} holds ${seg.documents} documents, its reference ${ref.documents}`);
  return seg;
}

/** The input's search index, checked against the segment and the collection's centroids; null (rebuild) when missing or unusable. */
async function readIndex(deps: MergeDeps, p: MergePayload, ref: SegmentRef, seg: SegmentReader, centroids: Float32Array | undefined): Promise<SegmentIndex | null> {
  const key = s3Keys.segmentIndex(p.tenantId, p.collectionId, ref.batchId, ref.codecVersion);
  const bytes = await deps.store.get(key);
  if (!bytes || !centroids) {
    deps.logger.warn(`merge of ${p.collectionId}: ${bytes ? 'no centroids for' : 'no index'} ${key}; rebuilding the merged segment's index`);
    return null;
  }
  try {
    return deserializeSegmentIndex(bytes, key, { documents: seg.documents, tokens: seg.tokens, centroids, dims: seg.dims });
  } catch (err) {
    if (!(err instanceof SegmentCorruptError)) throw err;
    deps.logger.warn(`merge of ${p.collectionId}: ${(err as Error).message}; rebuilding the merged segment's index`);
    return null;
  }
}

/** The input's WARP search layout, every list checked, against the segment and the collection's centroids; null (rebuild) when missing or unusable. */
async function readWarpLayout(deps: MergeDeps, p: MergePayload, ref: SegmentRef, seg: SegmentReader, centroids: Float32Array | undefined) {
  const key = s3Keys.searchLayout(p.tenantId, p.collectionId, ref.batchId, ref.codecVersion, ref.warpEpoch ?? 0);
  const bytes = await deps.store.get(key);
  if (!bytes || !centroids) {
    deps.logger.warn(`merge of ${p.collectionId}: ${bytes ? 'no centroids for' : 'no search layout'} ${key}; rebuilding the merged segment's layout`);
    return null;
  }
  try {
    return warpLayoutFromBytes(bytes, key, { documents: seg.documents, dims: seg.dims, centroidsChecksum: centroidsChecksum(centroids), centroidCount: centroids.length / seg.dims });
  } catch (err) {
    if (!(err instanceof WarpLayoutCorruptError)) throw err;
    deps.logger.warn(`merge of ${p.collectionId}: ${err.message}; rebuilding the merged segment's layout`);
    return null;
  }
}

/** The inputs' layouts merged and serialised; null (rebuild) when they were built with other centroids or codecs. */
function mergedLayout(deps: MergeDeps, p: MergePayload, parts: WarpMergePart[], documents: number): Uint8Array | null {
  try {
    return serializeWarpLayout(mergeWarpLayouts(parts, documents));
  } catch (err) {
    if (!(err instanceof RangeError)) throw err;
    deps.logger.warn(`merge of ${p.collectionId}: the search layouts cannot be merged (${err.message}); rebuilding the merged segment's layout`);
    return null;
  }
}

/** The input's raw fp16 batch (its documents in the segment's order). */
async function readRaw(deps: MergeDeps, key: string, ref: SegmentRef): Promise<SegmentReader> {
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
async function readBatch(deps: MergeDeps, p: MergePayload, ref: SegmentRef, raw: SegmentReader): Promise<{ info: IngestBatchDocumentInfo; docs: IngestDocument[] }> {
  const docsKey = s3Keys.batchDocuments(p.tenantId, p.collectionId, ref.batchId);
  const bytes = await deps.store.get(docsKey);
  if (!bytes) throw new PermanentJobError(`merge: the documents of ${ref.key} are missing from S3 (${docsKey})`);
  const docs = fromNdjson(bytes);
  const infoBytes = await deps.store.get(batchInfoKey(p.tenantId, p.collectionId, ref.batchId));
  const info: IngestBatchDocumentInfo = infoBytes
    ? (JSON.parse(new TextDecoder().decode(infoBytes)) as IngestBatchDocumentInfo)
    : { batchId: ref.batchId, documents: docs.map((d, line) => ({ id: d.id, line, tokens: -1, truncated: false })) };
  if (info.documents.length !== raw.documents || info.documents.some((d, i) => d.id !== raw.docIds[i])) {
    throw new PermanentJobError(`merge: the document info of ${ref.batchId} does not list the ids of its raw vectors in order`);
  }
  return { info, docs };
}
