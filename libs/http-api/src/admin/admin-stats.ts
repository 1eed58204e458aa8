/** Small pure helpers of the operations overview (percentiles, ingestion rate and ETA). */

export interface Percentiles {
  count: number;
  p50: number | null;
  p95: number | null;
  p99: number | null;
}

/** Nearest-rank percentiles (p50, p95, p99) of `values`; nulls when there are none. */
export function percentiles(values: number[]): Percentiles {
  if (values.length === 0) return { count: 0, p50: null, p95: null, p99: null };
  const s = [...values].sort((a, b) => a - b);
  const at = (p: number) => s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))];
  return { count: s.length, p50: at(50), p95: at(95), p99: at(99) };
}

export interface ProgressSample {
  t: number;
  /** Documents' worth of work done (see ingestionWork). */
  work: number;
}

/**
 * Documents' worth of work an ingestion has done: the mean of its per-stage document counts past
 * acceptance (encoded, compressed, indexed, committed), so a bar that moves in any stage moves it.
 */
export function ingestionWork(stages: { encoded: number; compressed: number; indexed: number; committed: number }): number {
  return (stages.encoded + stages.compressed + stages.indexed + stages.committed) / 4;
}

/**
 * Documents per second over the samples of the last `windowMs` (when there are two at least 1 s
 * apart), else the mean since the ingestion was created; and the seconds left at that rate (null when
 * the rate is 0 or the work is done).
 */
export function rateAndEta(samples: ProgressSample[], createdAt: number, total: number, now: number, windowMs = 60_000): { docsPerSecond: number; etaSeconds: number | null } {
  const last = samples[samples.length - 1];
  const work = last?.work ?? 0;
  const recent = samples.filter((s) => s.t >= now - windowMs);
  let rate = 0;
  if (recent.length >= 2 && recent[recent.length - 1].t - recent[0].t >= 1000) {
    // Enough recent samples: their slope, so a stalled ingestion shows 0 docs/s and no ETA.
    rate = (recent[recent.length - 1].work - recent[0].work) / ((recent[recent.length - 1].t - recent[0].t) / 1000);
  } else if (now > createdAt) rate = work / ((now - createdAt) / 1000);
  rate = Math.max(0, rate);
  const left = Math.max(0, total - work);
  return { docsPerSecond: Math.round(rate * 100) / 100, etaSeconds: left === 0 ? 0 : rate > 0 ? Math.round(left / rate) : null };
}
