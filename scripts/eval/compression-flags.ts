/**
 * The command line of `npm run eval -- compression` (compression.ts) and of the sweeps it runs
 * (compression-trec-dl.ts, compression-pooling.ts, compression-aesi.ts): one strict parseArgs
 * (scripts/lib/cli.ts) over every flag they read, so an unknown or misspelt flag is refused.
 */
import { parseCli } from '../lib/cli';

export const COMPRESSION_USAGE = `usage: npm run eval -- compression [--dataset DIR (alias --data)] [--json] [...]
  without --dataset: the Cranfield all-documents sweep (--model DIR)
  --dataset DIR            the TREC-DL re-ranking sweep on a TREC-DL-format folder
  --run FILE, --qrels FILE the files, when several in DIR match
  --model DIR              the token model (.cache/models/glove-ctx-100d; pooling sweep: .cache/models/minilm-l6-384)
  --static-model DIR       the static embeddings of side information (when the model has no table of its own)
  --settings a,b           only the settings whose names start so
  --docs-per-segment N (1000), --sample-tokens N (20000), --seed N (20261121), --quick, --plot out.svg
  --pool-factors 1,2,3,4   the token pooling sweep instead (--pool-codecs fp32,fp16,eden-4b-token)
  --aesi c:bits,...        the AESI comparison (--aesi-width 1536, --aesi-epochs 10, --aesi-patience 2, --aesi-batch 256)`;

export const COMPRESSION_OPTIONS = {
  dataset: { type: 'string' },
  data: { type: 'string' },
  run: { type: 'string' },
  qrels: { type: 'string' },
  model: { type: 'string' },
  'static-model': { type: 'string' },
  plot: { type: 'string' },
  quick: { type: 'boolean' },
  json: { type: 'boolean' },
  'docs-per-segment': { type: 'string', default: '1000' },
  'sample-tokens': { type: 'string', default: '20000' },
  seed: { type: 'string', default: '20261121' },
  settings: { type: 'string' },
  'pool-factors': { type: 'string' },
  'pool-codecs': { type: 'string', default: 'fp32,fp16,eden-4b-token' },
  aesi: { type: 'string' },
  'aesi-width': { type: 'string', default: '1536' },
  'aesi-epochs': { type: 'string', default: '10' },
  'aesi-patience': { type: 'string', default: '2' },
  'aesi-batch': { type: 'string', default: '256' },
} as const;

/** The flags' values (defaults filled in); CliUsageError for an unknown flag or a missing value. */
export function compressionFlags(args: readonly string[]) {
  return parseCli(args, COMPRESSION_OPTIONS).values;
}

