import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { loadRerankFolder } from '../eval/compression-trec-dl';
import { runRerankEval } from '../eval/rerank';
import { DatasetFilesError, findDatasetFiles } from './dataset-files';
import { findTrecDlFiles, loadTrecDlFolder, readTrecQrels } from './trec-dl';

const root = mkdtempSync(join(tmpdir(), 'lateral-trec-dl-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** A folder laid out like TREC DL 2020 from the same sources as ../shared/datasets/trec-dl-2019-passage. */
function dl20Folder(name: string, extra: Record<string, string> = {}, omit: string[] = []): string {
  const dir = join(root, name);
  mkdirSync(dir, { recursive: true });
  const hit = (qid: string, docid: string, rank: number, score: number, content: string) => ({ content, qid, docid, rank, score });
  const run = [
    // hits out of rank order on purpose: the reader sorts by rank
    { query: 'what is a flea', hits: [hit('1001', 'd1', 2, 9, 'fleas are insects'), hit('1001', 'd2', 1, 10, 'a flea market'), hit('1001', 'd3', 3, 8, 'dogs scratch')] },
    { query: { text: 'solar wind speed', qid: '1002' }, hits: [hit('1002', 'd4', 1, 5, 'the solar wind blows at 400 km/s'), hit('1002', 'd1', 2, 4, 'fleas are insects')] },
    { query: 'unjudged query', hits: [hit('1003', 'd5', 1, 3, 'nothing')] },
  ];
  const files: Record<string, string> = {
    'retrieve_results_dl20.json': JSON.stringify(run),
    'qrels.dl20-passage.txt': ['1001 0 d1 2', '1001 0 d2 0', '1001 0 d9 3', '1002 0 d4 1', '1002 0 d5 0', ''].join('\n'),
    'trec_results_dl20.txt': '1001 Q0 d2 1 10 rank\n',
    ...extra,
  };
  for (const [f, text] of Object.entries(files)) if (!omit.includes(f)) writeFileSync(join(dir, f), text);
  return dir;
}

describe('findTrecDlFiles (scripts/lib/trec-dl.ts)', () => {
  it('finds the run and the qrels of another TREC DL year by pattern', () => {
    const dir = dl20Folder('dl20');
    expect(findTrecDlFiles(dir)).toEqual({ run: join(dir, 'retrieve_results_dl20.json'), qrels: join(dir, 'qrels.dl20-passage.txt') });
  });

  it('names the folder, the missing pattern, every expected pattern and what the folder holds when a file is missing', () => {
    const dir = dl20Folder('no-qrels', {}, ['qrels.dl20-passage.txt']);
    expect(() => findTrecDlFiles(dir)).toThrow(DatasetFilesError);
    let message = '';
    try {
      findTrecDlFiles(dir);
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toContain(dir);
    expect(message).toContain('no file matches qrels*.txt for the qrels');
    expect(message).toContain('retrieve_results*.json');
    expect(message).toContain('holds retrieve_results_dl20.json, trec_results_dl20.txt');
  });

  it('says so when the run is missing, and when the folder does not exist', () => {
    const dir = dl20Folder('no-run', {}, ['retrieve_results_dl20.json']);
    expect(() => findTrecDlFiles(dir)).toThrow(/no file matches retrieve_results\*\.json for the run/);
    const empty = join(root, 'empty');
    mkdirSync(empty);
    expect(() => findTrecDlFiles(empty)).toThrow(/the folder holds nothing/);
    const missing = join(root, 'does-not-exist');
    expect(() => findTrecDlFiles(missing)).toThrow(new RegExp(`dataset folder ${missing} cannot be read`));
  });

  it('refuses to guess between two matching files, and takes the one named explicitly', () => {
    const dir = dl20Folder('two-years', { 'qrels.dl19-passage.txt': '1001 0 d1 1\n' });
    expect(() => findTrecDlFiles(dir)).toThrow(/2 files match qrels\*\.txt for the qrels \(qrels\.dl19-passage\.txt, qrels\.dl20-passage\.txt\); name one with --qrels FILE/);
    expect(findTrecDlFiles(dir, { qrels: 'qrels.dl20-passage.txt' }).qrels).toBe(join(dir, 'qrels.dl20-passage.txt'));
    expect(findTrecDlFiles(dir, { qrels: '/elsewhere/q.txt' }).qrels).toBe('/elsewhere/q.txt');
  });

  it('findDatasetFiles serves any set of roles', () => {
    const dir = dl20Folder('generic');
    const found = findDatasetFiles(dir, { trecRun: { pattern: /^trec_results.*\.txt$/, glob: 'trec_results*.txt', description: 'TREC run' } });
    expect(found).toEqual({ trecRun: join(dir, 'trec_results_dl20.txt') });
  });
});

describe('reading a TREC-DL-format folder', () => {
  it('reads qrels as qid -> docid -> grade', () => {
    const q = readTrecQrels(join(dl20Folder('qrels'), 'qrels.dl20-passage.txt'));
    expect([...q.keys()]).toEqual(['1001', '1002']);
    expect([...q.get('1001')!]).toEqual([
      ['d1', 2],
      ['d2', 0],
      ['d9', 3],
    ]);
  });

  it('reads the run: qids from the query object or the hits, query texts, hits in rank order', () => {
    const f = loadTrecDlFolder(dl20Folder('run'));
    expect(f.queries.map((q) => [q.qid, q.text])).toEqual([
      ['1001', 'what is a flea'],
      ['1002', 'solar wind speed'],
      ['1003', 'unjudged query'],
    ]);
    expect(f.queries[0]!.hits).toEqual([
      { docid: 'd2', content: 'a flea market', rank: 1, score: 10 },
      { docid: 'd1', content: 'fleas are insects', rank: 2, score: 9 },
      { docid: 'd3', content: 'dogs scratch', rank: 3, score: 8 },
    ]);
  });

  it('eval compression (loadRerankFolder) reads the same folder: judged queries, unique documents in first-stage order', () => {
    const data = loadRerankFolder(dl20Folder('compression'));
    expect(data.runFile).toBe('retrieve_results_dl20.json');
    expect(data.qrelsFile).toBe('qrels.dl20-passage.txt');
    expect(data.docIds).toEqual(['d2', 'd1', 'd3', 'd4']);
    expect(data.texts[3]).toBe('the solar wind blows at 400 km/s');
    expect(data.queries.map((q) => [q.qid, q.candidates])).toEqual([
      ['1001', [0, 1, 2]],
      ['1002', [3, 1]],
    ]);
  });

  it.skipIf(!existsSync('.cache/models/glove-ctx-100d'))('eval rerank runs on another TREC DL year (no ENOENT); first-stage figures as computed by hand', async () => {
    const dir = dl20Folder('rerank');
    const quiet = vi.spyOn(console, 'log').mockImplementation(() => {});
    const quietErr = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    let res: Record<string, unknown>;
    try {
      res = await runRerankEval(['--dataset', dir, '--scorers', 'dense']);
    } finally {
      quiet.mockRestore();
      quietErr.mockRestore();
    }
    expect(res.run).toBe(join(dir, 'retrieve_results_dl20.json'));
    expect(res.qrels).toBe(join(dir, 'qrels.dl20-passage.txt'));
    expect(res.queries).toBe(2); // 1003 has no judgements
    // 1001: d2 (0), d1 (2), d3 -> DCG 2/log2(3), ideal 3 + 2/log2(3); 1002: d4 (1) first -> 1.
    const ndcg1001 = 2 / Math.log2(3) / (3 + 2 / Math.log2(3));
    // relevant = grade >= 2: 1001 has d1 (rank 2) and d9 (not retrieved); 1002 has none.
    expect(res.first_stage).toEqual({ 'ndcg@10': expect.closeTo((ndcg1001 + 1) / 2, 12), 'mrr@10': 0.25, 'recall@10': 0.25 });
    expect(Object.keys(res.scorers as object)).toEqual(['dense']);
  });
});
