import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { QueueName } from '@lateral/shared';
import type { WorkerHost } from '@lateral/infra';
import { HANDLED_QUEUES, startWorkers } from '@lateral/workers';
import { startServer, type Server } from '../apps/all-in-one/src/server';
import { loadCranfield } from '../scripts/lib/cranfield';
import { http, testConfig, until } from './helpers';

/**
 * A request that waits for its search (POST ?wait) while the worker that took its job dies
 * (SIGKILL mid-job) is still answered: the job stays in Redis, its lock expires, another worker
 * runs it, and the waiting request gets the result (issue 31 item 2: waiting by completion event
 * and the in-process hand-back keep BullMQ's retry of a dead worker's job).
 */
describe('a waiting request whose worker dies (real Redis, real S3 server, real ONNX model)', () => {
  let server: Server;
  let host: WorkerHost | null = null;
  const children: ChildProcess[] = [];
  const config = testConfig({ ENCODE_BATCH_DOCUMENTS: '50', JOB_LOCK_SECONDS: '2', JOB_STALLED_CHECK_SECONDS: '1' });
  const docs = loadCranfield(path.resolve('data/cranfield')).docs.filter((d) => d.text.length > 0).slice(0, 50);
  const api = (method: string, url: string, body?: unknown) => http(server.url, method, url, body);

  beforeAll(async () => {
    // Every queue but search: the search job goes to the worker the test kills.
    server = await startServer(config, { quiet: true, queues: HANDLED_QUEUES.filter((q) => q !== QueueName.search) });
    await api('POST', '/v1/collections', { id: 'die' });
    const ing = await api('POST', '/v1/collections/die/documents', docs.map((d) => ({ id: d.id, text: d.text })));
    await until(async () => (await api('GET', ing.body.status)).body.state === 'done', 120_000);
  }, 180_000);
  afterAll(async () => {
    for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
    await host?.close(100);
    await server?.stop();
  });

  it('the job of a SIGKILLed worker runs again on another one and the waiting POST answers 200 with its hits', async () => {
    // A worker process that takes the search job and never finishes it.
    const child = spawn(process.execPath, ['--import', 'tsx', 'test/fixtures/stall-worker.ts'], {
      cwd: path.resolve('.'),
      env: { ...process.env, REDIS_URL: server.runtime.services.redisUrl, PREFIX: config.REDIS_PREFIX, QUEUE: QueueName.search, LOCK_MS: '2000', STALLED_MS: '1000', MAX_STALLED: '5' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.push(child);
    let out = '';
    child.stdout!.on('data', (d) => (out += d));
    await until(async () => out.includes('ready'), 60_000);
    const waiting = api('POST', '/v1/search?wait=60', { collection: 'die', mode: 'bm25', topK: 5, queries: [{ id: 'q', text: docs[7].text }] });
    await until(async () => /started \S+/.test(out), 30_000);
    child.kill('SIGKILL');
    await new Promise((r) => child.once('exit', r));
    // A live worker (in this process, beside the API) resumes the job once its lock has expired.
    host = startWorkers(server.runtime, [QueueName.search]);
    const answer = await waiting;
    expect(answer.status, JSON.stringify(answer.body)).toBe(200);
    expect(answer.body.status).toBe('completed');
    expect(answer.body.result.results[0].hits[0].id).toBe(docs[7].id);
    // The same hits as a search nobody killed.
    const again = await api('POST', '/v1/search?wait=60', { collection: 'die', mode: 'bm25', topK: 5, queries: [{ id: 'q', text: docs[7].text }] });
    expect(again.body.result.results).toEqual(answer.body.result.results);
  }, 120_000);
});
