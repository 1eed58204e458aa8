/**
 * The plot of the TREC-DL compression sweep (`--plot out.svg`): nDCG@10 against bytes per token.
 */
import type { RerankCompressionResult } from './compression-trec-dl';
import { escapeXml, logXPlot } from '../lib/svg-plot';

const PLOT_COLORS: [RegExp, string, string][] = [
  [/^(fp32|fp16|int8)$/, '#000000', 'fp32 / fp16 / int8'],
  [/^eden-.*-token$/, '#1f77b4', 'EDEN, token layout'],
  [/^eden-.*-cross$/, '#ff7f0e', 'EDEN, cross layout'],
  [/-side(-fp16norms)?$/, '#2ca02c', 'EDEN + side information (cross)'],
  [/^residual/, '#9467bd', 'residual (PLAID-style)'],
  [/^(token-id|token-id-pred|static-model)$/, '#d62728', 'token id only (references)'],
];


/** Hand-written SVG: x = bytes per token (log scale), y = nDCG@10, one labelled marker per setting. */
export function compressionPlotSvg(res: RerankCompressionResult): string {
  const W = 1100, H = 720, L = 70, R = 230, Tm = 40, B = 60;
  const pts = res.settings;
  const frame = { width: W, height: H, left: L, right: R, top: Tm, bottom: B, yLabel: 'nDCG@10' };
  const { out, X, Y } = logXPlot({ ...frame, xs: pts.map((p) => p.bytes_per_token), ys: pts.map((p) => p['ndcg@10']), title: `${res.model}: nDCG@10 vs bytes per token on disk (${res.queries} queries, ${res.documents} docs, ${res.tokens} tokens)`, xLabel: 'bytes per token on disk (vector representation: codes, norms, padding, headers; log scale)' });
  const f32 = res.fp32['ndcg@10'];
  out.push(`<line x1="${L}" y1="${Y(0.99 * f32)}" x2="${W - R}" y2="${Y(0.99 * f32)}" stroke="#888" stroke-dasharray="5,4"/>`);
  out.push(`<text x="${W - R - 4}" y="${Y(0.99 * f32) - 4}" font-size="10" text-anchor="end" fill="#555">99% of fp32 (${(0.99 * f32).toFixed(4)})</text>`);
  for (const p of pts) {
    const color = [...PLOT_COLORS].reverse().find(([re]) => re.test(p.name))?.[1] ?? '#000';
    const cx = X(p.bytes_per_token), cy = Y(p['ndcg@10']);
    out.push(`<circle cx="${cx.toFixed(1)}" cy="${cy.toFixed(1)}" r="3.5" fill="${color}"><title>${escapeXml(`${p.name}: ${p.bytes_per_token.toFixed(2)} B/token, nDCG@10 ${p['ndcg@10'].toFixed(4)}`)}</title></circle>`);
    out.push(`<text x="${(cx + 5).toFixed(1)}" y="${(cy - 3).toFixed(1)}" font-size="7.5" fill="${color}">${escapeXml(p.name)}</text>`);
  }
  PLOT_COLORS.forEach(([, color, label], i) => {
    out.push(`<circle cx="${W - R + 20}" cy="${Tm + 14 + 18 * i}" r="4" fill="${color}"/>`);
    out.push(`<text x="${W - R + 30}" y="${Tm + 18 + 18 * i}" font-size="11">${escapeXml(label)}</text>`);
  });
  out.push('</svg>');
  return out.join('\n');
}
