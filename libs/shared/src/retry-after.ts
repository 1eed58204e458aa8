/**
 * The `Retry-After` header (RFC 9110 10.2.3): delay-seconds or an HTTP date. Returns the wait in
 * milliseconds (0 for a date in the past), or undefined when the header is absent or neither form.
 * Shared by the project's HTTP clients (scripts/lib/client.ts) and webhook delivery.
 */
export function parseRetryAfter(header: string | null | undefined, now = Date.now()): number | undefined {
  const v = header?.trim();
  if (!v) return undefined;
  if (/^\d+$/.test(v)) return Number(v) * 1000;
  // An HTTP date names its day and month in letters ("Wed, 21 Oct 2015 07:28:00 GMT"); a bare number with a sign or a point is neither form.
  if (!/[A-Za-z]/.test(v)) return undefined;
  const at = Date.parse(v);
  return Number.isFinite(at) ? Math.max(0, at - now) : undefined;
}
