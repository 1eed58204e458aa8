import { describe, expect, it } from 'vitest';
import { addLogContext, createLogger, withLogContext } from './logger';

const capture = () => {
  const lines: string[] = [];
  return { lines, destination: { write: (l: string) => lines.push(l) } };
};

describe('createLogger', () => {
  it('JSON: one object per line with level, time, component, msg and fields; LOG_LEVEL filters', () => {
    const { lines, destination } = capture();
    const log = createLogger('info', 'api', { json: true, destination });
    log.debug('hidden');
    log.info('hello', { a: 1 });
    log.child('http', { route: '/x' }).warn('slow', { ms: 5 });
    expect(lines).toHaveLength(2);
    const [first, second] = lines.map((l) => JSON.parse(l));
    expect(first).toMatchObject({ level: 'info', component: 'api', msg: 'hello', a: 1 });
    expect(new Date(first.time).toISOString()).toBe(first.time);
    expect(second).toMatchObject({ level: 'warn', component: 'api:http', msg: 'slow', route: '/x', ms: 5 });
  });

  it('readable lines in development: [component] LEVEL msg {fields}', () => {
    const { lines, destination } = capture();
    const log = createLogger('debug', 'lateral', { json: false, destination });
    log.info('started', { port: 1 });
    log.child('worker').error('boom');
    expect(lines).toEqual(['[lateral] started {"port":1}\n', '[lateral:worker] ERROR boom\n']);
  });

  it('a log context adds its fields to every line inside it, across awaits, without duplicating keys', async () => {
    const { lines, destination } = capture();
    const log = createLogger('info', 'w', { json: true, destination });
    await withLogContext({ jobId: 'j1', queue: 'encode' }, async () => {
      await new Promise((r) => setTimeout(r, 1));
      addLogContext({ collection: 'c' });
      log.info('inside', { queue: 'encode' });
    });
    log.info('outside');
    expect(JSON.parse(lines[0])).toMatchObject({ jobId: 'j1', queue: 'encode', collection: 'c', msg: 'inside' });
    expect(lines[0].match(/"queue"/g)).toHaveLength(1);
    expect(JSON.parse(lines[1]).jobId).toBeUndefined();
  });
});
