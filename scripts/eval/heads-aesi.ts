/**
 * The AESI comparison of `npm run eval -- heads` (heads.ts): the SDR rows of `npm run eval --
 * compression --aesi` results (read from --aesi-json files, run and cached for --aesi, or the
 * newest cached one), merged when one grid ran as several processes.
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { resolve, basename, join } from 'node:path';
import { runRerankCompression, type RerankCompressionResult } from './compression-trec-dl';

const log = (msg: string) => process.stderr.write(`${msg}\n`);
const round = (x: number) => Math.round(x * 1e4) / 1e4;

/** The heads evaluation's flags this comparison reads. */
type HeadsFlags = Partial<Record<'aesi-json' | 'aesi' | 'aesi-width' | 'aesi-epochs' | 'aesi-patience' | 'aesi-batch' | 'sample-tokens' | 'quick', string | boolean>>;
function flag(v: HeadsFlags, name: keyof HeadsFlags, fallback: string): string {
  const x = v[name];
  return typeof x === 'string' ? x : fallback;
}

/** The SDR comparison (compression --aesi), one row per (c, bits) point. */
export interface AesiComparison {
  source: string;
  dataset: string;
  model: string;
  queries: number;
  fp32: { bytes_per_token: number; 'ndcg@10': number };
  points: { codeDims: number; bits: number; noSideInfo: AesiCell | null; ridge: AesiCell | null; aesi: (AesiCell & { width: number; bestEpoch?: number; epochs?: number; heldOutRelError?: number }) | null }[];
  /** per method: the fewest bytes per token whose nDCG@10 is within 1% of fp32 (null: none of its points is) */
  smallestWithin1pct: { noSideInfo: AesiCell | null; ridge: AesiCell | null; aesi: AesiCell | null };
  /**
   * AESI within 1% of fp32 at fewer bytes per token than the ridge predictor's smallest such point;
   * when no ridge point is within 1%, only if ridge was measured at AESI's bytes per token or more.
   */
  targetMet: boolean;
}

export interface AesiCell {
  name: string;
  bytes_per_token: number;
  'ndcg@10': number;
  ndcg_rel_change: number;
  /** s.e. of the paired per-query nDCG@10 difference to fp32 (when the result has it) */
  ndcg_delta_se?: number;
  /** share of fp32's top 10 kept (when the result has it) */
  top10_recall?: number;
}

/** The SDR comparison rows of a compression --aesi result. */
export function aesiComparison(res: RerankCompressionResult, source: string): AesiComparison {
  const cell = (r: RerankCompressionResult['settings'][number]): AesiCell => ({
    name: r.name,
    bytes_per_token: round(r.bytes_per_token),
    'ndcg@10': round(r['ndcg@10']),
    ndcg_rel_change: round(r.ndcg_rel_change),
    ...(typeof r.ndcg_delta_se === 'number' ? { ndcg_delta_se: round(r.ndcg_delta_se) } : {}),
    ...(typeof r.top10_recall === 'number' ? { top10_recall: round(r.top10_recall) } : {}),
  });
  const points = new Map<string, AesiComparison['points'][number]>();
  const point = (c: number, b: number) => {
    const k = `${c}:${b}`;
    if (!points.has(k)) points.set(k, { codeDims: c, bits: b, noSideInfo: null, ridge: null, aesi: null });
    return points.get(k)!;
  };
  for (const r of res.settings) {
    let m = /^eden-(\d+)b-c(\d+)-cross(-side)?$/.exec(r.name);
    if (m) {
      const p = point(+m[2], +m[1]);
      if (m[3]) p.ridge = cell(r);
      else p.noSideInfo = cell(r);
      continue;
    }
    m = /^aesi-(\d+)b-c(\d+)-h(\d+)$/.exec(r.name);
    if (m) {
      const a = (r as { aesi?: { best_epoch: number; epochs: number; held_out_rel_error: number } }).aesi;
      point(+m[2], +m[1]).aesi = { ...cell(r), width: +m[3], ...(a ? { bestEpoch: a.best_epoch, epochs: a.epochs, heldOutRelError: round(a.held_out_rel_error) } : {}) };
    }
  }
  const fp32 = res.fp32['ndcg@10'];
  const smallest = (cells: (AesiCell | null)[]) => cells.filter((c): c is AesiCell => !!c && c['ndcg@10'] >= 0.99 * fp32).sort((a, b) => a.bytes_per_token - b.bytes_per_token)[0] ?? null;
  const list = [...points.values()].sort((a, b) => a.codeDims - b.codeDims || a.bits - b.bits);
  const s = { noSideInfo: smallest(list.map((p) => p.noSideInfo)), ridge: smallest(list.map((p) => p.ridge)), aesi: smallest(list.map((p) => p.aesi)) };
  return {
    source,
    dataset: basename(res.dataset),
    model: res.model,
    queries: res.queries,
    fp32: { bytes_per_token: round(res.fp32.bytes_per_token), 'ndcg@10': round(fp32) },
    points: list,
    smallestWithin1pct: s,
    // with no ridge point within 1%, only if the ridge predictor was measured (and missed) at AESI's bytes or more
    targetMet: !!s.aesi && (s.ridge ? s.aesi.bytes_per_token < s.ridge.bytes_per_token : list.some((p) => p.ridge && p.ridge.bytes_per_token >= s.aesi!.bytes_per_token)),
  };
}

/**
 * Several `eval compression --aesi ... --json` results of the same collection (one grid run as
 * separate processes, e.g. one per code size) as one: the settings of each in order, a name
 * already taken kept from the first result. They must agree on what was scored: dataset, model,
 * queries, documents, tokens, and fp32's nDCG@10 (the same encoding, so the same to 1e-9).
 */
export function mergeCompressionResults(results: RerankCompressionResult[], sources: string[] = []): RerankCompressionResult {
  if (!results.length) throw new Error('no compression results to merge');
  const [first, ...rest] = results;
  const seen = new Set(first!.settings.map((r) => r.name));
  const settings = [...first!.settings];
  rest.forEach((r, i) => {
    const what = sources[i + 1] ?? `result ${i + 2}`;
    for (const k of ['dataset', 'model', 'queries', 'documents', 'tokens'] as const)
      if (r[k] !== first![k]) throw new Error(`${what}: ${k} ${String(r[k])} differs from ${sources[0] ?? 'the first result'}'s ${String(first![k])}; only results of the same collection can be merged`);
    if (Math.abs(r.fp32['ndcg@10'] - first!.fp32['ndcg@10']) > 1e-9) throw new Error(`${what}: fp32 nDCG@10 ${r.fp32['ndcg@10']} differs from ${first!.fp32['ndcg@10']} (another encoding); not merged`);
    for (const s of r.settings)
      if (!seen.has(s.name)) {
        seen.add(s.name);
        settings.push(s);
      }
  });
  return { ...first!, settings, ms: results.reduce((a, r) => a + (r.ms ?? 0), 0) };
}

/** --aesi-json FILE[,FILE...], --aesi SPEC (run and cache), or the newest cached result; null when there is none. */
export async function aesiRow(v: HeadsFlags, dl19: string, model: string): Promise<AesiComparison | null> {
  const lastJson = (text: string) => JSON.parse(text.trim().split('\n').filter((l) => l.startsWith('{')).pop() ?? 'null') as RerankCompressionResult | null;
  const file = flag(v, 'aesi-json', '');
  if (file) {
    const files = file.split(',').filter(Boolean);
    const results = files.map((f) => {
      const res = lastJson(readFileSync(resolve(f), 'utf8'));
      if (!res?.settings) throw new Error(`--aesi-json ${f}: no compression result (a JSON line with settings) in it`);
      return res;
    });
    return aesiComparison(mergeCompressionResults(results, files), file);
  }
  const dir = resolve('.cache/eval-heads');
  const spec = flag(v, 'aesi', '');
  if (spec) {
    const passed = (['aesi', 'aesi-width', 'aesi-epochs', 'aesi-patience', 'aesi-batch', 'sample-tokens'] as const).flatMap((n) => (v[n] !== undefined ? [`--${n}`, flag(v, n, '')] : []));
    const cmd = ['--dataset', dl19, '--model', resolve('.cache/models', model), ...passed, ...(v.quick ? ['--quick'] : [])];
    const key = createHash('sha256').update(JSON.stringify(cmd)).digest('hex').slice(0, 12);
    const cached = join(dir, `aesi-${model}-${key}.json`);
    if (existsSync(cached)) return aesiComparison(JSON.parse(readFileSync(cached, 'utf8')) as RerankCompressionResult, cached);
    log(`AESI comparison: npm run eval -- compression ${cmd.join(' ')}`);
    const res = await runRerankCompression(cmd, log);
    mkdirSync(dir, { recursive: true });
    writeFileSync(cached, JSON.stringify(res));
    return aesiComparison(res, cached);
  }
  const files = existsSync(dir) ? readdirSync(dir).filter((n) => /^aesi-.*\.json$/.test(n)).map((n) => join(dir, n)) : [];
  if (!files.length) return null;
  const newest = files.sort((a, b) => statSync(b).mtimeMs - statSync(a).mtimeMs)[0];
  return aesiComparison(JSON.parse(readFileSync(newest, 'utf8')) as RerankCompressionResult, newest);
}
