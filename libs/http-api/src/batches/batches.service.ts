import { randomUUID } from 'node:crypto';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { PayloadTooLargeException } from '@nestjs/common';
import {
  BatchOptionsSchema,
  ConflictError,
  NotFoundError,
  QueueName,
  ValidationError,
  batchKeys,
  checkScorerArtifact,
  textCodecRef,
  textJobIds,
  type BatchOptions,
  type BatchRecord,
  type Collection,
} from '@lateral/shared';
import { BatchChunkWriter, ByteLineSplitter, S3Upload, batchFlow, callerUploadKey, checkScorerArtifactExists, getObjectStream, objectHead, type ApiRepositories } from '@lateral/infra';
import { currentTenant } from '../common/request-context';
import { parseWaitSeconds } from '../common/json-body';
import { TextRerankSubmitter } from '../rerank/text-candidates';
import { zodIssues } from '../common/zod-issues';
import type { TenantQuotas } from '../auth/quotas';

/** Lines of the input's head checked for JSONL (a file none of whose first lines is a JSON object is refused). */
const HEAD_LINES = 100;
const HEAD_BYTES = 1 << 20;
/** A status that waits (`?wait=`) reads the batch again at least this often: a cancel, or a job Redis lost, is seen within it. */
const WAIT_RECHECK_MS = 1000;
const FINISHED: ReadonlySet<BatchRecord['state']> = new Set(['completed', 'failed', 'cancelled']);

/** A request body read as a stream (the body reader leaves JSONL uploads unread). */
type UploadRequest = Readable & { headers: Record<string, string | string[] | undefined> };

/** What GET /v1/batches/{id} answers. */
export interface BatchStatus {
  id: string;
  state: BatchRecord['state'];
  createdAt: string;
  startedAt?: string;
  completedAt?: string;
  cancelledAt?: string;
  options: BatchRecord['options'];
  input: { bytes: number };
  counts?: BatchRecord['counts'];
  progress: { chunks: number | null; chunksDone: number; fraction: number; etaSeconds: number | null };
  texts?: BatchRecord['texts'];
  timings?: BatchRecord['timings'];
  result?: { key: string; url: string };
  error?: string;
}

/** The repositories this service is given (app.ts passes only these: pickRepositories). */
export const BATCHES_REPOSITORIES = ['config', 'store', 'queues', 'jobs', 'flows', 'completions'] as const satisfies readonly (keyof ApiRepositories)[];
/** What batch files use: S3 (inputs, records, results), the batch queue and its jobs (and their completions, for `wait`), the re-rank submitter's checks, the quotas. */
export type BatchesDeps = Pick<ApiRepositories, (typeof BATCHES_REPOSITORIES)[number]> & { texts: TextRerankSubmitter; quotas: TenantQuotas };

/**
 * Batch files (JSONL, one re-rank row per line, each with a custom_id): the upload is streamed to S3
 * as it arrives (multipart, one part in memory), or the caller names an S3 key; a `batch` plan job
 * validates rows and cuts chunks, a BullMQ flow re-ranks them (encode-texts children on the
 * encoder pool), the finalize step writes the result file in the input's order.
 */
export class BatchesService {
  private readonly texts: TextRerankSubmitter;

  constructor(private readonly deps: BatchesDeps) {
    this.texts = deps.texts;
  }

  private get tenantId(): string {
    return currentTenant(this.deps.config);
  }

  private options(raw: Record<string, unknown>): BatchOptions {
    const parsed = BatchOptionsSchema.safeParse(raw);
    if (!parsed.success) throw new ValidationError('invalid batch options', zodIssues(parsed.error));
    checkScorerArtifact(path.resolve(this.deps.config.SCORERS_DIR), parsed.data.scorer);
    return parsed.data;
  }

  private async checkTarget(o: BatchOptions): Promise<Collection | null> {
    await checkScorerArtifactExists(this.deps, this.tenantId, o.scorer);
    return this.texts.target(this.tenantId, { collection: o.collection, model: o.model, queries: [] });
  }

  private tooLarge(bytes: number | string): PayloadTooLargeException {
    return new PayloadTooLargeException(`batch file is ${bytes} bytes, over BATCH_MAX_BYTES (${this.deps.config.BATCH_MAX_BYTES} bytes)`);
  }

  /**
   * POST /v1/batches with a JSONL body, never held whole: cut into chunk files as it streams in
   * (rows validated, each chunk's distinct texts listed: BatchChunkWriter, as the plan job cuts an
   * upload), then the flow is added and the batch answers `running`. No copy of the input is kept:
   * the chunk files are what the jobs (and a re-plan after Redis lost the flow) read. Batch options
   * come from the query string.
   */
  async createFromUpload(req: UploadRequest, query: Record<string, unknown>): Promise<BatchStatus> {
    const tenantId = this.tenantId;
    let opts: BatchOptions;
    let collection: Collection | null;
    const id = `batch-${randomUUID()}`;
    let release: () => Promise<void>;
    try {
      opts = this.options(query);
      collection = await this.checkTarget(opts);
      this.checkUploadHeaders(req);
      // The tenant's jobs in flight (maxConcurrentJobs), before the upload is read.
      release = await this.deps.quotas.admit(tenantId, { kind: 'batch', id });
    } catch (err) {
      req.resume();
      throw err;
    }
    const { config } = this.deps;
    const writer = new BatchChunkWriter(this.deps.store, tenantId, id, config.BATCH_CHUNK_ROWS, { hasCollection: !!opts.collection, maxTextBytes: config.MAX_DOCUMENT_BYTES });
    try {
      const createdAt = new Date().toISOString();
      const bytes = await this.planJsonl(req, writer);
      const planned = await writer.finish();
      const model = collection?.model ?? opts.model!;
      const space = { model, maxTokens: collection?.maxDocTokens ?? this.texts.modelManifest(model).maxDocTokens, codec: textCodecRef(collection) };
      const record: BatchRecord = {
        id,
        tenantId,
        state: 'running',
        createdAt,
        startedAt: new Date().toISOString(),
        options: opts,
        input: { bytes },
        chunks: planned.withTexts.length,
        chunkRows: config.BATCH_CHUNK_ROWS,
        counts: { rows: planned.rows, invalid: planned.invalid },
        planned: true,
      };
      await this.deps.store.putJson(batchKeys.record(tenantId, id), record);
      try {
        await this.deps.flows.add(batchFlow(tenantId, id, planned.withTexts, space));
      } catch (err) {
        await this.deps.store.delete(batchKeys.record(tenantId, id)).catch(() => undefined);
        throw err;
      }
      return this.view(record);
    } catch (err) {
      await writer.discard();
      await release();
      throw err;
    }
  }

  /**
   * Reads a JSONL body, the one reader of every route that takes one (POST /v1/batches with a
   * JSONL body, PUT /v1/uploads/{name}): BATCH_MAX_BYTES (413) as it arrives, the JSONL check of
   * its head (400) as soon as the head is in (at the end for a shorter body), and each piece that
   * passed both handed to `sink` in order. Returns its bytes.
   */
  private async readJsonlBody(req: UploadRequest, sink: (piece: Buffer) => Promise<void>): Promise<number> {
    const max = this.deps.config.BATCH_MAX_BYTES;
    const head = new HeadScan();
    let checked = false;
    let bytes = 0;
    for await (const chunk of req) {
      const b = chunk as Buffer;
      if (bytes + b.byteLength > max) {
        req.resume();
        throw this.tooLarge(`over ${max}`);
      }
      bytes += b.byteLength;
      // Refused as soon as its head shows it is not JSONL, before anything is cut or stored.
      if (!checked && head.push(b)) {
        head.check(false);
        checked = true;
      }
      await sink(b);
    }
    if (!checked) head.check(true);
    return bytes;
  }

  /** Feeds a JSONL body to the chunk writer line by line, as bytes (the writer decodes what it must; readJsonlBody's checks first). Returns its bytes. */
  private async planJsonl(req: UploadRequest, writer: BatchChunkWriter): Promise<number> {
    const lines = new ByteLineSplitter();
    const bytes = await this.readJsonlBody(req, async (piece) => {
      for (const line of lines.push(piece)) await writer.line(line);
    });
    for (const line of lines.end()) await writer.line(line);
    return bytes;
  }

  /**
   * PUT /v1/uploads/{name}: a JSONL file streamed to the caller's own uploads
   * (`tenants/<tenant>/uploads/<name>`, replaced when it exists), for batches that name it as
   * their `input`. Up to BATCH_MAX_BYTES; refused unless one of its first lines is a JSON object.
   */
  async upload(name: string, req: UploadRequest): Promise<{ name: string; bytes: number }> {
    const key = batchKeys.upload(this.tenantId, name);
    try {
      this.checkUploadHeaders(req);
    } catch (err) {
      req.resume();
      throw err;
    }
    const bytes = await this.streamJsonl(req, key);
    return { name, bytes };
  }

  private checkUploadHeaders(req: UploadRequest): void {
    const encoding = String(req.headers['content-encoding'] ?? '').trim().toLowerCase();
    if (encoding !== '' && encoding !== 'identity') throw new ValidationError(`batch uploads are not compressed (Content-Encoding: ${encoding}); upload the JSONL as is`, [{ field: 'content-encoding', message: 'identity only' }]);
    const declared = Number(req.headers['content-length']);
    if (Number.isFinite(declared) && declared > this.deps.config.BATCH_MAX_BYTES) throw this.tooLarge(declared);
  }

  /** Streams a JSONL body to `key` (multipart, one part in memory); aborts the upload on any failure. Returns its bytes. */
  private async streamJsonl(req: UploadRequest, key: string): Promise<number> {
    const upload = new S3Upload(this.deps.store, key, 'application/x-ndjson');
    try {
      await this.readJsonlBody(req, (piece) => upload.write(piece));
      await upload.finish();
    } catch (err) {
      await upload.abort();
      throw err;
    }
    return upload.bytes;
  }

  /**
   * POST /v1/batches with JSON `{ input, collection?, model?, scorer?, topK? }`: `input` is the
   * name of one of the caller's uploads (callerUploadKey), never an object key; anything else gets
   * the same 400 whether an object is there or not.
   */
  async createFromKey(body: unknown): Promise<BatchStatus> {
    if (!body || typeof body !== 'object' || Array.isArray(body)) throw new ValidationError('body must be a JSON object { input, collection?, model?, scorer?, topK? }, or a JSONL file (Content-Type: application/jsonl)', [{ field: 'body', message: 'expected an object' }]);
    const { input, ...rest } = body as Record<string, unknown>;
    const key = callerUploadKey(this.tenantId, input, 'input');
    const opts = this.options(rest);
    await this.checkTarget(opts);
    const info = await objectHead(this.deps.store, key);
    // A well-formed name of an upload the caller does not have: a 404 (only the caller's own uploads are looked at).
    if (!info) throw new NotFoundError(`input: you have no upload '${String(input)}' (PUT /v1/uploads/${String(input)} first)`);
    if (info.size > this.deps.config.BATCH_MAX_BYTES) throw this.tooLarge(info.size);
    const stream = await getObjectStream(this.deps.store, key);
    const head = new HeadScan();
    let ended = true;
    for await (const chunk of stream ?? []) {
      if (head.push(chunk as Buffer)) {
        ended = false;
        break;
      }
    }
    stream?.destroy();
    head.check(ended);
    const id = `batch-${randomUUID()}`;
    return this.start(id, opts, { key, bytes: info.size }, await this.deps.quotas.admit(this.tenantId, { kind: 'batch', id }));
  }

  private async start(id: string, options: BatchOptions, input: { key: string; bytes: number }, release: () => Promise<void>): Promise<BatchStatus> {
    const tenantId = this.tenantId;
    const record: BatchRecord = { id, tenantId, state: 'validating', createdAt: new Date().toISOString(), options, input };
    try {
      await this.deps.store.putJson(batchKeys.record(tenantId, id), record);
      await this.deps.queues.add(QueueName.batch, textJobIds.batchPlan(tenantId, id), { step: 'plan', tenantId, rerankBatchId: id });
    } catch (err) {
      await release();
      throw err;
    }
    return this.view(record);
  }

  private async record(id: string): Promise<BatchRecord> {
    const r = await this.deps.store.getJson<BatchRecord>(batchKeys.record(this.tenantId, id));
    if (!r) throw new NotFoundError(`batch '${id}' not found`);
    return r;
  }

  /** `wait` (query), seconds: 0..RERANK_MAX_WAIT_SECONDS, a 400 naming it otherwise. */
  parseWait(raw: unknown): number {
    return parseWaitSeconds(raw, this.deps.config.RERANK_MAX_WAIT_SECONDS);
  }

  /**
   * GET /v1/batches/{id}: the status at once, or with `waitSeconds` > 0 once the batch is
   * completed, failed or cancelled (or the wait ran out): woken by the completion of its plan job
   * (validating) or finalize job (running), as interactive requests are (JobCompletions: this
   * process's worker, else the queue's completion event), not by polling; read again at least every
   * WAIT_RECHECK_MS for what completes no job (a cancel).
   */
  async status(id: string, waitSeconds = 0): Promise<BatchStatus> {
    let view = await this.view(await this.record(id));
    const deadline = Date.now() + waitSeconds * 1000;
    for (let left = deadline - Date.now(); left > 0 && !FINISHED.has(view.state); left = deadline - Date.now()) {
      const slice = Math.min(left, WAIT_RECHECK_MS);
      const t = Date.now();
      const jobId = view.state === 'validating' ? textJobIds.batchPlan(this.tenantId, id) : textJobIds.batchFinalize(this.tenantId, id);
      const done = await this.deps.completions.wait(QueueName.batch, jobId, slice);
      view = await this.view(await this.record(id));
      // No job to wait on (not added yet, or lost with Redis) or a failure: the rest of the slice, then read again.
      const rest = slice - (Date.now() - t);
      if (!done && rest > 0 && !FINISHED.has(view.state)) await new Promise((r) => setTimeout(r, rest));
    }
    return view;
  }

  async cancel(id: string): Promise<BatchStatus> {
    const r = await this.record(id);
    if (r.state === 'completed' || r.state === 'failed') throw new ConflictError(`batch '${id}' is already ${r.state}`);
    if (r.state === 'cancelled') return this.view(r);
    // Chunks not yet started see the state and skip their rows; a running chunk finishes.
    const cancelled: BatchRecord = { ...r, state: 'cancelled', cancelledAt: new Date().toISOString() };
    await this.deps.store.putJson(batchKeys.record(this.tenantId, id), cancelled);
    return this.view(cancelled);
  }

  /** The result file as a stream (409 until the batch is completed). */
  async results(id: string): Promise<Readable> {
    const r = await this.record(id);
    const view = await this.view(r);
    if (view.state !== 'completed' || !r.resultKey) throw new ConflictError(`batch '${id}' is ${view.state}: its results are there once it is completed`);
    const s = await getObjectStream(this.deps.store, r.resultKey);
    if (!s) throw new NotFoundError(`the result file of batch '${id}' is missing`);
    return s;
  }

  /** The record, with the failure of its plan or finalize job, and progress / ETA from the flow's processed children. */
  private async view(r: BatchRecord): Promise<BatchStatus> {
    const tenantId = this.tenantId;
    let state = r.state;
    let error = r.error;
    let chunksDone = 0;
    if (state === 'validating' || state === 'running') {
      const plan = await this.deps.jobs.read(QueueName.batch, textJobIds.batchPlan(tenantId, r.id));
      if (plan?.state === 'failed') {
        state = 'failed';
        error = plan.failedReason;
      }
    }
    if (state === 'running') {
      const fin = await this.deps.jobs.flowProgress(QueueName.batch, textJobIds.batchFinalize(tenantId, r.id));
      if (fin) {
        if (fin.failedReason !== null) {
          state = 'failed';
          error = fin.failedReason;
        } else {
          chunksDone = fin.childrenProcessed;
        }
      }
    }
    if (state === 'completed') chunksDone = r.chunks ?? 0;
    const chunks = r.chunks ?? null;
    const fraction = state === 'completed' ? 1 : chunks ? chunksDone / chunks : 0;
    const elapsed = r.startedAt ? (Date.now() - Date.parse(r.startedAt)) / 1000 : 0;
    const etaSeconds = state === 'running' && fraction > 0 ? Math.round((elapsed * (1 - fraction)) / fraction) : state === 'completed' ? 0 : null;
    return {
      id: r.id,
      state,
      createdAt: r.createdAt,
      ...(r.startedAt ? { startedAt: r.startedAt } : {}),
      ...(r.completedAt ? { completedAt: r.completedAt } : {}),
      ...(r.cancelledAt ? { cancelledAt: r.cancelledAt } : {}),
      options: r.options,
      input: { bytes: r.input.bytes },
      ...(r.counts ? { counts: r.counts } : {}),
      progress: { chunks, chunksDone, fraction, etaSeconds },
      ...(r.texts ? { texts: r.texts } : {}),
      ...(r.timings ? { timings: r.timings } : {}),
      ...(r.resultKey && state === 'completed' ? { result: { key: r.resultKey, url: `/v1/batches/${r.id}/results` } } : {}),
      ...(error ? { error } : {}),
    };
  }
}

/**
 * Keeps the first lines of an input (up to HEAD_LINES lines or HEAD_BYTES) to tell a JSONL file
 * from something else before any work is queued: it is JSONL when one of those lines is a JSON
 * object (single bad rows are the rows' own errors, in the result file).
 */
class HeadScan {
  private readonly pieces: Buffer[] = [];
  private bytes = 0;
  private lines = 0;
  private full = false;

  /** Returns true once it has seen enough. Counts the line breaks of the new piece only (rescanning the head for each piece cost a body of long lines quadratic time). */
  push(chunk: Buffer): boolean {
    if (this.full) return true;
    const take = chunk.subarray(0, Math.max(0, HEAD_BYTES - this.bytes));
    this.bytes += take.byteLength;
    this.pieces.push(take);
    for (let i = take.indexOf(10); i >= 0 && this.lines <= HEAD_LINES; i = take.indexOf(10, i + 1)) this.lines++;
    this.full = this.lines > HEAD_LINES || this.bytes >= HEAD_BYTES;
    return this.full;
  }

  check(ended: boolean): void {
    let lines = Buffer.concat(this.pieces).toString('utf8').split('\n');
    if (!ended) lines = lines.slice(0, -1); // the last one may be cut
    const nonEmpty = lines.map((l) => l.trim()).filter((l) => l.length > 0).slice(0, HEAD_LINES);
    if (nonEmpty.length === 0) {
      throw new ValidationError(ended && this.bytes === 0 ? 'the batch file is empty: expected JSONL, one re-rank row per line' : `the batch file is not JSONL: no line ends within its first ${HEAD_BYTES} bytes`, [
        { field: 'body', message: 'expected JSONL' },
      ]);
    }
    const isObject = (l: string) => {
      try {
        const v = JSON.parse(l);
        return !!v && typeof v === 'object' && !Array.isArray(v);
      } catch {
        return false;
      }
    };
    if (!nonEmpty.some(isObject)) {
      throw new ValidationError(`the batch file is not JSONL: none of its first ${nonEmpty.length} non-empty line(s) is a JSON object`, [{ field: 'body', message: 'expected one JSON object per line' }]);
    }
  }
}
