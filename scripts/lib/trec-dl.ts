/**
 * TREC-DL-format re-ranking folders, as in ../shared/datasets/trec-dl-2019-passage (any year laid
 * out the same way, e.g. `retrieve_results_dl20.json` + `qrels.dl20-passage.txt`):
 *
 *   retrieve_results*.json  first-stage run WITH the passage texts and the query texts:
 *                           [{query, hits: [{content, qid, docid, rank, score}]}]
 *                           (query may also be {text, qid}); the queries come from this file
 *   qrels*.txt              judgements, TREC format: `qid 0 docid grade` (graded 0-3 for DL)
 *
 * Other files (e.g. trec_results*.txt, the same run in TREC run format without text) are ignored.
 */
import { readFileSync } from 'node:fs';
import { findDatasetFiles, type FilePattern } from './dataset-files';
import type { Judgments } from './metrics';

export const TREC_DL_FILES = {
  run: { pattern: /^retrieve_results.*\.json$/, glob: 'retrieve_results*.json', description: 'first-stage run with query and passage texts' },
  qrels: { pattern: /^qrels.*\.txt$/, glob: 'qrels*.txt', description: 'TREC qrels: qid 0 docid grade' },
} satisfies Record<string, FilePattern>;

export interface TrecDlFiles {
  /** Path of the run (retrieve_results*.json). */
  run: string;
  /** Path of the qrels (qrels*.txt). */
  qrels: string;
}

/**
 * The run and qrels files of a TREC-DL-format folder, found by pattern (`chosen` names either
 * explicitly, e.g. from --run / --qrels). Throws naming the folder and the patterns when a file
 * is missing or ambiguous.
 */
export function findTrecDlFiles(dir: string, chosen: Partial<TrecDlFiles> = {}): TrecDlFiles {
  return findDatasetFiles(dir, TREC_DL_FILES, chosen);
}

/** TREC qrels (`qid iter docid grade`, whitespace-separated) -> qid -> docid -> grade. */
export function readTrecQrels(path: string): Map<string, Map<string, number>> {
  const out = new Map<string, Map<string, number>>();
  for (const line of readFileSync(path, 'utf8').split('\n')) {
    const f = line.trim().split(/\s+/);
    if (f.length < 4) continue;
    const row = out.get(f[0]!) ?? new Map<string, number>();
    row.set(f[2]!, Number(f[3]));
    out.set(f[0]!, row);
  }
  return out;
}

export interface TrecDlHit {
  docid: string;
  content: string;
  rank: number;
  /** First-stage score (NaN when the run has none). */
  score: number;
}

export interface TrecDlQuery {
  /** The query's qid ('' when the run names none). */
  qid: string;
  text: string;
  /** Candidates in first-stage order (sorted by rank, ties in file order). */
  hits: TrecDlHit[];
}

type RawHit = { content: string; qid?: string | number; docid: string | number; rank: number; score?: number };
type RawEntry = { query: string | { text: string; qid?: string | number }; hits: RawHit[] };

/** A retrieve_results*.json run: one entry per query, in file order. */
export function readTrecDlRun(path: string): TrecDlQuery[] {
  const run = JSON.parse(readFileSync(path, 'utf8')) as RawEntry[];
  if (!Array.isArray(run)) throw new Error(`${path}: expected a JSON array of {query, hits}`);
  return run.map((e) => ({
    qid: String((typeof e.query === 'object' ? e.query.qid : undefined) ?? e.hits[0]?.qid ?? ''),
    text: typeof e.query === 'string' ? e.query : e.query.text,
    hits: [...e.hits]
      .sort((a, b) => a.rank - b.rank)
      .map((h) => ({ docid: String(h.docid), content: h.content, rank: h.rank, score: h.score ?? Number.NaN })),
  }));
}

export interface TrecDlFolder {
  dir: string;
  files: TrecDlFiles;
  queries: TrecDlQuery[];
  qrels: Map<string, Judgments>;
}

/** Finds and reads a TREC-DL-format folder. */
export function loadTrecDlFolder(dir: string, chosen: Partial<TrecDlFiles> = {}): TrecDlFolder {
  const files = findTrecDlFiles(dir, chosen);
  return { dir, files, queries: readTrecDlRun(files.run), qrels: readTrecQrels(files.qrels) };
}
