import { describe, expect, it } from 'vitest';
import { compressionPlotSvg } from './compression-plot';
import type { RerankCompressionResult, RerankSettingResult } from './compression-trec-dl';

const row = (name: string, bytes: number, ndcg: number): RerankSettingResult => ({
  name,
  bytes_per_token: bytes,
  token_id_bytes_per_token: 4,
  'ndcg@10': ndcg,
  ndcg_rel_change: 0,
  ndcg_delta_se: 0,
  top10_recall: 1,
  mean_abs_score_error: 0,
  relative_error: 0,
  ms: 1,
});

describe('compressionPlotSvg', () => {
  it('draws one labelled marker per setting, coloured by family, and the 99%-of-fp32 line', () => {
    const settings = [row('fp32', 400, 0.4), row('eden-4b-full-token', 68, 0.39), row('eden-1b-c40-cross-side-fp16norms', 5.8, 0.401), row('token-id', 4, 0.2)];
    const res = {
      model: 'glove-ctx-100d',
      queries: 10,
      documents: 1000,
      tokens: 50_000,
      fp32: { bytes_per_token: 400, 'ndcg@10': 0.4 },
      settings,
    } as unknown as RerankCompressionResult;
    const svg = compressionPlotSvg(res);
    expect(svg.startsWith('<svg xmlns="http://www.w3.org/2000/svg"')).toBe(true);
    expect(svg.trimEnd().endsWith('</svg>')).toBe(true);
    // one marker per setting + one per legend entry (6 families)
    expect(svg.match(/<circle /g)).toHaveLength(settings.length + 6);
    expect(svg).toContain('<title>eden-4b-full-token: 68.00 B/token, nDCG@10 0.3900</title>');
    expect(svg).toMatch(/fill="#2ca02c"><title>eden-1b-c40-cross-side-fp16norms/); // side information
    expect(svg).toMatch(/fill="#d62728"><title>token-id:/); // references
    expect(svg).toContain('99% of fp32 (0.3960)');
    expect(svg).toContain('glove-ctx-100d: nDCG@10 vs bytes per token on disk (10 queries, 1000 docs, 50000 tokens)');
  });
});
