/**
 * The Glasgow (SMART) test-collection format of Cranfield, CACM, CISI, MED, ADI, ...: a documents
 * file and a queries file of `.I n` records whose fields are lines `.T` (title), `.A` (authors),
 * `.B` (bibliography), `.W` (text) and others (`.K`, `.N`, `.X`, `.C` ... are tolerated and
 * ignored), plus a judgments file of 2 to 4 numeric columns. File names vary between collections
 * (cran.all.1400 / cran.qry / cranqrel, cacm.all / query.text / qrels.text, CISI.ALL / CISI.QRY /
 * CISI.REL); scripts/lib/retrieval-dataset.ts finds them by pattern and content.
 *
 * Judgment lines (per line; `#` comments and blank lines skipped):
 * - 2 columns `qid docid`: relevant, gain 1;
 * - 3 columns `qid docid grade`: Cranfield's scale (1 = complete answer .. 4 = minimum interest,
 *   -1 = not relevant): gain 5 - grade for grades 1..4, 0 (judged not relevant) otherwise. A file
 *   whose grades are all the same is binary relevance, and nDCG does not depend on the constant;
 * - 4 columns: `qid 0 docid rel` (TREC qrels, MED.REL) when the second column is 0 on every 4-column
 *   line of the file: gain = rel (negative -> 0); otherwise `qid docid x y` (CACM's qrels.text,
 *   CISI.REL): relevant, gain 1.
 * The same (query, document) judged twice keeps the larger gain.
 *
 * Query numbering: CACM, CISI and MED judge queries by their `.I` number; cranqrel numbers
 * Cranfield's queries 1..225 by their position in cran.qry, whose `.I` numbers have gaps (001,
 * 002, 004, 008, ...). `glasgowQueryIds` decides per collection from the judgments which
 * numbering fits, and says which it chose.
 */

export interface GlasgowRecord {
  /** The `.I` number as written, without leading zeros ("001" -> "1"). */
  id: string;
  /** Field letter -> its lines joined by a space (not yet whitespace-collapsed). */
  fields: Map<string, string>;
}

/** Splits a `.I`-delimited file into records of field letter -> text; text on a marker line belongs to its field. */
export function parseGlasgowRecords(text: string): GlasgowRecord[] {
  const records: GlasgowRecord[] = [];
  let field: string | null = null;
  for (const line of text.split(/\r?\n/)) {
    const marker = /^\.([A-Z])(?:\s+(.*?))?\s*$/.exec(line);
    if (marker) {
      if (marker[1] === 'I') {
        const raw = (marker[2] ?? '').trim();
        records.push({ id: /^\d+$/.test(raw) ? String(Number(raw)) : raw, fields: new Map() });
        field = null;
      } else {
        field = marker[1]!;
        const rec = records.at(-1);
        if (rec && marker[2]) rec.fields.set(field, (rec.fields.get(field) ?? '') + ' ' + marker[2]);
      }
      continue;
    }
    const rec = records.at(-1);
    if (!rec || field === null) continue;
    rec.fields.set(field, (rec.fields.get(field) ?? '') + ' ' + line);
  }
  return records;
}

/** Collapses whitespace and trims. */
export const cleanText = (s: string | undefined): string => (s ?? '').replace(/\s+/g, ' ').trim();

/** A document's text: title and text (`.T` + `.W`), the convention of the Cranfield evaluations here. */
export function glasgowDocumentText(r: GlasgowRecord): string {
  return cleanText(`${cleanText(r.fields.get('T'))} ${cleanText(r.fields.get('W'))}`);
}

/** A query's text: its `.W` field, or `.T` when it has no `.W`. */
export function glasgowQueryText(r: GlasgowRecord): string {
  return cleanText(r.fields.get('W')) || cleanText(r.fields.get('T'));
}

export interface Judgment {
  qid: string;
  docid: string;
  /** 0 = judged not relevant. */
  gain: number;
}

export interface ParsedJudgments {
  judgments: Judgment[];
  /** How the columns were read, for the report. */
  layout: string;
}

const NUM = /^-?\d+(?:\.\d+)?$/;
const norm = (s: string) => (/^\d+$/.test(s) ? String(Number(s)) : s);

/** Whether a line is a judgment line: 2 to 4 numeric columns. */
export function isJudgmentLine(line: string): boolean {
  const parts = line.trim().split(/\s+/);
  return parts.length >= 2 && parts.length <= 4 && parts.every((p) => NUM.test(p));
}

/** Reads a judgments file of 2-4 numeric columns (see the module comment for the gains). */
export function parseJudgments(text: string, source = 'judgments'): ParsedJudgments {
  const rows: { parts: string[]; line: number }[] = [];
  text.split(/\r?\n/).forEach((raw, i) => {
    const line = raw.trim();
    if (!line || line.startsWith('#')) return;
    const parts = line.split(/\s+/);
    if (!isJudgmentLine(line)) throw new Error(`${source}:${i + 1}: a judgment line has 2 to 4 numeric columns (qid docid [grade]), got "${line.slice(0, 80)}"`);
    rows.push({ parts, line: i + 1 });
  });
  const four = rows.filter((r) => r.parts.length === 4);
  const trecLayout = four.length > 0 && four.every((r) => Number(r.parts[1]) === 0);
  const counts = new Map<number, number>();
  for (const r of rows) counts.set(r.parts.length, (counts.get(r.parts.length) ?? 0) + 1);
  const best = new Map<string, Judgment>();
  for (const { parts } of rows) {
    let qid: string, docid: string, gain: number;
    if (parts.length === 2) [qid, docid, gain] = [parts[0]!, parts[1]!, 1];
    else if (parts.length === 3) {
      const grade = Number(parts[2]);
      [qid, docid, gain] = [parts[0]!, parts[1]!, grade >= 1 && grade <= 4 ? 5 - grade : 0];
    } else if (trecLayout) [qid, docid, gain] = [parts[0]!, parts[2]!, Math.max(0, Number(parts[3]))];
    else [qid, docid, gain] = [parts[0]!, parts[1]!, 1];
    const j = { qid: norm(qid), docid: norm(docid), gain };
    const key = `${j.qid}\u0000${j.docid}`;
    const prev = best.get(key);
    if (!prev || prev.gain < gain) best.set(key, j);
  }
  const layout = [...counts.entries()]
    .sort((a, b) => a[0] - b[0])
    .map(([n, c]) =>
      n === 2 ? `${c} lines "qid docid" (gain 1)`
      : n === 3 ? `${c} lines "qid docid grade" (Cranfield grades 1..4 -> gain 5 - grade, -1 -> 0)`
      : trecLayout ? `${c} lines "qid 0 docid rel" (gain rel)`
      : `${c} lines "qid docid x y" (gain 1)`,
    )
    .join(', ');
  return { judgments: [...best.values()], layout };
}

/**
 * The query ids the judgments use: the `.I` numbers, or positions 1..N when that fits the
 * judged query numbers better (cranqrel). Ties go to the `.I` numbers.
 */
export function glasgowQueryIds(records: GlasgowRecord[], judgedQids: Iterable<string>): { ids: string[]; numbering: 'number' | 'position'; note: string } {
  const byNumber = new Set(records.map((r) => r.id));
  const byPosition = new Set(records.map((_, i) => String(i + 1)));
  const judged = [...new Set(judgedQids)];
  const fitNumber = judged.filter((q) => byNumber.has(q)).length;
  const fitPosition = judged.filter((q) => byPosition.has(q)).length;
  const gaps = records.some((r, i) => r.id !== String(i + 1));
  if (fitPosition > fitNumber) {
    return {
      ids: records.map((_, i) => String(i + 1)),
      numbering: 'position',
      note: `queries numbered 1..${records.length} by position, as the judgments number them (${fitPosition} of ${judged.length} judged query ids fit positions, ${fitNumber} fit the .I numbers${gaps ? ', which have gaps' : ''})`,
    };
  }
  return {
    ids: records.map((r) => r.id),
    numbering: 'number',
    note: `queries identified by their .I numbers (${fitNumber} of ${judged.length} judged query ids fit them${gaps ? '; the numbers have gaps' : ''})`,
  };
}
