/**
 * The frame of the evaluation scripts' hand-written SVG plots (the compression sweep's and the
 * retrieval modes'): x on a log scale over whole decades, y = a score in steps of 0.05, grid lines
 * and their values, the title and both axis labels. The caller draws its markers with X and Y and
 * closes the document with `</svg>`.
 */

export const escapeXml = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

export interface LogXPlotFrame {
  width: number;
  height: number;
  /** Margins: left, right (the legend's room), top, bottom. */
  left: number;
  right: number;
  top: number;
  bottom: number;
  /** The points' values, which set the axes' ranges. */
  xs: number[];
  ys: number[];
  title: string;
  xLabel: string;
  yLabel: string;
  /** Grid coordinates written with one decimal (else as computed). */
  roundCoords?: boolean;
}

/** The frame's SVG lines so far, and the scales that place a point. */
export function logXPlot(f: LogXPlotFrame): { out: string[]; X: (v: number) => number; Y: (v: number) => number } {
  const { width: W, height: H, left: L, right: R, top: Tm, bottom: B } = f;
  const x0 = 10 ** Math.floor(Math.log10(Math.min(...f.xs))), x1 = 10 ** Math.ceil(Math.log10(Math.max(...f.xs)));
  const y0 = Math.max(0, Math.floor((Math.min(...f.ys) - 0.02) * 20) / 20), y1 = Math.min(1, Math.ceil((Math.max(...f.ys) + 0.01) * 20) / 20);
  const X = (v: number) => L + ((Math.log10(v) - Math.log10(x0)) / Math.max(1e-9, Math.log10(x1) - Math.log10(x0))) * (W - L - R);
  const Y = (v: number) => Tm + (1 - (v - y0) / Math.max(1e-9, y1 - y0)) * (H - Tm - B);
  const c = (v: number) => (f.roundCoords ? v.toFixed(1) : String(v));
  const out: string[] = [];
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif">`);
  out.push(`<rect width="${W}" height="${H}" fill="white"/>`);
  out.push(`<text x="${L}" y="22" font-size="14">${escapeXml(f.title)}</text>`);
  for (let e = Math.log10(x0); e <= Math.log10(x1) + 1e-9; e++) {
    for (const k of [1, 2, 5]) {
      const v = k * 10 ** e;
      if (v < x0 || v > x1) continue;
      out.push(`<line x1="${c(X(v))}" y1="${Tm}" x2="${c(X(v))}" y2="${H - B}" stroke="#ddd"/>`);
      out.push(`<text x="${c(X(v))}" y="${H - B + 16}" font-size="11" text-anchor="middle">${v}</text>`);
    }
  }
  for (let v = y0; v <= y1 + 1e-9; v += 0.05) {
    out.push(`<line x1="${L}" y1="${c(Y(v))}" x2="${W - R}" y2="${c(Y(v))}" stroke="#ddd"/>`);
    out.push(`<text x="${L - 6}" y="${c(Y(v) + 4)}" font-size="11" text-anchor="end">${v.toFixed(2)}</text>`);
  }
  out.push(`<rect x="${L}" y="${Tm}" width="${W - L - R}" height="${H - Tm - B}" fill="none" stroke="#333"/>`);
  out.push(`<text x="${(L + W - R) / 2}" y="${H - 18}" font-size="12" text-anchor="middle">${f.xLabel}</text>`);
  out.push(`<text x="18" y="${(Tm + H - B) / 2}" font-size="12" text-anchor="middle" transform="rotate(-90 18 ${(Tm + H - B) / 2})">${f.yLabel}</text>`);
  return { out, X, Y };
}
