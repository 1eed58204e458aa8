/**
 * Memory of the API under concurrent large malformed bodies (issue 12 item 5): starts the API in
 * this process (embedded Redis and S3 under a temporary DATA_DIR), sends N concurrent bodies of
 * M MB of malformed JSON to POST /v1/collections/c/documents, and prints the statuses, the RSS
 * before / peak / after and the longest event-loop stall.
 *
 *   npx tsx scripts/measure-body-memory.ts [--n 16] [--mb 60]
 */
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import http from 'node:http';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { loadConfig } from '@lateral/shared';
import { createLogger, createRuntime, resolveServices } from '@lateral/infra';
import { closeApi, createApiApp } from '@lateral/http-api';
import { intFlag, parseCliOrExit } from './lib/cli';

const USAGE = `usage: npx tsx scripts/measure-body-memory.ts [--n 16] [--mb 60]
  --n <count>   concurrent requests (default 16)
  --mb <size>   megabytes of malformed JSON in each body (default 60)
  -h, --help    this text`;

async function main() {
  const { n, mb } = parseCliOrExit('measure-body-memory', USAGE, process.argv.slice(2), { n: { type: 'string' }, mb: { type: 'string' } }, {}, ({ values }) => ({
    n: values.n === undefined ? 16 : intFlag('n', values.n),
    mb: values.mb === undefined ? 60 : intFlag('mb', values.mb),
  }));
  const config = loadConfig({ ...process.env, PORT: '0', LOG_LEVEL: 'error', DATA_DIR: mkdtempSync(path.join(os.tmpdir(), 'lateral-mem-')), DEFAULT_MODEL: 'glove-ctx-100d', MODELS_DIR: path.resolve('.cache/models') });
  const logger = createLogger('error', 'mem');
  const services = await resolveServices(config, logger);
  const rt = await createRuntime(config, services, logger);
  const app = await createApiApp(rt);
  await app.listen(0, '127.0.0.1');
  const { port } = app.getHttpServer().address() as { port: number };
  const post = (p: string, body: Buffer | string) =>
    new Promise<number>((resolve) => {
      const req = http.request({ host: '127.0.0.1', port, path: p, method: 'POST', headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } }, (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      });
      req.on('error', () => resolve(-1));
      req.end(body);
    });
  await post('/v1/collections', '{"id":"c"}');
  // Malformed: a valid-looking array of documents whose last element is cut off (the parser reads it all first).
  const doc = '{"id":"d","text":"' + 'w'.repeat(200) + '"},';
  const body = Buffer.from('[' + doc.repeat(Math.floor((mb * 2 ** 20) / doc.length)) + '{"id":');
  if (global.gc) global.gc();
  const rssBefore = process.memoryUsage().rss;
  let peak = rssBefore;
  const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 10);
  const lag = monitorEventLoopDelay({ resolution: 10 });
  lag.enable();
  const t0 = Date.now();
  const statuses = await Promise.all(Array.from({ length: n }, () => post('/v1/collections/c/documents', body)));
  const seconds = (Date.now() - t0) / 1000;
  lag.disable();
  clearInterval(sampler);
  const counts: Record<string, number> = {};
  for (const s of statuses) counts[s] = (counts[s] ?? 0) + 1;
  const mbOf = (b: number) => Math.round(b / 2 ** 20);
  console.log(
    JSON.stringify({ bodies: n, body_mb: mb, statuses: counts, seconds, rss_before_mb: mbOf(rssBefore), rss_peak_mb: mbOf(peak), rss_after_mb: mbOf(process.memoryUsage().rss), max_event_loop_stall_ms: Math.round(lag.max / 1e6) }),
  );
  await closeApi(app);
  await rt.close();
  await services.stop();
  process.exit(0);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
