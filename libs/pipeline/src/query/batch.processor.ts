import type { Job } from 'bullmq';
import {
  MAX_RERANK_CANDIDATES,
  PermanentJobError,
  QueueName,
  ChunkFormatError,
  batchKeys,
  decodeBinaryChunk,
  isBinaryChunk,
  s3Keys,
  type BatchChunkEntry,
  type BatchRecord,
  type BatchResultLine,
  type BatchRow,
  type ChunkHeader,
  type ChunkTextCandidate,
  type DecodedChunk,
  type JobPayload,
  type JobResults,
  type RerankResult,
  type ScorerSpec,
} from '@lateral/shared';
import { BatchChunkWriter, S3Upload, batchFlow, getObjectStream, objectHead, readByteLines, type JobFlows, type ObjectStore } from '@lateral/infra';
import { rerankByIds } from './rerank-ids';
import { hasTextCandidates, rerankWithTexts, textStatsOf, type RerankJobDeps, type ResolvableRerankRequest } from './rerank-texts';
import { isTextLike, type ResolvableCandidate } from './rerank-candidates';
import { mapLimit } from './text-cache';

/** What the batch processors touch. */
export interface BatchDeps {
  store: ObjectStore;
  flows: Pick<JobFlows, 'add'>;
  rerank: RerankJobDeps;
  /** Rows per chunk (BATCH_CHUNK_ROWS), largest candidate text (MAX_DOCUMENT_BYTES). */
  chunkRows: number;
  maxTextBytes: number;
  /** The encode-texts payload's token cap for a batch: the collection's maxDocTokens, or the model's. */
  textSpace: (record: BatchRecord) => Promise<{ model: string; maxTokens: number; codec: { collectionId: string; codecVersion: number } | null }>;
}

type BatchPayload = JobPayload<QueueName.batch>;
type BatchResult = JobResults[QueueName.batch];

export async function batchProcessor(deps: BatchDeps, p: BatchPayload, job?: Pick<Job, 'updateProgress' | 'getChildrenValues'>): Promise<BatchResult> {
  switch (p.step) {
    case 'plan':
      return planBatch(deps, p.tenantId, p.rerankBatchId);
    case 'chunk':
      return runChunk(deps, p.tenantId, p.rerankBatchId, p.chunk, job);
    case 'finalize':
      return finalizeBatch(deps, p.tenantId, p.rerankBatchId, p.chunks, job);
  }
}

async function record(store: Pick<ObjectStore, 'getJson'>, tenantId: string, rerankBatchId: string): Promise<BatchRecord> {
  const r = await store.getJson<BatchRecord>(batchKeys.record(tenantId, rerankBatchId));
  if (!r) throw new PermanentJobError(`batch ${tenantId}/${rerankBatchId} has no record in S3`);
  return r;
}

/**
 * Reads the input (an upload the batch names) as a stream, one line at a time, and cuts it into
 * chunk files (BatchChunkWriter: rows validated, each chunk listing its distinct candidate texts),
 * then adds the flow (batchFlow). A batch whose chunks are already written (a JSONL body, cut by
 * the API as it streamed in, or an earlier plan) only gets its flow again: what the reconciler
 * asks for after Redis lost it. Memory: one chunk, plus the custom_ids seen so far.
 */
async function planBatch(deps: BatchDeps, tenantId: string, rerankBatchId: string): Promise<BatchResult> {
  const rec = await record(deps.store, tenantId, rerankBatchId);
  if (rec.state === 'cancelled') return { step: 'plan', rows: 0, failed: 0 };
  if (rec.planned && rec.chunks !== undefined) {
    // Which chunks have texts (an encode-texts child): their texts files (a HEAD each; only after Redis lost the flow).
    const withTexts = await mapLimit(
      Array.from({ length: rec.chunks }, (_, n) => n),
      16,
      async (n) => (await objectHead(deps.store, batchKeys.chunkTexts(tenantId, rerankBatchId, n))) !== null,
    );
    await deps.flows.add(batchFlow(tenantId, rerankBatchId, withTexts, await deps.textSpace(rec)));
    return { step: 'plan', rows: rec.counts?.rows ?? 0, failed: rec.counts?.invalid ?? 0 };
  }
  const inputKey = rec.input.key;
  if (!inputKey) throw new PermanentJobError(`batch ${tenantId}/${rerankBatchId} names no input and has no chunks`);
  // A record written before inputs were confined to the tenant's uploads may name any key: only the tenant's own objects are read.
  if (!inputKey.startsWith(`tenants/${rec.tenantId}/`)) throw new PermanentJobError(`batch input must be one of the tenant's own uploads; this batch names an object outside tenants/${rec.tenantId}/`);
  const stream = await getObjectStream(deps.store, inputKey);
  if (!stream) throw new PermanentJobError(`batch input ${inputKey} is missing from S3`);
  const writer = new BatchChunkWriter(deps.store, tenantId, rerankBatchId, deps.chunkRows, { hasCollection: !!rec.options.collection, maxTextBytes: deps.maxTextBytes });
  for await (const line of readByteLines(stream)) await writer.line(line);
  const planned = await writer.finish();
  const space = await deps.textSpace(rec);
  const latest = await record(deps.store, tenantId, rerankBatchId);
  if (latest.state === 'cancelled') return { step: 'plan', rows: planned.rows, failed: planned.invalid };
  await deps.store.putJson(batchKeys.record(tenantId, rerankBatchId), {
    ...latest,
    state: 'running',
    startedAt: new Date().toISOString(),
    chunks: planned.withTexts.length,
    chunkRows: deps.chunkRows,
    counts: { rows: planned.rows, invalid: planned.invalid },
    planned: true,
  } satisfies BatchRecord);
  await deps.flows.add(batchFlow(tenantId, rerankBatchId, planned.withTexts, space));
  return { step: 'plan', rows: planned.rows, failed: planned.invalid };
}

/** Re-ranks a chunk's valid rows as one re-rank request (its texts are in the cache by now) and writes its result lines. */
async function runChunk(deps: BatchDeps, tenantId: string, rerankBatchId: string, n: number, job?: Pick<Job, 'getChildrenValues'>): Promise<BatchResult> {
  const t0 = Date.now();
  const rec = await record(deps.store, tenantId, rerankBatchId);
  if (rec.state === 'cancelled') return { step: 'chunk', rows: 0, failed: 0 };
  const tRead = Date.now();
  const bytes = await deps.store.get(batchKeys.chunk(tenantId, rerankBatchId, n));
  if (!bytes) throw new PermanentJobError(`chunk ${n} of batch ${rerankBatchId} is missing from S3`);
  const entries = readChunk(bytes, `chunk file ${n} of batch ${rerankBatchId}`);
  const readMs = Date.now() - tRead;
  const valid = entries.filter((e): e is Extract<ChunkEntry, { row: unknown }> => 'row' in e);
  const childValues = (typeof job?.getChildrenValues === 'function' ? await job.getChildrenValues().catch(() => ({})) : {}) as Record<string, Partial<JobResults[QueueName.encodeTexts]>>;
  const texts = textStatsOf(childValues);
  const encodeTextsMs = Object.values(childValues).reduce((s, v) => s + (v.ms ?? 0), 0);
  const tokens = Object.values(childValues).reduce((s, v) => s + (v.tokens ?? 0), 0);
  const lines: BatchResultLine[] = [];
  let timings: RerankResult['timings'] | null = null;
  let hitsBy = new Map<string, RerankResult['results'][number]>();
  let chunkError: string | null = null;
  if (valid.length > 0) {
    const rerankId = `${rerankBatchId}.c${n}`;
    const request: ResolvableRerankRequest = {
      ...(rec.options.collection ? { collection: rec.options.collection } : {}),
      ...(rec.options.model ? { model: rec.options.model } : {}),
      scorer: rec.options.scorer,
      topK: Math.max(rec.options.topK, ...valid.map((e) => rowTopK(e.row) ?? 0)),
      queries: valid.map((e) => ({ id: e.custom_id, text: e.row.query, candidates: e.row.candidates })),
    };
    try {
      // Every row passed validateRow when the chunk was planned: what is left to check is what spans rows.
      const issues = chunkRequestIssues(request.queries, rec.options.scorer);
      if (issues.length > 0) throw new PermanentJobError(`the rows of chunk ${n} do not make a valid re-rank request: ${issues.join('; ').slice(0, 500)}`);
      let result: RerankResult | null;
      if (hasTextCandidates(request)) {
        // Text candidates: scored in memory, no request or result object in S3.
        result = (await rerankWithTexts(deps.rerank, tenantId, rerankId, request, undefined, texts)).result;
      } else {
        // Ids only: the collection's re-rank of ids (include, group) through S3 as any request.
        const requestKey = s3Keys.rerankRequest(tenantId, rerankId);
        await deps.store.putJson(requestKey, request);
        const out = await rerankByIds(deps.rerank, { tenantId, rerankId, requestKey });
        result = await deps.store.getJson<RerankResult>(out.resultKey);
        await deps.store.delete(out.resultKey);
        await deps.store.delete(requestKey);
      }
      if (!result) throw new Error(`re-rank result of chunk ${n} is missing from S3`);
      timings = result.timings;
      hitsBy = new Map(result.results.map((r) => [r.queryId, r]));
    } catch (err) {
      // A permanent failure (a scorer that cannot run on these rows) fails this chunk's rows, not the batch.
      if (!(err instanceof PermanentJobError)) throw err;
      chunkError = err.message;
    }
  }
  let failed = 0;
  for (const e of entries) {
    if ('error' in e) {
      failed++;
      lines.push({ custom_id: e.custom_id, line: e.line, error: e.error });
      continue;
    }
    const r = hitsBy.get(e.custom_id);
    if (!r) {
      failed++;
      lines.push({ custom_id: e.custom_id, line: e.line, error: { message: chunkError ?? `line ${e.line}: no result` } });
      continue;
    }
    const k = rowTopK(e.row) ?? rec.options.topK;
    lines.push({ custom_id: e.custom_id, line: e.line, hits: r.hits.slice(0, k).map((h) => ({ id: h.id, score: h.score })), ...(r.missing.length ? { missing: r.missing } : {}) });
  }
  const tWrite = Date.now();
  await deps.store.put(batchKeys.chunkResult(tenantId, rerankBatchId, n), lines.map((l) => JSON.stringify(l)).join('\n') + '\n', 'application/x-ndjson');
  const writeMs = Date.now() - tWrite;
  return {
    step: 'chunk',
    rows: entries.length,
    failed,
    encoded: texts.encoded,
    reused: texts.reused,
    tokens,
    timings: {
      encodeTextsMs,
      encodeQueriesMs: timings?.encodeQueriesMs ?? 0,
      scoreMs: timings?.scoreMs ?? 0,
      loadMs: timings?.loadMs ?? 0,
      chunkReadMs: readMs,
      chunkWriteMs: writeMs,
      chunkMs: Date.now() - t0,
    },
  };
}

/** Concatenates the chunks' result files in order (streamed, multipart) into the batch's result file. */
async function finalizeBatch(deps: BatchDeps, tenantId: string, rerankBatchId: string, chunks: number, job?: Pick<Job, 'getChildrenValues'>): Promise<BatchResult> {
  const values = job ? ((await job.getChildrenValues().catch(() => ({}))) as Record<string, Partial<BatchResult>>) : {};
  const sum = (f: (v: Partial<BatchResult>) => number | undefined) => Object.values(values).reduce((s, v) => s + (f(v) ?? 0), 0);
  const timings: Record<string, number> = {};
  for (const v of Object.values(values)) for (const [k, ms] of Object.entries(v.timings ?? {})) timings[k] = (timings[k] ?? 0) + ms;
  const rec = await record(deps.store, tenantId, rerankBatchId);
  if (rec.state === 'cancelled') return { step: 'finalize', rows: 0, failed: 0 };
  const resultKey = batchKeys.result(tenantId, rerankBatchId);
  const upload = new S3Upload(deps.store, resultKey, 'application/x-ndjson');
  try {
    for (let n = 0; n < chunks; n++) {
      const s = await getObjectStream(deps.store, batchKeys.chunkResult(tenantId, rerankBatchId, n));
      if (!s) throw new PermanentJobError(`result of chunk ${n} of batch ${rerankBatchId} is missing from S3`);
      for await (const part of s) await upload.write(part as Uint8Array);
    }
    await upload.finish();
  } catch (err) {
    await upload.abort();
    throw err;
  }
  const rows = sum((v) => v.rows);
  const failed = sum((v) => v.failed);
  const latest = await record(deps.store, tenantId, rerankBatchId);
  if (latest.state === 'cancelled') return { step: 'finalize', rows, failed };
  await deps.store.putJson(batchKeys.record(tenantId, rerankBatchId), {
    ...latest,
    state: 'completed',
    completedAt: new Date().toISOString(),
    counts: { rows: latest.counts?.rows ?? rows, invalid: latest.counts?.invalid ?? 0, completed: rows - failed, failed },
    texts: { encoded: sum((v) => v.encoded), reused: sum((v) => v.reused), tokens: sum((v) => v.tokens) },
    timings,
    resultKey,
  } satisfies BatchRecord);
  // Chunk files are intermediate: the result file holds everything.
  await deps.store.deletePrefix(batchKeys.chunksPrefix(tenantId, rerankBatchId)).catch(() => undefined);
  return { step: 'finalize', rows, failed };
}

type ChunkRow = Omit<BatchRow, 'candidates'> & { candidates: ResolvableCandidate[] };
/** A chunk file's row as the chunk job reads it: text candidates named by hash. */
type ChunkEntry = Extract<BatchChunkEntry, { error: unknown }> | { line: number; custom_id: string; row: ChunkRow };

/**
 * Parses a chunk file: its entries, text candidates named by their hash. A binary chunk file
 * (batch-chunk-format.ts) gives the rows sharing a candidate list one candidates array, which the
 * resolver resolves once; a JSONL one (written before it) is read as it always was, a file without
 * the header keeping its texts. A file that cannot be read fails for good, naming what is wrong.
 */
export function readChunk(file: Uint8Array | string, name = 'chunk file'): ChunkEntry[] {
  if (typeof file !== 'string' && isBinaryChunk(file)) {
    let chunk: DecodedChunk;
    try {
      chunk = decodeBinaryChunk(file);
    } catch (err) {
      if (err instanceof ChunkFormatError) throw new PermanentJobError(`${name} cannot be read: ${err.message}`);
      throw err;
    }
    const lists = chunk.lists.map((list) => list.map((c): ResolvableCandidate => (typeof c === 'string' || !('t' in c) ? c : hashed(c, chunk.textHashes[c.t]))));
    return chunk.entries.map((e) => {
      if ('error' in e) return e;
      const row: ChunkRow = e.topK === undefined ? { custom_id: e.custom_id, query: e.query, candidates: lists[e.list] } : { custom_id: e.custom_id, query: e.query, candidates: lists[e.list], topK: e.topK };
      return { line: e.line, custom_id: e.custom_id, row };
    });
  }
  const text = typeof file === 'string' ? file : Buffer.from(file.buffer, file.byteOffset, file.byteLength).toString('utf8');
  const lines = text.split('\n').filter((l) => l.length > 0);
  const parse = (l: string, i: number) => {
    try {
      return JSON.parse(l) as unknown;
    } catch (err) {
      throw new PermanentJobError(`${name} cannot be read: its line ${i + 1} is not JSON (${(err as Error).message})`);
    }
  };
  let hashes: string[] = [];
  let first = 0;
  if (lines.length > 0 && lines[0].startsWith('{"textHashes":')) {
    hashes = (parse(lines[0], 0) as ChunkHeader).textHashes;
    first = 1;
  }
  return lines.slice(first).map((l, i) => {
    const e = parse(l, i + first) as BatchChunkEntry | ChunkEntry;
    if (!e || typeof e !== 'object' || typeof e.line !== 'number') throw new PermanentJobError(`${name} cannot be read: its line ${i + first + 1} is not a chunk entry`);
    if (!('row' in e)) return e;
    const candidates = (e.row.candidates as (ResolvableCandidate | ChunkTextCandidate)[]).map((c): ResolvableCandidate => {
      if (typeof c !== 'object' || !('t' in c)) return c;
      const textHash = hashes[c.t];
      if (textHash === undefined) throw new PermanentJobError(`chunk file names text ${c.t}, which its header does not list`);
      return hashed(c, textHash);
    });
    return { line: e.line, custom_id: e.custom_id, row: { ...e.row, candidates } };
  });
}

/** A chunk's text candidate named by its text's hash. */
const hashed = (c: ChunkTextCandidate, textHash: string): ResolvableCandidate =>
  c.id === undefined ? { textHash, ...(c.score !== undefined ? { score: c.score } : {}) } : { id: c.id, textHash, ...(c.score !== undefined ? { score: c.score } : {}) };

/**
 * What a chunk's rows, as one re-rank request, must satisfy beyond each row's own checks
 * (validateRow): RerankRequestSchema's request-wide rules, with its messages: the candidate cap
 * across all queries, and the hybrid scorer's first-stage score on every candidate.
 */
export function chunkRequestIssues(queries: readonly { candidates: readonly ResolvableCandidate[] }[], scorer: ScorerSpec): string[] {
  const issues: string[] = [];
  const total = queries.reduce((s, q) => s + q.candidates.length, 0);
  if (total > MAX_RERANK_CANDIDATES) {
    issues.push(`queries: ${total} candidates in one request, over MAX_RERANK_CANDIDATES (${MAX_RERANK_CANDIDATES}) across all queries: split the request, or send a batch file (POST /v1/batches)`);
  }
  if (scorer.name !== 'hybrid') return issues;
  queries.forEach((q, qi) =>
    q.candidates.forEach((c, ci) => {
      if (typeof c === 'string' || (isTextLike(c) && c.score === undefined)) {
        issues.push(`queries.${qi}.candidates.${ci}: the hybrid scorer needs every candidate as { id, score } with its first-stage score`);
      }
    }),
  );
  return issues;
}

/** A row's own hit count: `topK`, or `top_k` in a chunk file written before rows were read as `topK`. */
function rowTopK(row: Pick<BatchRow, 'topK'>): number | undefined {
  return row.topK ?? (row as { top_k?: number }).top_k;
}
