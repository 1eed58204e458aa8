/**
 * Relevance judgments in three forms, all to one list of judged queries:
 * - JSON: `[{ "id", "text", "judgments": [{ "doc", "grade" }] }]` or `{ "queries": [...] }`;
 * - NDJSON (application/x-ndjson): one such query per line;
 * - TREC, as JSON `{ "qrels": "...", "topics": "..." }`: qrels lines `qid iter docid grade`
 *   (whitespace-separated, grade an integer; negative grades count as 0), topics either TREC
 *   `<top><num>..</num><title>..</title>` records or `qid<TAB>text` lines. A judged query without
 *   a topic is a 400 naming it; topics without judgments are left out.
 * Errors are ValidationErrors naming the line or field.
 */
import { JudgedQuerySchema, JudgmentsJsonSchema, MAX_JUDGED_QUERIES, ValidationError, type JudgedQuery } from '@lateral/shared';
import { zodIssues } from '../common/zod-issues';

const NDJSON = /^application\/(x-ndjson|ndjson|jsonl)\b/i;

export function parseJudgments(body: string, contentType: string | undefined): JudgedQuery[] {
  if (!body || body.trim() === '') throw new ValidationError('request body is empty: expected judgments (JSON, NDJSON or TREC qrels + topics)', [{ field: 'body', message: 'required' }]);
  let queries: JudgedQuery[];
  if (contentType && NDJSON.test(contentType)) {
    queries = [];
    const lines = body.split('\n');
    lines.forEach((line, i) => {
      if (line.trim() === '') return;
      let raw: unknown;
      try {
        raw = JSON.parse(line);
      } catch (err) {
        throw new ValidationError(`malformed NDJSON on line ${i + 1}: ${(err as Error).message}`, [{ field: `line ${i + 1}`, message: 'not JSON' }]);
      }
      const q = JudgedQuerySchema.safeParse(raw);
      if (!q.success) throw new ValidationError(`invalid judged query on line ${i + 1}`, zodIssues(q.error, `line ${i + 1}`));
      queries.push(q.data);
    });
    if (queries.length > MAX_JUDGED_QUERIES) throw new ValidationError(`at most ${MAX_JUDGED_QUERIES} judged queries per request, got ${queries.length}`, [{ field: 'body', message: `at most ${MAX_JUDGED_QUERIES} queries` }]);
  } else {
    let raw: unknown;
    try {
      raw = JSON.parse(body);
    } catch (err) {
      throw new ValidationError(`malformed JSON: ${(err as Error).message}`, [{ field: 'body', message: 'not JSON' }]);
    }
    // The union's member is chosen by the body's shape, so an error names the field inside it.
    const [arrayForm, queriesForm, trecForm] = JudgmentsJsonSchema.options;
    const obj = raw !== null && typeof raw === 'object' && !Array.isArray(raw) ? (raw as Record<string, unknown>) : null;
    const form = Array.isArray(raw) ? arrayForm : obj && 'queries' in obj ? queriesForm : obj && ('qrels' in obj || 'topics' in obj) ? trecForm : null;
    if (!form) throw new ValidationError('invalid judgments: expected an array of {id, text, judgments}, {queries: [...]} or {qrels, topics}', [{ field: 'body', message: 'array, {queries} or {qrels, topics}' }]);
    const parsed = form.safeParse(raw);
    if (!parsed.success) throw new ValidationError('invalid judgments', zodIssues(parsed.error));
    const v = parsed.data;
    queries = Array.isArray(v) ? v : 'queries' in v ? v.queries : fromTrec(v.qrels, v.topics);
  }
  if (queries.length === 0) throw new ValidationError('no judged queries in the body', [{ field: 'body', message: 'at least one judged query' }]);
  const seen = new Set<string>();
  for (const q of queries) {
    if (seen.has(q.id)) throw new ValidationError(`query id '${q.id.slice(0, 100)}' appears twice`, [{ field: 'queries[].id', message: 'duplicate query id' }]);
    seen.add(q.id);
  }
  return queries;
}

/** TREC qrels + topics -> judged queries (topics order; grades of one (query, doc) pair: the last line wins). */
export function fromTrec(qrels: string, topics: string): JudgedQuery[] {
  const judged = new Map<string, Map<string, number>>();
  qrels.split('\n').forEach((line, i) => {
    const t = line.trim();
    if (t === '' || t.startsWith('#')) return;
    const cols = t.split(/\s+/);
    if (cols.length !== 4 || !/^-?\d+$/.test(cols[3])) {
      throw new ValidationError(`qrels line ${i + 1}: expected 'qid iteration docid grade' with an integer grade, got '${t.slice(0, 80)}'`, [{ field: `qrels line ${i + 1}`, message: 'qid iter docid grade' }]);
    }
    const [qid, , doc, g] = cols;
    if (!judged.has(qid)) judged.set(qid, new Map());
    judged.get(qid)!.set(doc, Math.max(0, Math.min(100, Number(g))));
  });
  const texts = new Map<string, string>();
  if (/<top>/i.test(topics)) {
    const re = /<top>([\s\S]*?)<\/top>/gi;
    const field = (b: string, tag: string) => new RegExp(`<${tag}>([\\s\\S]*?)(?=<|$)`, 'i').exec(b)?.[1]?.replace(/\s+/g, ' ').trim();
    for (let m = re.exec(topics); m; m = re.exec(topics)) {
      const num = field(m[1], 'num')?.replace(/^number:\s*/i, '');
      if (!num) throw new ValidationError(`topics: a <top> without <num> near offset ${m.index}`, [{ field: 'topics', message: '<num> required' }]);
      const text = (field(m[1], 'title') ?? '').replace(/^topic:\s*/i, '') || (field(m[1], 'desc') ?? '').replace(/^description:\s*/i, '');
      texts.set(num, text);
    }
  } else {
    topics.split('\n').forEach((line, i) => {
      if (line.trim() === '') return;
      const tab = line.indexOf('\t');
      if (tab < 1) throw new ValidationError(`topics line ${i + 1}: expected 'qid<TAB>text' or TREC <top> records`, [{ field: `topics line ${i + 1}`, message: 'qid<TAB>text' }]);
      texts.set(line.slice(0, tab).trim(), line.slice(tab + 1).trim());
    });
  }
  const out: JudgedQuery[] = [];
  for (const [qid, docs] of judged) {
    const text = texts.get(qid);
    if (text === undefined) throw new ValidationError(`qrels judge query '${qid.slice(0, 100)}', which has no topic`, [{ field: 'topics', message: `no topic ${qid.slice(0, 100)}` }]);
    const q = JudgedQuerySchema.safeParse({ id: qid, text, judgments: [...docs].map(([doc, grade]) => ({ doc, grade })) });
    if (!q.success) throw new ValidationError(`invalid judged query '${qid.slice(0, 100)}'`, zodIssues(q.error, `query ${qid.slice(0, 100)}`));
    out.push(q.data);
  }
  return out;
}
