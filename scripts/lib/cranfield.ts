/**
 * The Cranfield 1400 collection (aerodynamics abstracts, 225 queries, graded judgements), as
 * distributed: cran.all.1400 (`.I n` / `.T` / `.A` / `.B` / `.W` fields), cran.qry (`.I` numbers
 * with gaps; the judged query number is the query's position, 1..225) and cranqrel
 * (`qid docid grade`, grade 1 = complete answer .. 4 = minimum interest, -1 = not relevant).
 * Metrics (nDCG@10 with these gains) are in ./metrics. The `.I`-record parsing is the Glasgow
 * format's (./glasgow); `npm run eval -- retrieval` reads Cranfield and other Glasgow collections
 * with any file names through ./retrieval-dataset.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { cleanText as clean, parseGlasgowRecords as parseRecords } from './glasgow';

export interface CranfieldData {
  /** text = title + ' ' + abstract (.T + .W), whitespace collapsed. */
  docs: { id: string; text: string }[];
  /** id = position in cran.qry, '1'..'225'. */
  queries: { id: string; text: string }[];
  /** qid -> docid -> gain (5 - grade for grades 1..4; -1 judgements are left out). */
  qrels: Map<string, Map<string, number>>;
}

export function loadCranfield(dir: string): CranfieldData {
  const docs = parseRecords(readFileSync(join(dir, 'cran.all.1400'), 'utf8')).map((r) => ({
    id: r.id,
    text: clean(`${clean(r.fields.get('T'))} ${clean(r.fields.get('W'))}`),
  }));
  const queries = parseRecords(readFileSync(join(dir, 'cran.qry'), 'utf8')).map((r, i) => ({
    id: String(i + 1),
    text: clean(r.fields.get('W')),
  }));
  const qrels = new Map<string, Map<string, number>>();
  for (const line of readFileSync(join(dir, 'cranqrel'), 'utf8').split(/\r?\n/)) {
    const parts = line.trim().split(/\s+/);
    if (parts.length < 3) continue;
    const [qid, docid, g] = parts as [string, string, string];
    const grade = Number(g);
    if (!(grade >= 1 && grade <= 4)) continue;
    let m = qrels.get(String(Number(qid)));
    if (!m) qrels.set(String(Number(qid)), (m = new Map()));
    m.set(String(Number(docid)), 5 - grade);
  }
  return { docs, queries, qrels };
}

/**
 * Records 471 and 995 of cran.all.1400 have no title and no abstract. The API refuses empty text
 * (as it should), so the demo and the benchmark send them with a placeholder that says so.
 */
export function withPlaceholders(docs: { id: string; text: string }[]): { id: string; text: string }[] {
  return docs.map((d) => (d.text ? d : { id: d.id, text: `cranfield record ${d.id} has no title or abstract` }));
}
