import { describe, expect, it } from 'vitest';
import { BatchRowSchema, ChunkColumns, DistinctTexts, PermanentJobError, RerankRequestSchema, batchKeys, compactEntry, isTextCandidate, plainBatchRow, type BatchRecord, type BatchRow, type Candidate, type ChunkHeader } from '@lateral/shared';
import { batchFlow, type FlowNode } from '@lateral/infra';
import { batchProcessor, chunkRequestIssues, readChunk, type BatchDeps } from './batch.processor';
import { textHash } from './text-cache';

const good: object[] = [
  { custom_id: 'a', query: '  q  ', candidates: ['d1', 'd2'] },
  { custom_id: 'b', query: 'q', candidates: [{ id: 'd1', score: 1.5 }, { text: 'some text' }, { id: 't', text: 'x', score: -2 }], topK: 3 },
  { custom_id: 'c', query: 'q', candidates: [{ text: 'x' }], top_k: 2 },
  { custom_id: 'd', query: 'q', candidates: [{ text: 'x' }], topK: 2, top_k: 2 },
  { custom_id: 'e', query: 'é'.repeat(4096), candidates: ['x'.repeat(512)] },
];
const bad: object[] = [
  { custom_id: 'a', query: '   ', candidates: ['d1'] },
  { custom_id: 'a', query: 'q', candidates: [] },
  { custom_id: 'a', query: 'q', candidates: [''] },
  { custom_id: 'a', query: 'q', candidates: ['x'.repeat(513)] },
  { custom_id: 'a', query: 'q', candidates: [{ id: 'd1' }] },
  { custom_id: 'a', query: 'q', candidates: [{ id: 'd1', score: '1' }] },
  { custom_id: 'a', query: 'q', candidates: [{ id: 'd1', score: 1, extra: true }] },
  { custom_id: 'a', query: 'q', candidates: [{ text: '' }] },
  { custom_id: 'a', query: 'q', candidates: [{ text: 'x', id: '' }] },
  { custom_id: 'a', query: 'q', candidates: [{ text: 'x', other: 1 }] },
  { custom_id: 'a', query: 'q', candidates: [{ text: 5 }] },
  { custom_id: 'a', query: 'q', candidates: [null] },
  { custom_id: 'a', query: 'q', candidates: [['d1']] },
  { custom_id: 'a', query: 'q', candidates: ['d1'], topK: 0 },
  { custom_id: 'a', query: 'q', candidates: ['d1'], topK: 1.5 },
  { custom_id: 'a', query: 'q', candidates: ['d1'], topK: 10_001 },
  { custom_id: 'a', query: 'q', candidates: ['d1'], topK: 2, top_k: 3 },
  { custom_id: 'a', query: 'q', candidates: ['d1'], extra: 1 },
  { custom_id: 'a', query: 'q'.repeat(4097), candidates: ['d1'] },
  { custom_id: 'a', query: 7, candidates: ['d1'] },
  JSON.parse('{"custom_id":"a","query":"q","candidates":["d1"],"__proto__":{}}') as object,
];

describe('batch chunks', () => {
  it('plainBatchRow gives what BatchRowSchema gives for plainly valid rows, and null for every row the schema refuses', () => {
    for (const row of good) {
      const fast = plainBatchRow(row);
      const parsed = BatchRowSchema.safeParse(row);
      expect(parsed.success).toBe(true);
      expect(fast).toEqual(parsed.data);
    }
    for (const row of bad) {
      expect(BatchRowSchema.safeParse(row).success, JSON.stringify(row)).toBe(false);
      expect(plainBatchRow(row), JSON.stringify(row)).toBeNull();
    }
  });

  it('a chunk file names each distinct text once by its hash, and reads back as the rows with their texts hashed', () => {
    const texts = new DistinctTexts();
    const rows = good.slice(0, 3).map((r, i) => ({ line: i + 1, custom_id: (r as BatchRow).custom_id, row: BatchRowSchema.parse(r) }));
    const lines = rows.map((e) => JSON.stringify(compactEntry(e, texts)));
    expect(texts.texts).toEqual(['some text', 'x']);
    const header: ChunkHeader = { textHashes: texts.texts.map(textHash) };
    const error = { line: 4, custom_id: null, error: { message: 'line 4: not JSON' } };
    const read = readChunk(`${JSON.stringify(header)}\n${lines.join('\n')}\n${JSON.stringify(error)}\n`);
    expect(read).toEqual([
      { line: 1, custom_id: 'a', row: { custom_id: 'a', query: 'q', candidates: ['d1', 'd2'] } },
      { line: 2, custom_id: 'b', row: { custom_id: 'b', query: 'q', topK: 3, candidates: [{ id: 'd1', score: 1.5 }, { textHash: textHash('some text') }, { id: 't', textHash: textHash('x'), score: -2 }] } },
      { line: 3, custom_id: 'c', row: { custom_id: 'c', query: 'q', topK: 2, candidates: [{ textHash: textHash('x') }] } },
      error,
    ]);
    // A chunk file written before the header (rows with their texts) reads as it was written.
    const old = rows.map((e) => JSON.stringify(e)).join('\n');
    expect(readChunk(old)).toEqual(rows);
  });

  it('a binary chunk file reads back as the same rows, the rows sharing a candidate list sharing one array; a corrupt one fails for good, naming the file', () => {
    const cols = new ChunkColumns();
    const rows = good.slice(0, 3).map((r, i) => ({ line: i + 1, custom_id: (r as BatchRow).custom_id, row: BatchRowSchema.parse(r) }));
    for (const e of rows) cols.add(e);
    const again = { line: 4, custom_id: 'b2', row: { ...rows[1].row, custom_id: 'b2', topK: undefined } };
    delete again.row.topK;
    cols.add(again);
    cols.add({ line: 5, custom_id: null, error: { message: 'line 5: not JSON' } });
    const bytes = cols.encode(cols.texts.texts.map(textHash), null);
    const read = readChunk(bytes, 'chunk file 0 of batch b');
    expect(read).toEqual([
      { line: 1, custom_id: 'a', row: { custom_id: 'a', query: 'q', candidates: ['d1', 'd2'] } },
      { line: 2, custom_id: 'b', row: { custom_id: 'b', query: 'q', topK: 3, candidates: [{ id: 'd1', score: 1.5 }, { textHash: textHash('some text') }, { id: 't', textHash: textHash('x'), score: -2 }] } },
      { line: 3, custom_id: 'c', row: { custom_id: 'c', query: 'q', topK: 2, candidates: [{ textHash: textHash('x') }] } },
      { line: 4, custom_id: 'b2', row: { custom_id: 'b2', query: 'q', candidates: [{ id: 'd1', score: 1.5 }, { textHash: textHash('some text') }, { id: 't', textHash: textHash('x'), score: -2 }] } },
      { line: 5, custom_id: null, error: { message: 'line 5: not JSON' } },
    ]);
    const rowOf = (i: number) => (read[i] as { row: { candidates: unknown } }).row;
    expect(rowOf(3).candidates).toBe(rowOf(1).candidates);
    const corrupt = Buffer.from(bytes);
    corrupt[60] ^= 1;
    expect(() => readChunk(corrupt, 'chunk file 0 of batch b')).toThrow(PermanentJobError);
    expect(() => readChunk(corrupt, 'chunk file 0 of batch b')).toThrow('chunk file 0 of batch b cannot be read: checksum mismatch (corrupt)');
    expect(() => readChunk(corrupt.subarray(0, 40), 'chunk file 0 of batch b')).toThrow(/cannot be read: its header describes/);
    // A JSONL chunk file with a line that is not JSON fails for good too (it would fail every retry alike).
    expect(() => readChunk('{"textHashes":[]}\n{"line":1,"custom_id":"a","ro', 'chunk file 3 of batch b')).toThrow(/chunk file 3 of batch b cannot be read: its line 2 is not JSON/);
  });

  it("chunkRequestIssues finds what RerankRequestSchema refuses across a chunk's rows, with its messages", () => {
    const queries: { id: string; text: string; candidates: Candidate[] }[] = [
      { id: 'a', text: 'q', candidates: [{ id: 'd1', score: 1 }, { text: 'x', score: 2 }] },
      { id: 'b', text: 'q', candidates: ['d2', { text: 'y' }] },
    ];
    const hybrid = { name: 'hybrid' as const, base: 'maxsim' as const, fusion: 'linear' as const, lambda: 0.5, normalization: 'minmax' as const, rrfK: 60 };
    const schema = RerankRequestSchema.safeParse({ collection: 'c', scorer: hybrid, queries });
    expect(schema.success).toBe(false);
    const expected = schema.error!.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
    expect(chunkRequestIssues(queries, hybrid)).toEqual(expected);
    // The same rows with texts named by hash are checked the same way.
    const hashed = queries.map((q) => ({ ...q, candidates: q.candidates.map((c) => (isTextCandidate(c) ? { ...(c.score !== undefined ? { score: c.score } : {}), textHash: textHash(c.text) } : c)) }));
    expect(chunkRequestIssues(hashed, hybrid)).toEqual(expected);
    expect(chunkRequestIssues(queries, { name: 'maxsim', normalize: false })).toEqual([]);
  });
});

describe('plan of a batch whose chunks are written', () => {
  it('adds the flow again (chunks with a texts file get their encode-texts child) and reads no input', async () => {
    const record: BatchRecord = {
      id: 'b1',
      tenantId: 't',
      state: 'running',
      createdAt: '2026-01-01T00:00:00Z',
      options: { model: 'm', topK: 10, scorer: { name: 'maxsim', normalize: false } },
      input: { bytes: 10 },
      chunks: 3,
      counts: { rows: 5, invalid: 1 },
      planned: true,
    };
    const objects = new Set([batchKeys.chunkTexts('t', 'b1', 0), batchKeys.chunkTexts('t', 'b1', 2)]);
    const store = {
      bucket: 'x',
      getJson: async (key: string) => (key === batchKeys.record('t', 'b1') ? record : null),
      s3: {
        send: async (cmd: { input: { Key: string } }) => {
          if (objects.has(cmd.input.Key)) return { ContentLength: 1 };
          throw Object.assign(new Error('NotFound'), { name: 'NotFound', $metadata: { httpStatusCode: 404 } });
        },
      },
    };
    const added: FlowNode[] = [];
    const space = { model: 'm', maxTokens: 180, codec: null };
    const ctx = { store, flows: { add: async (f: FlowNode) => void added.push(f) }, textSpace: async () => space, chunkRows: 2, maxTextBytes: 100 } as unknown as BatchDeps;
    expect(await batchProcessor(ctx, { step: 'plan', tenantId: 't', rerankBatchId: 'b1' })).toEqual({ step: 'plan', rows: 5, failed: 1 });
    expect(added).toEqual([batchFlow('t', 'b1', [true, false, true], space)]);
  });
});
