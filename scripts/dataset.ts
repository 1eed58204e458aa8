/**
 * `npm run --silent dataset -- cranfield <documents|judgments|queries>`: the vendored Cranfield
 * collection (data/cranfield) in the API's own formats, on stdout, for the README's quick start:
 *
 *   documents  NDJSON, one `{"id","text"}` per line: the body of POST /v1/collections/{id}/documents
 *              (records 471 and 995 have no text; they get a placeholder, as in the demo)
 *   judgments  JSON `{"queries":[{"id","text","judgments":[{"doc","grade"}]}]}`: the body of
 *              POST /v1/collections/{id}/judgments (grade = Cranfield's gain, 4 most relevant .. 1)
 *   queries    NDJSON, one `{"id","text"}` per line
 */
import path from 'node:path';
import { loadCranfield, withPlaceholders } from './lib/cranfield';
import { parseCliOrExit } from './lib/cli';

const USAGE = 'usage: npm run --silent dataset -- cranfield <documents|judgments|queries>';
const WHAT = ['documents', 'judgments', 'queries'] as const;

function main(): number {
  const { positionals } = parseCliOrExit('dataset', USAGE, process.argv.slice(2), {}, { positionals: true });
  const [name, what] = positionals;
  if (name !== 'cranfield' || !WHAT.includes(what as (typeof WHAT)[number]) || positionals.length !== 2) {
    console.error(USAGE);
    return 2;
  }
  const cran = loadCranfield(path.resolve(__dirname, '..', 'data', 'cranfield'));
  let out: string;
  if (what === 'documents') out = withPlaceholders(cran.docs).map((d) => JSON.stringify({ id: d.id, text: d.text })).join('\n') + '\n';
  else if (what === 'queries') out = cran.queries.map((q) => JSON.stringify({ id: q.id, text: q.text })).join('\n') + '\n';
  else {
    const queries = cran.queries
      .filter((q) => (cran.qrels.get(q.id)?.size ?? 0) > 0)
      .map((q) => ({ id: q.id, text: q.text, judgments: [...cran.qrels.get(q.id)!].map(([doc, grade]) => ({ doc, grade })) }));
    out = JSON.stringify({ queries }) + '\n';
  }
  process.stdout.write(out);
  return 0;
}

// `| head` closing the pipe early is not an error.
process.stdout.on('error', (err: NodeJS.ErrnoException) => {
  if (err.code === 'EPIPE') process.exit(0);
  throw err;
});
process.exitCode = main();
