/** The scale bench's command line (scale.ts): its flags, usage and the settings read from them (scripts/lib/cli.ts). */
import path from 'node:path';
import { CliUsageError, intFlag, parseCliOrExit } from '../lib/cli';

import { IMAGE_ALLOCATOR_ENV, ROOT } from './scale-harness';

/** The search modes measured (`--search-modes` picks among them), as the search request names them. */
export const SEARCH_MODES: Record<string, unknown> = { xtr: 'xtr', bm25: 'bm25', dense: 'dense', mebert: 'mebert', exhaustive: 'exhaustive', hybrid: { name: 'hybrid', fusion: 'rrf' } };

export const USAGE = `usage: npm run bench -- scale [--json] [--docs N (1000000)] [--model NAME (glove-ctx-100d)] [--codec eden4|fp16 (eden4)]
  [--seed N (1)] [--per-request N (1000)] [--window N (16000)] [--cache-bytes N (2 GiB)] [--rounds N (20)] [--cold-rounds N (5)]
  [--ingest-only] [--ingest-seconds S (0: all)] [--drain-seconds S (0)] [--search-modes ${Object.keys(SEARCH_MODES).join(',')}] [--search-timeout SECONDS (600)]
  [--layout warp|ivf (warp)] [--bits 2|4 (4)] [--overlap-queries N (50)] [--variant-env K=V,K=V] [--glibc-defaults]
  [--heap-snapshot [--snapshot-dir DIR]] [--keep] [--reuse DIR]`;

export const FLAGS = {
  json: { type: 'boolean' },
  docs: { type: 'string', default: '1000000' },
  model: { type: 'string', default: 'glove-ctx-100d' },
  codec: { type: 'string', default: 'eden4' },
  seed: { type: 'string', default: '1' },
  'per-request': { type: 'string', default: '1000' },
  window: { type: 'string', default: '16000' },
  'cache-bytes': { type: 'string', default: String(2 * 2 ** 30) },
  rounds: { type: 'string', default: '20' },
  'cold-rounds': { type: 'string', default: '5' },
  'ingest-only': { type: 'boolean' },
  'ingest-seconds': { type: 'string', default: '0' },
  'drain-seconds': { type: 'string', default: '0' },
  'search-modes': { type: 'string', default: Object.keys(SEARCH_MODES).join(',') },
  'search-timeout': { type: 'string', default: '600' },
  layout: { type: 'string', default: 'warp' },
  bits: { type: 'string', default: '4' },
  'overlap-queries': { type: 'string', default: '50' },
  'variant-env': { type: 'string' },
  'glibc-defaults': { type: 'boolean' },
  'heap-snapshot': { type: 'boolean' },
  'snapshot-dir': { type: 'string' },
  keep: { type: 'boolean' },
  reuse: { type: 'string' },
} as const;

/** The bench's settings from its command line (CliUsageError, exit 2, for a value it refuses). */
export function scaleFlags(args: string[]) {
  return parseCliOrExit('bench scale', USAGE, args, FLAGS, {}, ({ values: v }) => {
    const int = (flag: keyof typeof FLAGS, min = 0) => intFlag(flag, String(v[flag]), min);
    const codecName = v.codec;
    const codec = codecName === 'eden4' ? { kind: 'eden', bits: 4, layout: 'token' } : codecName === 'fp16' ? { kind: 'fp16' } : null;
    if (!codec) throw new CliUsageError(`--codec: eden4 or fp16 (got ${codecName})`);
    // --layout warp [--bits 2|4] (the service's default): WARP's centroid-major search layout (issue 32); ivf: the segment index's IVF. Named at creation either way.
    if (v.layout !== 'ivf' && v.layout !== 'warp') throw new CliUsageError(`--layout: ivf or warp (got ${v.layout})`);
    const warpBits = int('bits');
    if (warpBits !== 2 && warpBits !== 4) throw new CliUsageError(`--bits: 2 or 4 (got ${warpBits})`);
    const searchModes = v['search-modes'].split(',');
    const unknownModes = searchModes.filter((m) => !(m in SEARCH_MODES));
    if (unknownModes.length > 0) throw new CliUsageError(`--search-modes: unknown ${unknownModes.join(', ')} (${Object.keys(SEARCH_MODES).join(', ')})`);
    // Extra environment of a second serving pass (same collection, same requests): a same-load comparison.
    const variantEnv: NodeJS.ProcessEnv | null =
      v['variant-env'] === undefined
        ? null
        : Object.fromEntries(
            v['variant-env']
              .split(',')
              .filter(Boolean)
              .map((kv) => {
                const at = kv.indexOf('=');
                if (at < 1) throw new CliUsageError(`--variant-env: ${JSON.stringify(kv)} is not NAME=VALUE`);
                return [kv.slice(0, at), kv.slice(at + 1)];
              }),
          );
    const perRequest = int('per-request');
    return {
      N: int('docs', 1),
      model: v.model,
      codec,
      codecName,
      searchLayout: v.layout === 'warp' ? ({ layout: 'warp', bits: warpBits } as const) : ({ layout: 'ivf' } as const),
      seed: int('seed'),
      perRequest,
      window: Math.max(perRequest, int('window')),
      cacheBytes: int('cache-bytes'),
      rounds: int('rounds'),
      coldRounds: int('cold-rounds'),
      ingestOnly: v['ingest-only'] === true,
      // Stop posting after this many seconds (0: post all N) and serve what was accepted: a bounded run at the largest N a time budget allows.
      ingestLimitS: int('ingest-seconds'),
      // After ingest, wait up to this many seconds for the merge queue to empty (0: not at all): the maintenance left behind.
      drainS: int('drain-seconds'),
      searchModes,
      searchTimeoutMs: int('search-timeout') * 1000,
      // Sampled queries whose top 10 per mode is compared with exhaustive MaxSim's (0: none).
      overlapQueries: int('overlap-queries'),
      variantEnv,
      json: v.json === true,
      // The images' allocator settings (infra/Dockerfile), for every process as a deployment runs it.
      allocatorEnv: v['glibc-defaults'] ? {} : IMAGE_ALLOCATOR_ENV,
      reuseDir: v.reuse === undefined ? null : path.resolve(v.reuse),
      snapshotDir: v['heap-snapshot'] ? path.resolve(v['snapshot-dir'] ?? ROOT) : null,
      keep: v.keep === true,
    };
  });
}
