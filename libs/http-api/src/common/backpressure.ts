import type { NextFunction, Request, Response } from 'express';
import { QueueName } from '@lateral/shared';
import type { JobQueues } from '@lateral/infra';
import { OVERLOAD_RETRY_AFTER_SECONDS, serviceFault, type LoadProbe } from './http-errors.filter';

/**
 * Queue back-pressure: a request that would add jobs to a queue whose backlog (waiting, delayed
 * and prioritized jobs) is over MAX_QUEUE_BACKLOG answers 503 with Retry-After before its body is
 * read, so a flood degrades into refusals instead of into Redis running out of memory. Only the
 * API's entry points are refused; jobs that workers chain (compress after encode, ...) always go
 * through, so work already accepted is never dropped half-way.
 *
 * The counts are cached for `cacheMs` per queue (one Redis round trip per queue per interval, not
 * per request). When Redis is down, the request goes on and meets the usual 503; when the counts
 * did not come in time because of load (overload.ts), the request is refused here with 503
 * `overloaded` + Retry-After before its body is read, instead of waiting out a second timeout.
 */
export const FEEDS: { method: string; path: RegExp; queue: QueueName }[] = [
  { method: 'POST', path: /^\/v1\/collections\/[^/]+\/documents\/?$/, queue: QueueName.encode },
  { method: 'POST', path: /^\/v1\/collections\/[^/]+\/recompress\/?$/, queue: QueueName.compress },
  { method: 'POST', path: /^\/v1\/rerank\/?$/, queue: QueueName.rerank },
  { method: 'POST', path: /^\/v1\/search\/?$/, queue: QueueName.search },
  { method: 'POST', path: /^\/v1\/compat\/cohere\/(v[12]\/)?rerank\/?$/, queue: QueueName.rerank },
  { method: 'POST', path: /^\/v1\/batches\/?$/, queue: QueueName.batch },
  { method: 'POST', path: /^\/v1\/collections\/[^/]+\/train\/?$/, queue: QueueName.train },
];

export const BACKLOG_RETRY_AFTER_SECONDS = 5;

export function backpressure(queues: Pick<JobQueues, 'get'>, maxBacklog: number, cacheMs = 1000, probe?: LoadProbe) {
  const cache = new Map<QueueName, { at: number; backlog: Promise<number> }>();
  const backlog = (name: QueueName): Promise<number> => {
    const hit = cache.get(name);
    if (hit && Date.now() - hit.at < cacheMs) return hit.backlog;
    const counts = queues
      .get(name)
      .getJobCounts('wait', 'delayed', 'prioritized')
      .then((c) => (c.wait ?? 0) + (c.delayed ?? 0) + (c.prioritized ?? 0));
    cache.set(name, { at: Date.now(), backlog: counts });
    counts.catch(() => cache.delete(name));
    return counts;
  };

  return async (req: Request, res: Response, next: NextFunction) => {
    if (maxBacklog <= 0) return next();
    const path = (req.originalUrl ?? req.url).split('?')[0];
    const feed = FEEDS.find((f) => f.method === req.method && f.path.test(path));
    if (!feed) return next();
    let n: number;
    try {
      n = await backlog(feed.queue);
    } catch (err) {
      if (!probe || serviceFault(err, probe)?.kind !== 'overloaded') return next();
      req.resume(); // the body is not wanted
      res.setHeader('Retry-After', String(OVERLOAD_RETRY_AFTER_SECONDS));
      res.setHeader('Connection', 'close');
      res.status(503).json({
        error: 'overloaded',
        message:
          `the service is overloaded: Redis (the job queues) did not answer in time (REDIS_COMMAND_TIMEOUT_MS) when the ${feed.queue} queue's backlog was read, ` +
          `so nothing was accepted; retry after ${OVERLOAD_RETRY_AFTER_SECONDS} s. This is load, not an outage.`,
      });
      return;
    }
    if (n <= maxBacklog) return next();
    req.resume(); // the body is not wanted
    res.setHeader('Retry-After', String(BACKLOG_RETRY_AFTER_SECONDS));
    res.setHeader('Connection', 'close');
    res.status(503).json({
      error: 'unavailable',
      message: `the ${feed.queue} queue has ${n} jobs waiting, over MAX_QUEUE_BACKLOG (${maxBacklog}): nothing was accepted; retry after ${BACKLOG_RETRY_AFTER_SECONDS} s`,
      details: [{ field: 'queue', message: `${feed.queue}: ${n} > MAX_QUEUE_BACKLOG (${maxBacklog})` }],
    });
  };
}
