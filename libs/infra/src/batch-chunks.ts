import { ChunkColumns, QueueName, RepeatedCandidates, batchKeys, isBlankLine, textHash, textJobIds, validateRow, type BatchLine, type ChunkTexts, type JobPayload } from '@lateral/shared';
import type { FlowNode } from './job-flows';
import type { ObjectStore } from './object-store';

/** Texts a batch remembers as written (their hashes, ~150 bytes each): past this many, a text is written again in each chunk naming it. */
export const MAX_SHARED_TEXTS = 500_000;
/** Characters of texts whose hash a batch keeps (so a text named again by a later chunk is not hashed again). */
const HASHED_TEXT_CHARS = 16 << 20;

/** What each chunk of a planned batch holds, as the flow needs it: whether it has candidate texts (an encode-texts child). */
export interface PlannedChunks {
  rows: number;
  invalid: number;
  /** One entry per chunk: true when the chunk lists candidate texts. */
  withTexts: boolean[];
}

/**
 * Cuts a batch file's lines into chunk files as they come (the one planner of batches: the API
 * while an upload streams in, the plan job for a batch that names an upload). Each line is
 * validated (validateRow: a bad row becomes its error entry, it never stops the batch); every
 * BATCH_CHUNK_ROWS lines a chunk file is written (binary and columnar, batch-chunk-format.ts: the
 * chunk's distinct texts by their sha256, each distinct candidate list once, each row naming its
 * list) with the chunk's texts file beside it, holding the texts no earlier chunk's file holds
 * (each distinct text of a batch is written once). A chunk's
 * files are written while the next chunk's lines are cut (one write in flight; the next full
 * chunk waits for it). A row repeating an earlier row's candidate list (as written) parses only
 * the rest of its line (RepeatedCandidates; a line given as bytes is decoded only where it does not
 * repeat a list). Memory: two chunks, plus the custom_ids seen so far, the hashes of the texts
 * written (up to MAX_SHARED_TEXTS), the texts hashed with their hashes (up to 16M characters) and
 * the repeated candidate lists remembered (up to 8M characters).
 */
export class BatchChunkWriter {
  private readonly seen = new Map<string, number>();
  /** Hash of each text written to a texts file so far -> that chunk (up to MAX_SHARED_TEXTS; a text past it is written again). */
  private readonly written = new Map<string, number>();
  /** Each text hashed so far -> its hash (up to HASHED_TEXT_CHARS characters: a later chunk naming it does not hash it again). */
  private readonly hashes = new Map<string, string>();
  private hashedChars = 0;
  private readonly withTexts: boolean[] = [];
  private rowsOf = new ChunkColumns();
  /** Candidate lists of earlier rows, so a row repeating one parses only the rest of its line. */
  private readonly repeats = new RepeatedCandidates();
  private lineNo = 0;
  private rows = 0;
  private invalid = 0;
  /** The previous chunk's writes, still in flight (its failure is thrown by the next flush or by finish). */
  private writing: Promise<void> | null = null;

  constructor(
    private readonly store: Pick<ObjectStore, 'put' | 'putJson' | 'deletePrefix'>,
    private readonly tenantId: string,
    private readonly rerankBatchId: string,
    private readonly chunkRows: number,
    private readonly opts: { hasCollection: boolean; maxTextBytes: number },
  ) {}

  /** One line of the file (without its line break), as text or as UTF-8 bytes (ByteLineSplitter); blank lines are skipped but counted. */
  async line(line: BatchLine): Promise<void> {
    this.lineNo++;
    if (isBlankLine(line)) return;
    this.rows++;
    const entry = validateRow(line, this.lineNo, this.seen, this.opts, this.repeats);
    if ('error' in entry) this.invalid++;
    this.rowsOf.add(entry);
    if (this.rowsOf.size >= this.chunkRows) await this.flush();
  }

  /** Writes the last chunk; what the flow and the record need. */
  async finish(): Promise<PlannedChunks> {
    await this.flush();
    await this.settle();
    return { rows: this.rows, invalid: this.invalid, withTexts: [...this.withTexts] };
  }

  /** Removes the chunk files written so far (an upload refused half-way). */
  async discard(): Promise<void> {
    this.rowsOf = new ChunkColumns();
    await this.settle().catch(() => undefined);
    await this.store.deletePrefix(batchKeys.chunksPrefix(this.tenantId, this.rerankBatchId)).catch(() => undefined);
  }

  private async flush(): Promise<void> {
    const rows = this.rowsOf;
    if (rows.size === 0) return;
    const n = this.withTexts.length;
    const distinct = rows.texts.texts;
    // The chunk names each distinct text once, by its hash (hashed here, once): in the chunk file, and
    // the texts file (ChunkTexts) beside it with the texts no earlier chunk's file holds (textsIn
    // names where the others are: a batch repeating its texts writes each once).
    const textHashes = distinct.map((t) => this.hashOf(t));
    const own: ChunkTexts = { textHashes: [], texts: [] };
    let shared = false;
    const textsIn = textHashes.map((h, i) => {
      const at = this.written.get(h);
      if (at !== undefined) {
        shared = true;
        return at;
      }
      if (this.written.size < MAX_SHARED_TEXTS) this.written.set(h, n);
      own.textHashes.push(h);
      own.texts.push(distinct[i]);
      return n;
    });
    const body = rows.encode(textHashes, shared ? textsIn : null);
    this.rowsOf = new ChunkColumns();
    this.withTexts.push(distinct.length > 0);
    // At most one chunk's writes in flight: the one before this must have landed (or its failure is thrown here).
    await this.settle();
    const writing = Promise.all([
      this.store.put(batchKeys.chunk(this.tenantId, this.rerankBatchId, n), body, 'application/octet-stream'),
      // Written for every chunk with texts (its encode-texts child reads it; a re-plan finds the chunks with texts by it), even with none of its own.
      distinct.length > 0 ? this.store.putJson(batchKeys.chunkTexts(this.tenantId, this.rerankBatchId, n), own) : undefined,
    ]).then(() => undefined);
    writing.catch(() => undefined); // seen by settle(); not an unhandled rejection meanwhile
    this.writing = writing;
  }

  /** The text's hash (textHash), kept for the next chunk naming it while there is room. */
  private hashOf(text: string): string {
    let h = this.hashes.get(text);
    if (h === undefined) {
      h = textHash(text);
      if (this.hashedChars + text.length <= HASHED_TEXT_CHARS) {
        this.hashes.set(text, h);
        this.hashedChars += text.length;
      }
    }
    return h;
  }

  /** Waits for the chunk writes in flight; throws their failure. */
  private async settle(): Promise<void> {
    const w = this.writing;
    this.writing = null;
    if (w) await w;
  }
}

/** Where a batch's candidate texts are cached: the encode-texts payload's model, token cap and codec. */
export type BatchTextSpace = Pick<JobPayload<QueueName.encodeTexts>, 'model' | 'maxTokens' | 'codec'>;

/**
 * The flow of a planned batch: the finalize job as parent, one chunk job per chunk as children,
 * each chunk with texts having an encode-texts child on the encoder pool. Job ids are the batch's
 * own, so adding it again (a re-plan after Redis lost it) adds nothing twice.
 */
export function batchFlow(tenantId: string, rerankBatchId: string, withTexts: readonly boolean[], space: BatchTextSpace): FlowNode {
  const children: FlowNode[] = withTexts.map((hasTexts, n) => ({
    queue: QueueName.batch,
    jobId: textJobIds.batchChunk(tenantId, rerankBatchId, n),
    payload: { step: 'chunk', tenantId, rerankBatchId, chunk: n },
    children: hasTexts
      ? [
          {
            queue: QueueName.encodeTexts,
            jobId: textJobIds.batchChunkTexts(tenantId, rerankBatchId, n),
            payload: { tenantId, model: space.model, maxTokens: space.maxTokens, codec: space.codec, textsKey: batchKeys.chunkTexts(tenantId, rerankBatchId, n), texts: 0, chunkKey: batchKeys.chunk(tenantId, rerankBatchId, n) },
          },
        ]
      : undefined,
  }));
  return { queue: QueueName.batch, jobId: textJobIds.batchFinalize(tenantId, rerankBatchId), payload: { step: 'finalize', tenantId, rerankBatchId, chunks: withTexts.length }, children };
}
