/**
 * The plot of the TREC-DL compression sweep (`--plot out.svg`): nDCG@10 against bytes per token.
 */
import type { RerankCompressionResult } from './compression-trec-dl';

const PLOT_COLORS: [RegExp, string, string][] = [
  [/^(fp32|fp16|int8)$/, '#000000', 'fp32 / fp16 / int8'],
  [/^eden-.*-token$/, '#1f77b4', 'EDEN, token layout'],
  [/^eden-.*-cross$/, '#ff7f0e', 'EDEN, cross layout'],
  [/-side(-fp16norms)?$/, '#2ca02c', 'EDEN + side information (cross)'],
  [/^residual/, '#9467bd', 'residual (PLAID-style)'],
  [/^(token-id|token-id-pred|static-model)$/, '#d62728', 'token id only (references)'],
];

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

/** Hand-written SVG: x = bytes per token (log scale), y = nDCG@10, one labelled marker per setting. */
export function compressionPlotSvg(res: RerankCompressionResult): string {
  const W = 1100, H = 720, L = 70, R = 230, Tm = 40, B = 60;
  const pts = res.settings;
  const xs = pts.map((p) => p.bytes_per_token);
  const ys = pts.map((p) => p['ndcg@10']);
  const x0 = 10 ** Math.floor(Math.log10(Math.min(...xs))), x1 = 10 ** Math.ceil(Math.log10(Math.max(...xs)));
  const y0 = Math.max(0, Math.floor((Math.min(...ys) - 0.02) * 20) / 20), y1 = Math.min(1, Math.ceil((Math.max(...ys) + 0.01) * 20) / 20);
  const X = (v: number) => L + ((Math.log10(v) - Math.log10(x0)) / (Math.log10(x1) - Math.log10(x0))) * (W - L - R);
  const Y = (v: number) => Tm + (1 - (v - y0) / (y1 - y0)) * (H - Tm - B);
  const out: string[] = [];
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif">`);
  out.push(`<rect width="${W}" height="${H}" fill="white"/>`);
  out.push(`<text x="${L}" y="22" font-size="14">${esc(`${res.model}: nDCG@10 vs bytes per token on disk (${res.queries} queries, ${res.documents} docs, ${res.tokens} tokens)`)}</text>`);
  for (let e = Math.log10(x0); e <= Math.log10(x1) + 1e-9; e++) {
    for (const m of [1, 2, 5]) {
      const v = m * 10 ** e;
      if (v < x0 || v > x1) continue;
      out.push(`<line x1="${X(v)}" y1="${Tm}" x2="${X(v)}" y2="${H - B}" stroke="#ddd"/>`);
      out.push(`<text x="${X(v)}" y="${H - B + 16}" font-size="11" text-anchor="middle">${v}</text>`);
    }
  }
  for (let v = y0; v <= y1 + 1e-9; v += 0.05) {
    out.push(`<line x1="${L}" y1="${Y(v)}" x2="${W - R}" y2="${Y(v)}" stroke="#ddd"/>`);
    out.push(`<text x="${L - 6}" y="${Y(v) + 4}" font-size="11" text-anchor="end">${v.toFixed(2)}</text>`);
  }
  out.push(`<rect x="${L}" y="${Tm}" width="${W - L - R}" height="${H - Tm - B}" fill="none" stroke="#333"/>`);
  out.push(`<text x="${(L + W - R) / 2}" y="${H - 18}" font-size="12" text-anchor="middle">bytes per token on disk (vector representation: codes, norms, padding, headers; log scale)</text>`);
  out.push(`<text x="18" y="${(Tm + H - B) / 2}" font-size="12" text-anchor="middle" transform="rotate(-90 18 ${(Tm + H - B) / 2})">nDCG@10</text>`);
  const f32 = res.fp32['ndcg@10'];
  out.push(`<line x1="${L}" y1="${Y(0.99 * f32)}" x2="${W - R}" y2="${Y(0.99 * f32)}" stroke="#888" stroke-dasharray="5,4"/>`);
  out.push(`<text x="${W - R - 4}" y="${Y(0.99 * f32) - 4}" font-size="10" text-anchor="end" fill="#555">99% of fp32 (${(0.99 * f32).toFixed(4)})</text>`);
  for (const p of pts) {
    const color = [...PLOT_COLORS].reverse().find(([re]) => re.test(p.name))?.[1] ?? '#000';
    const cx = X(p.bytes_per_token), cy = Y(p['ndcg@10']);
    out.push(`<circle cx="${cx.toFixed(1)}" cy="${cy.toFixed(1)}" r="3.5" fill="${color}"><title>${esc(`${p.name}: ${p.bytes_per_token.toFixed(2)} B/token, nDCG@10 ${p['ndcg@10'].toFixed(4)}`)}</title></circle>`);
    out.push(`<text x="${(cx + 5).toFixed(1)}" y="${(cy - 3).toFixed(1)}" font-size="7.5" fill="${color}">${esc(p.name)}</text>`);
  }
  PLOT_COLORS.forEach(([, color, label], i) => {
    out.push(`<circle cx="${W - R + 20}" cy="${Tm + 14 + 18 * i}" r="4" fill="${color}"/>`);
    out.push(`<text x="${W - R + 30}" y="${Tm + 18 + 18 * i}" font-size="11">${esc(label)}</text>`);
  });
  out.push('</svg>');
  return out.join('\n');
}
