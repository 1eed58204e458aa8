import type { Job } from 'bullmq';
import {
  BatchRowSchema,
  MAX_CANDIDATES_PER_QUERY,
  MAX_CANDIDATE_TEXT_CHARS,
  MAX_QUERY_CHARS,
  MAX_RERANK_CANDIDATES,
  PermanentJobError,
  QueueName,
  batchKeys,
  isTextCandidate,
  s3Keys,
  textJobIds,
  type BatchChunkEntry,
  type BatchRecord,
  type BatchResultLine,
  type BatchRow,
  type Candidate,
  type JobPayload,
  type JobResults,
  type RerankResult,
  type ScorerSpec,
} from '@lateral/shared';
import { S3Upload, getObjectStream, readLines, type FlowNode, type JobFlows, type ObjectStore } from '@lateral/infra';
import { rerankByIds } from './rerank-ids';
import { hasTextCandidates, rerankWithTexts, textStatsOf, type RerankJobDeps, type ResolvableRerankRequest } from './rerank-texts';
import { isTextLike, type ResolvableCandidate } from './rerank-candidates';
import { textHash } from './text-cache';

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

export async function batchProcessor(ctx: BatchDeps, p: BatchPayload, job?: Pick<Job, 'updateProgress' | 'getChildrenValues'>): Promise<BatchResult> {
  switch (p.step) {
    case 'plan':
      return planBatch(ctx, p.tenantId, p.batchId);
    case 'chunk':
      return runChunk(ctx, p.tenantId, p.batchId, p.chunk, job);
    case 'finalize':
      return finalizeBatch(ctx, p.tenantId, p.batchId, p.chunks, job);
  }
}

async function record(store: Pick<ObjectStore, 'getJson'>, t: string, b: string): Promise<BatchRecord> {
  const r = await store.getJson<BatchRecord>(batchKeys.record(t, b));
  if (!r) throw new PermanentJobError(`batch ${t}/${b} has no record in S3`);
  return r;
}

/**
 * Validates a row. Every problem names its line and custom_id; the row fails alone.
 */
export function validateRow(
  line: string,
  lineNo: number,
  seen: Map<string, number>,
  opts: { hasCollection: boolean; maxTextBytes: number },
): BatchChunkEntry {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch (err) {
    return { line: lineNo, custom_id: null, error: { message: `line ${lineNo}: not JSON (${(err as Error).message})` } };
  }
  if (!value || typeof value !== 'object' || Array.isArray(value)) return { line: lineNo, custom_id: null, error: { message: `line ${lineNo}: not a JSON object` } };
  const cid = (value as { custom_id?: unknown }).custom_id;
  const customId = typeof cid === 'string' && cid.length > 0 ? cid : null;
  const where = `line ${lineNo}${customId ? ` (custom_id "${customId.slice(0, 80)}")` : ''}`;
  if (customId === null) return { line: lineNo, custom_id: null, error: { message: `${where}: custom_id is missing (a non-empty string)`, issues: [{ field: 'custom_id', message: 'required' }] } };
  const earlier = seen.get(customId);
  if (earlier !== undefined) {
    return { line: lineNo, custom_id: customId, error: { message: `${where}: duplicate custom_id (first at line ${earlier})`, issues: [{ field: 'custom_id', message: `duplicate of line ${earlier}` }] } };
  }
  seen.set(customId, lineNo);
  let row = plainBatchRow(value);
  if (!row) {
    const parsed = BatchRowSchema.safeParse(value);
    if (!parsed.success) {
      const issues = parsed.error.issues.map((i) => ({ field: i.path.join('.') || '(row)', message: i.message }));
      return { line: lineNo, custom_id: customId, error: { message: `${where}: ${issues.map((i) => `${i.field}: ${i.message}`).join('; ')}`, issues } };
    }
    row = parsed.data;
  }
  const issues: { field: string; message: string }[] = [];
  row.candidates.forEach((c, ci) => {
    if (isTextCandidate(c)) {
      const bytes = Buffer.byteLength(c.text);
      if (bytes > opts.maxTextBytes) issues.push({ field: `candidates.${ci}.text`, message: `text is ${bytes} bytes, over MAX_DOCUMENT_BYTES (${opts.maxTextBytes})` });
    } else if (!opts.hasCollection) {
      issues.push({ field: `candidates.${ci}`, message: 'a candidate given by id needs the batch to name a collection; give it as { text }' });
    }
  });
  if (issues.length > 0) return { line: lineNo, custom_id: customId, error: { message: `${where}: ${issues.map((i) => `${i.field}: ${i.message}`).join('; ')}`, issues } };
  return { line: lineNo, custom_id: customId, row };
}

const ROW_KEYS = new Set(['custom_id', 'query', 'candidates', 'topK', 'top_k']);
const hasOnly = (o: object, keys: readonly string[]) => {
  for (const k in o) if (!keys.includes(k)) return false;
  return true;
};
const boundedString = (v: unknown, max: number): v is string => typeof v === 'string' && v.length >= 1 && v.length <= max;
const hitCount = (v: unknown) => v === undefined || (typeof v === 'number' && Number.isInteger(v) && v > 0 && v <= MAX_CANDIDATES_PER_QUERY);

/**
 * A row as BatchRowSchema outputs it, without zod, when the row is plainly valid (the common
 * case: zod's union of candidate shapes costs more than the rest of planning); null when anything
 * is off, and the caller asks BatchRowSchema, whose issues name what. Accepts only what the
 * schema accepts (batch.processor.spec.ts compares the two).
 */
export function plainBatchRow(value: object): BatchRow | null {
  for (const k in value) if (!ROW_KEYS.has(k)) return null;
  const r = value as Record<string, unknown>;
  if (!boundedString(r.custom_id, 512) || typeof r.query !== 'string') return null;
  const query = r.query.trim();
  if (query.length < 1 || query.length > MAX_QUERY_CHARS) return null;
  const candidates = r.candidates;
  if (!Array.isArray(candidates) || candidates.length < 1 || candidates.length > MAX_CANDIDATES_PER_QUERY) return null;
  for (const c of candidates as unknown[]) {
    if (typeof c === 'string') {
      if (c.length < 1 || c.length > 512) return null;
      continue;
    }
    if (!c || typeof c !== 'object' || Array.isArray(c)) return null;
    const o = c as Record<string, unknown>;
    if ('text' in o) {
      if (!hasOnly(o, ['id', 'text', 'score']) || !boundedString(o.text, MAX_CANDIDATE_TEXT_CHARS)) return null;
      if (o.id !== undefined && !boundedString(o.id, 512)) return null;
      if (o.score !== undefined && (typeof o.score !== 'number' || !Number.isFinite(o.score))) return null;
      if (('id' in o && o.id === undefined) || ('score' in o && o.score === undefined)) return null;
    } else if (!hasOnly(o, ['id', 'score']) || !boundedString(o.id, 512) || typeof o.score !== 'number' || !Number.isFinite(o.score)) return null;
  }
  if (!hitCount(r.topK) || !hitCount(r.top_k) || ('topK' in r && r.topK === undefined) || ('top_k' in r && r.top_k === undefined)) return null;
  if (r.topK !== undefined && r.top_k !== undefined && r.topK !== r.top_k) return null;
  const topK = (r.topK ?? r.top_k) as number | undefined;
  const row = { custom_id: r.custom_id, query, candidates: candidates as BatchRow['candidates'] };
  return topK === undefined ? row : { ...row, topK };
}

/**
 * Reads the input as a stream (one line at a time), validates each row and writes chunk files of
 * BATCH_CHUNK_ROWS lines (each chunk also lists its distinct candidate texts), then adds the flow:
 * the finalize job as parent, one chunk job per chunk as children, each chunk with texts having an
 * encode-texts child on the encoder pool. Memory: one chunk, plus the custom_ids seen so far.
 */
async function planBatch(ctx: BatchDeps, t: string, b: string): Promise<BatchResult> {
  const rec = await record(ctx.store, t, b);
  if (rec.state === 'cancelled') return { step: 'plan', rows: 0, failed: 0 };
  // A record written before inputs were confined to the tenant's uploads may name any key: only the tenant's own objects are read.
  if (!rec.input.key.startsWith(`tenants/${rec.tenantId}/`)) throw new PermanentJobError(`batch input must be one of the tenant's own uploads; this batch names an object outside tenants/${rec.tenantId}/`);
  const stream = await getObjectStream(ctx.store, rec.input.key);
  if (!stream) throw new PermanentJobError(`batch input ${rec.input.key} is missing from S3`);
  const seen = new Map<string, number>();
  const opts = { hasCollection: !!rec.options.collection, maxTextBytes: ctx.maxTextBytes };
  let chunks = 0;
  let rows = 0;
  let invalid = 0;
  let lineNo = 0;
  let entries: string[] = [];
  let texts = new Map<string, number>();
  const withTexts: boolean[] = [];
  const flush = async () => {
    if (entries.length === 0) return;
    const distinct = [...texts.keys()];
    // The chunk names each distinct text once, by its hash (hashed here, once): the header line.
    const header = JSON.stringify({ textHashes: distinct.map(textHash) } satisfies ChunkHeader);
    await ctx.store.put(batchKeys.chunk(t, b, chunks), `${header}\n${entries.join('\n')}\n`, 'application/x-ndjson');
    if (distinct.length > 0) await ctx.store.putJson(batchKeys.chunkTexts(t, b, chunks), distinct);
    withTexts.push(distinct.length > 0);
    chunks++;
    entries = [];
    texts = new Map();
  };
  for await (const line of readLines(stream)) {
    lineNo++;
    if (line.trim().length === 0) continue;
    rows++;
    const entry = validateRow(line, lineNo, seen, opts);
    if ('error' in entry) invalid++;
    entries.push(JSON.stringify('error' in entry ? entry : compactEntry(entry, texts)));
    if (entries.length >= ctx.chunkRows) await flush();
  }
  await flush();
  const space = await ctx.textSpace(rec);
  const children: FlowNode[] = withTexts.map((hasTexts, n) => ({
    queue: QueueName.batch,
    jobId: textJobIds.batchChunk(t, b, n),
    payload: { step: 'chunk', tenantId: t, batchId: b, chunk: n },
    children: hasTexts
      ? [
          {
            queue: QueueName.encodeTexts,
            jobId: textJobIds.batchChunkTexts(t, b, n),
            payload: { tenantId: t, model: space.model, maxTokens: space.maxTokens, codec: space.codec, textsKey: batchKeys.chunkTexts(t, b, n), texts: 0 },
          },
        ]
      : undefined,
  }));
  const latest = await record(ctx.store, t, b);
  if (latest.state === 'cancelled') return { step: 'plan', rows, failed: invalid };
  await ctx.store.putJson(batchKeys.record(t, b), {
    ...latest,
    state: 'running',
    startedAt: new Date().toISOString(),
    chunks,
    chunkRows: ctx.chunkRows,
    counts: { rows, invalid },
  } satisfies BatchRecord);
  await ctx.flows.add({ queue: QueueName.batch, jobId: textJobIds.batchFinalize(t, b), payload: { step: 'finalize', tenantId: t, batchId: b, chunks }, children });
  return { step: 'plan', rows, failed: invalid };
}

/** Re-ranks a chunk's valid rows as one re-rank request (its texts are in the cache by now) and writes its result lines. */
async function runChunk(ctx: BatchDeps, t: string, b: string, n: number, job?: Pick<Job, 'getChildrenValues'>): Promise<BatchResult> {
  const t0 = Date.now();
  const rec = await record(ctx.store, t, b);
  if (rec.state === 'cancelled') return { step: 'chunk', rows: 0, failed: 0 };
  const tRead = Date.now();
  const bytes = await ctx.store.get(batchKeys.chunk(t, b, n));
  if (!bytes) throw new PermanentJobError(`chunk ${n} of batch ${b} is missing from S3`);
  const entries = readChunk(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8'));
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
    const rerankId = `${b}.c${n}`;
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
        result = (await rerankWithTexts(ctx.rerank, t, rerankId, request, undefined, texts)).result;
      } else {
        // Ids only: the collection's re-rank of ids (include, group) through S3 as any request.
        const requestKey = s3Keys.rerankRequest(t, rerankId);
        await ctx.store.putJson(requestKey, request);
        const out = await rerankByIds(ctx.rerank, { tenantId: t, rerankId, requestKey });
        result = await ctx.store.getJson<RerankResult>(out.resultKey);
        await ctx.store.delete(out.resultKey);
        await ctx.store.delete(requestKey);
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
  await ctx.store.put(batchKeys.chunkResult(t, b, n), lines.map((l) => JSON.stringify(l)).join('\n') + '\n', 'application/x-ndjson');
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
async function finalizeBatch(ctx: BatchDeps, t: string, b: string, chunks: number, job?: Pick<Job, 'getChildrenValues'>): Promise<BatchResult> {
  const values = job ? ((await job.getChildrenValues().catch(() => ({}))) as Record<string, Partial<BatchResult>>) : {};
  const sum = (f: (v: Partial<BatchResult>) => number | undefined) => Object.values(values).reduce((s, v) => s + (f(v) ?? 0), 0);
  const timings: Record<string, number> = {};
  for (const v of Object.values(values)) for (const [k, ms] of Object.entries(v.timings ?? {})) timings[k] = (timings[k] ?? 0) + ms;
  const rec = await record(ctx.store, t, b);
  if (rec.state === 'cancelled') return { step: 'finalize', rows: 0, failed: 0 };
  const resultKey = batchKeys.result(t, b);
  const upload = new S3Upload(ctx.store, resultKey, 'application/x-ndjson');
  try {
    for (let n = 0; n < chunks; n++) {
      const s = await getObjectStream(ctx.store, batchKeys.chunkResult(t, b, n));
      if (!s) throw new PermanentJobError(`result of chunk ${n} of batch ${b} is missing from S3`);
      for await (const part of s) await upload.write(part as Uint8Array);
    }
    await upload.finish();
  } catch (err) {
    await upload.abort();
    throw err;
  }
  const rows = sum((v) => v.rows);
  const failed = sum((v) => v.failed);
  const latest = await record(ctx.store, t, b);
  if (latest.state === 'cancelled') return { step: 'finalize', rows, failed };
  await ctx.store.putJson(batchKeys.record(t, b), {
    ...latest,
    state: 'completed',
    completedAt: new Date().toISOString(),
    counts: { rows: latest.counts?.rows ?? rows, invalid: latest.counts?.invalid ?? 0, completed: rows - failed, failed },
    texts: { encoded: sum((v) => v.encoded), reused: sum((v) => v.reused), tokens: sum((v) => v.tokens) },
    timings,
    resultKey,
  } satisfies BatchRecord);
  // Chunk files are intermediate: the result file holds everything.
  await ctx.store.deletePrefix(batchKeys.chunksPrefix(t, b)).catch(() => undefined);
  return { step: 'finalize', rows, failed };
}

/*
 * Chunk files. The first line is a header naming the chunk's distinct candidate texts by their
 * sha256 (ChunkHeader.textHashes, in the order of the chunk's texts file, which the encode-texts
 * job reads); each row's text candidates are written as `{ id?, t, score? }` with `t` the text's
 * place in that list, so a chunk job reads no text, hashes none and parses no row again. Chunk
 * files written before the header (rows with their texts) are read as they were.
 */

/** The header line of a chunk file. */
export interface ChunkHeader {
  textHashes: string[];
}

/** A text candidate in a chunk file: its place in the header's textHashes. */
interface ChunkTextCandidate {
  id?: string;
  t: number;
  score?: number;
}

type ChunkRow = Omit<BatchRow, 'candidates'> & { candidates: ResolvableCandidate[] };
/** A chunk file's row as the chunk job reads it: text candidates named by hash. */
type ChunkEntry = Extract<BatchChunkEntry, { error: unknown }> | { line: number; custom_id: string; row: ChunkRow };

/** A valid row as its chunk file holds it: each text candidate replaced by its place in `texts` (the chunk's distinct texts, added here). */
export function compactEntry(entry: Extract<BatchChunkEntry, { row: BatchRow }>, texts: Map<string, number>): { line: number; custom_id: string; row: Omit<BatchRow, 'candidates'> & { candidates: (Candidate | ChunkTextCandidate)[] } } {
  const candidates = entry.row.candidates.map((c): Candidate | ChunkTextCandidate => {
    if (!isTextCandidate(c)) return c;
    let at = texts.get(c.text);
    if (at === undefined) texts.set(c.text, (at = texts.size));
    const out: ChunkTextCandidate = c.id === undefined ? { t: at } : { id: c.id, t: at };
    if (c.score !== undefined) out.score = c.score;
    return out;
  });
  return { line: entry.line, custom_id: entry.custom_id, row: { ...entry.row, candidates } };
}

/** Parses a chunk file: its entries, text candidates named by their hash (a file without the header keeps its texts). */
export function readChunk(text: string): ChunkEntry[] {
  const lines = text.split('\n').filter((l) => l.length > 0);
  let hashes: string[] = [];
  if (lines.length > 0 && lines[0].startsWith('{"textHashes":')) hashes = (JSON.parse(lines.shift()!) as ChunkHeader).textHashes;
  return lines.map((l) => {
    const e = JSON.parse(l) as BatchChunkEntry | ChunkEntry;
    if (!('row' in e)) return e;
    const candidates = (e.row.candidates as (ResolvableCandidate | ChunkTextCandidate)[]).map((c): ResolvableCandidate => {
      if (typeof c !== 'object' || !('t' in c)) return c;
      const textHash = hashes[c.t];
      if (textHash === undefined) throw new PermanentJobError(`chunk file names text ${c.t}, which its header does not list`);
      return c.id === undefined ? { textHash, ...(c.score !== undefined ? { score: c.score } : {}) } : { id: c.id, textHash, ...(c.score !== undefined ? { score: c.score } : {}) };
    });
    return { line: e.line, custom_id: e.custom_id, row: { ...e.row, candidates } };
  });
}

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
