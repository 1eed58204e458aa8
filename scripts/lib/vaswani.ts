/**
 * TREC ad hoc files, the layout of ../shared/datasets/vaswani (NPL physics abstracts as Terrier
 * ships them): documents `<DOC><DOCNO>n</DOCNO>text</DOC>`, topics
 * `<top><num>n</num><title>text</title></top>` and qrels `qid iter docid rel`.
 * Other tags inside a document (`<TEXT>`, `<HEADLINE>`, ...) are dropped, their text kept; a topic
 * without a title uses its `<desc>`. scripts/lib/retrieval-dataset.ts finds the files.
 */

const decodeEntities = (s: string) =>
  s.replace(/&(amp|lt|gt|quot|apos|#\d+);/g, (m, e: string) =>
    e === 'amp' ? '&' : e === 'lt' ? '<' : e === 'gt' ? '>' : e === 'quot' ? '"' : e === 'apos' ? "'" : String.fromCodePoint(Number(e.slice(1))),
  );
const clean = (s: string) => decodeEntities(s.replace(/<[^>]*>/g, ' ')).replace(/\s+/g, ' ').trim();
const norm = (s: string) => (/^\d+$/.test(s) ? String(Number(s)) : s);

/** Every `<DOC>` of a TREC documents file: id = DOCNO (leading zeros dropped), text = the rest, tags removed. */
export function parseTrecDocuments(text: string, source = 'documents'): { id: string; text: string }[] {
  const docs: { id: string; text: string }[] = [];
  const re = /<DOC>([\s\S]*?)<\/DOC>/gi;
  for (let m = re.exec(text); m; m = re.exec(text)) {
    const body = m[1]!;
    const no = /<DOCNO>\s*([^<]*?)\s*<\/DOCNO>/i.exec(body);
    if (!no || !no[1]) throw new Error(`${source}: a <DOC> without <DOCNO> near offset ${m.index}`);
    docs.push({ id: norm(no[1]), text: clean(body.replace(no[0], ' ')) });
  }
  return docs;
}

/** Every `<top>` of a TREC topics file: id = num (a leading "Number:" dropped), text = title, or desc when there is no title. */
export function parseTrecTopics(text: string, source = 'topics'): { id: string; text: string }[] {
  const out: { id: string; text: string }[] = [];
  const re = /<top>([\s\S]*?)<\/top>/gi;
  const field = (body: string, tag: string) => {
    // Old TREC topics do not close their fields: a field runs to the next tag.
    const m = new RegExp(`<${tag}>([\\s\\S]*?)(?=<|$)`, 'i').exec(body);
    return m ? m[1]! : undefined;
  };
  for (let m = re.exec(text); m; m = re.exec(text)) {
    const body = m[1]!;
    const num = field(body, 'num');
    if (num === undefined) throw new Error(`${source}: a <top> without <num> near offset ${m.index}`);
    const id = norm(clean(num).replace(/^number:\s*/i, ''));
    const title = clean(field(body, 'title') ?? '').replace(/^topic:\s*/i, '');
    const desc = clean(field(body, 'desc') ?? '').replace(/^description:\s*/i, '');
    out.push({ id, text: title || desc });
  }
  return out;
}
