import type { ArgumentsHost } from '@nestjs/common';
import { describe, expect, it } from 'vitest';
import { createLogger } from '@lateral/infra';
import { UnavailableError } from '@lateral/shared';
import { HttpErrorsFilter, type LoadProbe } from './http-errors.filter';

/** What the filter answers for an error, given the state of the process (a probe with fixed readings). */
function answer(err: unknown, state: { redisStatus?: string; lagMs?: number; utilization?: number } = {}) {
  const probe: LoadProbe = { redisStatus: () => state.redisStatus, load: () => ({ lagMs: state.lagMs ?? 0, utilization: state.utilization ?? 0 }), overloadLagMs: 500, windowMs: 6000 };
  const logged: string[] = [];
  const logger = createLogger('warn', 'test', { json: true, destination: { write: (l: string) => logged.push(l) } });
  const filter = new HttpErrorsFilter(logger, undefined, probe);
  const out: { status?: number; headers: Record<string, string>; body?: { error: string; message: string } } = { headers: {} };
  const res = {
    headersSent: false,
    setHeader: (k: string, v: string) => (out.headers[k.toLowerCase()] = v),
    status(s: number) {
      out.status = s;
      return this;
    },
    json: (b: { error: string; message: string }) => (out.body = b),
  };
  filter.catch(err, { switchToHttp: () => ({ getResponse: () => res }) } as unknown as ArgumentsHost);
  return { ...out, logged };
}

describe('HttpErrorsFilter: down or overloaded', () => {
  it('a Redis command timeout on a connected client: 503 overloaded, Retry-After 2, naming overload and the setting', () => {
    const a = answer(new Error('Command timed out'), { redisStatus: 'ready' });
    expect(a.status).toBe(503);
    expect(a.headers['retry-after']).toBe('2');
    expect(a.body!.error).toBe('overloaded');
    expect(a.body!.message).toBe(
      'the service is overloaded: Redis (the job queues) did not answer in time (REDIS_COMMAND_TIMEOUT_MS), although it is connected, so this request may not have been carried out; retry after 2 s. ' +
        "This is load, not an outage; if it persists, the operator should check Redis's load (slow commands, memory, CPU).",
    );
    expect(a.logged.join('')).toContain('overloaded: Redis did not answer in time: Command timed out');
  });

  it('an S3 reset while the event loop was held up: overloaded, saying this process was busy', () => {
    const reset = Object.assign(new Error('reading s3://bucket/tenants/t/x: socket hang up'), { cause: Object.assign(new Error('socket hang up'), { code: 'ECONNRESET', $metadata: {} }) });
    const a = answer(reset, { lagMs: 1234 });
    expect([a.status, a.headers['retry-after'], a.body!.error]).toEqual([503, '2', 'overloaded']);
    expect(a.body!.message).toBe(
      'the service is overloaded: the object store (S3) did not answer in time (S3_SOCKET_TIMEOUT_MS) while this process was busy (its event loop was held up to 1234 ms), so this request may not have been carried out; retry after 2 s. This is load, not an outage.',
    );
    // the same reset with an idle event loop: the store is failing
    const idle = answer(reset);
    expect([idle.status, idle.headers['retry-after'], idle.body!.error]).toEqual([503, '5', 'unavailable']);
    expect(idle.body!.message).toMatch(/^the object store \(S3\) is unreachable or failing, so this request was not carried out; retry after 5 s\..*S3_ENDPOINT/);
  });

  it("an UnavailableError keeps its own Retry-After and code: 'unavailable' by default, 'overloaded' when the service refuses work for load (ingest back-pressure)", () => {
    const down = answer(new UnavailableError('the thing is down', 7));
    expect([down.status, down.headers['retry-after'], down.body!.error, down.body!.message]).toEqual([503, '7', 'unavailable', 'the thing is down']);
    const busy = answer(new UnavailableError("collection 'c' is overloaded: 24 segments", 10, 'overloaded'));
    expect([busy.status, busy.headers['retry-after'], busy.body!.error, busy.body!.message]).toEqual([503, '10', 'overloaded', "collection 'c' is overloaded: 24 segments"]);
  });

  it('Redis not connected stays unreachable (503 unavailable, Retry-After 5), busy or not', () => {
    const a = answer(new Error("Stream isn't writeable and enableOfflineQueue options is false"), { redisStatus: 'reconnecting', lagMs: 5000 });
    expect([a.status, a.headers['retry-after'], a.body!.error]).toEqual([503, '5', 'unavailable']);
    expect(a.body!.message).toMatch(/^Redis \(the job queues\) is unreachable, so this request was not carried out; retry after 5 s\..*REDIS_URL/);
    expect(a.body!.message).not.toMatch(/enableOfflineQueue|overloaded/);
  });
});
