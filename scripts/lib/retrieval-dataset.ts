/**
 * A full-retrieval test collection in a folder, in either of two formats, told apart by content:
 * - **TREC ad hoc** (../shared/datasets/vaswani): a documents file of `<DOC><DOCNO>`, a topics
 *   file of `<top><num>`, a qrels file `qid 0 docid rel` (scripts/lib/vaswani.ts);
 * - **Glasgow** (../shared/datasets/cranfield and CACM, CISI, MED, ...): a documents file and a
 *   queries file of `.I` records, a judgments file of 2-4 numeric columns (scripts/lib/glasgow.ts).
 * Files are found by their content first (the start of every file is read); when several files
 * could play one role, name patterns pick (e.g. `*qry*` for the queries), and otherwise the error
 * lists them. Any role can be named explicitly (`chosen`, the CLI's --docs / --queries / --qrels).
 */
import { closeSync, openSync, readFileSync, readSync, readdirSync, statSync } from 'node:fs';
import { basename, join } from 'node:path';
import { cleanText, glasgowDocumentText, glasgowQueryIds, glasgowQueryText, isJudgmentLine, parseGlasgowRecords, parseJudgments } from './glasgow';
import { parseTrecDocuments, parseTrecTopics } from './vaswani';

export type RetrievalFormat = 'trec' | 'glasgow';
export type Role = 'docs' | 'queries' | 'qrels';

export interface RetrievalDataset {
  format: RetrievalFormat;
  dir: string;
  files: Record<Role, string>;
  /** Non-empty texts (an empty record gets a placeholder that names it, see `notes`). */
  docs: { id: string; text: string }[];
  queries: { id: string; text: string }[];
  /** qid -> docid -> gain (0 = judged not relevant). */
  qrels: Map<string, Map<string, number>>;
  /** How the files were read: judgment columns and gains, query numbering, placeholders, skipped judgments. */
  notes: string[];
}

export class RetrievalDatasetError extends Error {
  override name = 'RetrievalDatasetError';
}

type Kind = 'trec-docs' | 'trec-topics' | 'glasgow-records' | 'judgments' | 'other';

/** What a file's first 64 KiB look like. */
export function sniffFile(path: string): Kind {
  const fd = openSync(path, 'r');
  let head: string;
  try {
    const buf = Buffer.alloc(64 * 1024);
    head = buf.subarray(0, readSync(fd, buf, 0, buf.length, 0)).toString('utf8');
  } finally {
    closeSync(fd);
  }
  if (/<DOC>/i.test(head) && /<DOCNO>/i.test(head)) return 'trec-docs';
  if (/<top>/i.test(head) && /<num>/i.test(head)) return 'trec-topics';
  const lines = head.split(/\r?\n/).filter((l) => l.trim() !== '');
  if (lines.length === 0) return 'other';
  if (/^\.I\s+\S+/.test(lines[0]!)) return 'glasgow-records';
  // The last line of the head may be cut: judge the complete ones.
  const complete = head.length === 64 * 1024 ? lines.slice(0, -1) : lines;
  if (complete.length > 0 && complete.slice(0, 200).every((l) => l.trim().startsWith('#') || isJudgmentLine(l))) return 'judgments';
  return 'other';
}

const ROLE_NAMES: Record<RetrievalFormat, Record<Role, { pattern: RegExp; glob: string; content: string }>> = {
  trec: {
    docs: { pattern: /doc|corpus|collection/i, glob: '*doc*', content: '<DOC><DOCNO>n</DOCNO>text</DOC>' },
    queries: { pattern: /quer|topic/i, glob: '*quer* or *topic*', content: '<top><num>n</num><title>text</title></top>' },
    qrels: { pattern: /qrel|rel/i, glob: '*qrel*', content: 'lines "qid 0 docid rel"' },
  },
  glasgow: {
    docs: { pattern: /\ball\b|\.all|doc/i, glob: '*.all* or *doc*', content: '.I records with .T / .W fields' },
    queries: { pattern: /qry|quer/i, glob: '*qry* or *quer*', content: '.I records with .W fields' },
    qrels: { pattern: /qrel|\.rel\b|rel/i, glob: '*qrel* or *.rel', content: 'lines of 2-4 numeric columns "qid docid [grade]"' },
  },
};

function describeFormats(): string {
  return (Object.keys(ROLE_NAMES) as RetrievalFormat[])
    .map((f) => `${f === 'trec' ? 'TREC ad hoc' : 'Glasgow'}: ${(['docs', 'queries', 'qrels'] as Role[]).map((r) => `${r} ${ROLE_NAMES[f][r].glob} holding ${ROLE_NAMES[f][r].content}`).join('; ')}`)
    .join(' | ');
}

/** One file per role, by content, then by name pattern. */
function pick(dir: string, format: RetrievalFormat, role: Role, candidates: string[], listing: string): string {
  const { pattern, glob, content } = ROLE_NAMES[format][role];
  if (candidates.length === 1) return candidates[0]!;
  if (candidates.length === 0) {
    throw new RetrievalDatasetError(`${dir}: looks like the ${format === 'trec' ? 'TREC ad hoc' : 'Glasgow'} format but no file holds the ${role} (${content}, e.g. ${glob}); the folder holds ${listing}`);
  }
  const named = candidates.filter((c) => pattern.test(basename(c)));
  if (named.length === 1) return named[0]!;
  throw new RetrievalDatasetError(`${dir}: ${candidates.length} files could hold the ${role} (${candidates.map((c) => basename(c)).join(', ')}; by name ${glob}: ${named.length ? named.map((c) => basename(c)).join(', ') : 'none'}); name one with --${role} FILE`);
}

/** Which format the folder is in and which file plays which role. */
export function findRetrievalFiles(dir: string, chosen: Partial<Record<Role, string>> = {}): { format: RetrievalFormat; files: Record<Role, string> } {
  let names: string[];
  try {
    if (!statSync(dir).isDirectory()) throw new RetrievalDatasetError(`${dir} is not a folder`);
    names = readdirSync(dir).filter((n) => statSync(join(dir, n)).isFile()).sort();
  } catch (err) {
    if (err instanceof RetrievalDatasetError) throw err;
    throw new RetrievalDatasetError(`dataset folder ${dir} cannot be read (${(err as Error).message})`);
  }
  const paths = names.map((n) => join(dir, n));
  const given = (r: Role) => (chosen[r] ? (chosen[r]!.includes('/') ? chosen[r]! : join(dir, chosen[r]!)) : undefined);
  const kinds = new Map(paths.map((p) => [p, sniffFile(p)]));
  for (const r of ['docs', 'queries', 'qrels'] as Role[]) {
    const g = given(r);
    if (g && !kinds.has(g)) kinds.set(g, sniffFile(g));
  }
  const listing = paths.length ? paths.map((p) => `${basename(p)} (${kinds.get(p)})`).join(', ') : 'nothing';
  const of = (k: Kind) => paths.filter((p) => kinds.get(p) === k);
  const givenKinds = (['docs', 'queries'] as Role[]).map(given).filter(Boolean).map((p) => kinds.get(p!));
  const trec = of('trec-docs').length > 0 || of('trec-topics').length > 0 || givenKinds.some((k) => k === 'trec-docs' || k === 'trec-topics');
  const glasgow = of('glasgow-records').length > 0 || givenKinds.includes('glasgow-records');
  if (!trec && !glasgow) {
    throw new RetrievalDatasetError(`${dir}: no retrieval dataset found. Expected one of ${describeFormats()}. The folder holds ${listing}`);
  }
  const format: RetrievalFormat = trec ? 'trec' : 'glasgow';
  const qrels = given('qrels') ?? pick(dir, format, 'qrels', of('judgments'), listing);
  if (format === 'trec') {
    return {
      format,
      files: { docs: given('docs') ?? pick(dir, format, 'docs', of('trec-docs'), listing), queries: given('queries') ?? pick(dir, format, 'queries', of('trec-topics'), listing), qrels },
    };
  }
  // Glasgow: documents and queries are both .I-record files; names, then size, tell them apart.
  const records = of('glasgow-records').filter((p) => p !== given('docs') && p !== given('queries'));
  let docs = given('docs');
  let queries = given('queries');
  if (!queries) {
    const named = records.filter((p) => ROLE_NAMES.glasgow.queries.pattern.test(basename(p)) && p !== docs);
    if (named.length === 1) queries = named[0];
  }
  if (!docs) {
    const rest = records.filter((p) => p !== queries);
    const named = rest.filter((p) => ROLE_NAMES.glasgow.docs.pattern.test(basename(p)));
    if (rest.length === 1) docs = rest[0];
    else if (named.length === 1) docs = named[0];
  }
  if (!queries || !docs) {
    const rest = records.filter((p) => p !== queries && p !== docs);
    if (rest.length === 2 && !queries && !docs) {
      // Neither name tells: the documents file has more records.
      const [a, b] = rest.map((p) => ({ p, n: parseGlasgowRecords(readFileSync(p, 'utf8')).length }));
      [docs, queries] = a!.n >= b!.n ? [a!.p, b!.p] : [b!.p, a!.p];
    } else if (rest.length === 1) {
      if (!docs) docs = rest[0];
      else queries = rest[0];
    } else {
      const missing = !docs ? 'docs' : 'queries';
      const { glob, content } = ROLE_NAMES.glasgow[missing];
      throw new RetrievalDatasetError(
        rest.length === 0
          ? `${dir}: looks like the Glasgow format but no file holds the ${missing} (${content}, e.g. ${glob}); the folder holds ${listing}`
          : `${dir}: ${rest.length} .I-record files could hold the ${missing} (${rest.map((p) => basename(p)).join(', ')}; by name ${glob}); name them with --docs FILE --queries FILE`,
      );
    }
  }
  return { format, files: { docs: docs!, queries: queries!, qrels } };
}

/** Reads a folder in either format (see the module comment). */
export function loadRetrievalDataset(dir: string, chosen: Partial<Record<Role, string>> = {}): RetrievalDataset {
  const { format, files } = findRetrievalFiles(dir, chosen);
  const notes: string[] = [];
  const { judgments, layout } = parseJudgments(readFileSync(files.qrels, 'utf8'), files.qrels);
  notes.push(`judgments ${basename(files.qrels)}: ${layout}`);
  let docs: { id: string; text: string }[];
  let queries: { id: string; text: string }[];
  if (format === 'trec') {
    docs = parseTrecDocuments(readFileSync(files.docs, 'utf8'), files.docs);
    queries = parseTrecTopics(readFileSync(files.queries, 'utf8'), files.queries);
  } else {
    docs = parseGlasgowRecords(readFileSync(files.docs, 'utf8')).map((r) => ({ id: r.id, text: glasgowDocumentText(r) }));
    const qrecs = parseGlasgowRecords(readFileSync(files.queries, 'utf8'));
    const numbering = glasgowQueryIds(qrecs, judgments.map((j) => j.qid));
    notes.push(numbering.note);
    queries = qrecs.map((r, i) => ({ id: numbering.ids[i]!, text: glasgowQueryText(r) }));
  }
  if (docs.length === 0) throw new RetrievalDatasetError(`${files.docs}: no documents found`);
  if (queries.length === 0) throw new RetrievalDatasetError(`${files.queries}: no queries found`);
  const dupDoc = firstDuplicate(docs.map((d) => d.id));
  if (dupDoc) throw new RetrievalDatasetError(`${files.docs}: document id ${dupDoc} appears twice`);
  const dupQuery = firstDuplicate(queries.map((q) => q.id));
  if (dupQuery) throw new RetrievalDatasetError(`${files.queries}: query id ${dupQuery} appears twice`);

  const empty = docs.filter((d) => d.text === '').map((d) => d.id);
  if (empty.length) {
    notes.push(`${empty.length} document(s) without text (${empty.slice(0, 10).join(', ')}${empty.length > 10 ? ', ...' : ''}) are ingested with a placeholder naming them (the API refuses empty text)`);
    docs = docs.map((d) => (d.text ? d : { id: d.id, text: `record ${d.id} has no text` }));
  }
  const emptyQueries = queries.filter((q) => cleanText(q.text) === '').map((q) => q.id);
  if (emptyQueries.length) {
    notes.push(`${emptyQueries.length} quer(ies) without text left out (${emptyQueries.join(', ')})`);
    queries = queries.filter((q) => q.text !== '');
  }
  const docIds = new Set(docs.map((d) => d.id));
  const queryIds = new Set(queries.map((q) => q.id));
  const qrels = new Map<string, Map<string, number>>();
  let unknownDoc = 0, unknownQuery = 0;
  for (const j of judgments) {
    if (!queryIds.has(j.qid)) { unknownQuery++; continue; }
    if (!docIds.has(j.docid)) { unknownDoc++; continue; }
    let m = qrels.get(j.qid);
    if (!m) qrels.set(j.qid, (m = new Map()));
    m.set(j.docid, j.gain);
  }
  if (unknownQuery || unknownDoc) notes.push(`judgments skipped: ${unknownQuery} name a query not in ${basename(files.queries)}, ${unknownDoc} a document not in ${basename(files.docs)}`);
  return { format, dir, files, docs, queries, qrels, notes };
}

function firstDuplicate(ids: string[]): string | undefined {
  const seen = new Set<string>();
  for (const id of ids) {
    if (seen.has(id)) return id;
    seen.add(id);
  }
  return undefined;
}
