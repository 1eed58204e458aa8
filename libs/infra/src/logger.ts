import { AsyncLocalStorage } from 'node:async_hooks';
import { pino, type DestinationStream, type Logger as PinoLogger } from 'pino';

/**
 * Structured logs (pino) behind a small interface the whole code base uses: one JSON object per
 * line in production (`NODE_ENV=production`), a readable line otherwise; `LOG_LEVEL` filters.
 *
 * Context: the fields of the enclosing `withLogContext` call (the API's request id around a
 * request; the job id, queue, tenant, collection and request id around a job, set by WorkerHost)
 * are added to every line any logger writes inside it, so code that logs through a logger it was
 * given at start-up still says which request or job it works for.
 */
export type LogLevel = 'debug' | 'info' | 'warn' | 'error';
export type LogFields = Record<string, unknown>;

export interface Logger {
  debug(msg: string, extra?: LogFields): void;
  info(msg: string, extra?: LogFields): void;
  warn(msg: string, extra?: LogFields): void;
  error(msg: string, extra?: LogFields): void;
  /** A logger for a part of the program (`component` is appended: `lateral:worker:encode`), with `fields` on each of its lines. */
  child(component: string, fields?: LogFields): Logger;
  /** The least severe level it writes (a compute thread logs from that level up and hands its lines to this logger). */
  readonly level?: LogLevel;
}

/** Where lines go: anything with `write(line)` (pino's own destinations, a stream, a test's array). */
export type LogDestination = DestinationStream | { write(line: string): unknown };

export interface LoggerOptions {
  /** One JSON object per line (default: `NODE_ENV === 'production'`). */
  json?: boolean;
  /** Default: stdout, and stderr for warn and error. */
  destination?: LogDestination;
}

const context = new AsyncLocalStorage<LogFields>();

/** Runs `fn` with `fields` (added to the enclosing context's) on every line logged inside it, awaited continuations included. */
export function withLogContext<T>(fields: LogFields, fn: () => T): T {
  return context.run({ ...context.getStore(), ...fields }, fn);
}

/** The fields of the enclosing `withLogContext`, if any (e.g. the request id a job is enqueued for). */
export function currentLogContext(): Readonly<LogFields> | undefined {
  return context.getStore();
}

/**
 * Adds fields to the enclosing context from inside it, e.g. a job that learns its collection from
 * the request it reads. Does nothing outside a context.
 */
export function addLogContext(fields: LogFields): void {
  const store = context.getStore();
  if (store) Object.assign(store, fields);
}

const LEVEL_NUMBERS: Record<string, number> = { trace: 10, debug: 20, info: 30, warn: 40, error: 50, fatal: 60 };
const OWN_KEYS = new Set(['time', 'level', 'component', 'msg', 'pid', 'hostname']);

/**
 * Development output: `[component] msg {extra}`, warn and error prefixed with their level and
 * written to stderr. Parses pino's JSON line (development only; production writes pino's line as is).
 */
function readableDestination(out: NodeJS.WritableStream = process.stdout, err: NodeJS.WritableStream = process.stderr): LogDestination {
  return {
    write(line: string) {
      let o: LogFields;
      try {
        o = JSON.parse(line) as LogFields;
      } catch {
        out.write(line);
        return;
      }
      const level = String(o.level);
      const extra: LogFields = {};
      for (const [k, v] of Object.entries(o)) if (!OWN_KEYS.has(k)) extra[k] = v;
      const text = `[${String(o.component ?? 'lateral')}] ${level === 'info' ? '' : level.toUpperCase() + ' '}${String(o.msg ?? '')}${Object.keys(extra).length ? ' ' + JSON.stringify(extra) : ''}\n`;
      ((LEVEL_NUMBERS[level] ?? 30) >= 40 ? err : out).write(text);
    },
  };
}

function defaultJsonDestination(): DestinationStream {
  return pino.multistream(
    [
      { level: 'debug', stream: process.stdout },
      { level: 'warn', stream: process.stderr },
    ],
    { dedupe: true },
  );
}

class PinoBackedLogger implements Logger {
  constructor(
    private readonly root: PinoLogger,
    private readonly component: string,
    private readonly fields: LogFields | undefined,
    private readonly byComponent: Map<string, PinoLogger>,
  ) {}

  get level(): LogLevel {
    return this.root.level as LogLevel;
  }

  private target(): PinoLogger {
    let l = this.byComponent.get(this.component);
    if (!l) {
      l = this.root.child({ component: this.component });
      this.byComponent.set(this.component, l);
    }
    return l;
  }

  private emit(level: LogLevel, msg: string, extra?: LogFields): void {
    const l = this.target();
    if (!l.isLevelEnabled(level)) return;
    const obj = this.fields ? { ...this.fields, ...extra } : extra;
    if (obj) l[level](obj, msg);
    else l[level](msg);
  }

  debug(msg: string, extra?: LogFields): void {
    this.emit('debug', msg, extra);
  }
  info(msg: string, extra?: LogFields): void {
    this.emit('info', msg, extra);
  }
  warn(msg: string, extra?: LogFields): void {
    this.emit('warn', msg, extra);
  }
  error(msg: string, extra?: LogFields): void {
    this.emit('error', msg, extra);
  }
  child(component: string, fields?: LogFields): Logger {
    const merged = this.fields || fields ? { ...this.fields, ...fields } : undefined;
    return new PinoBackedLogger(this.root, `${this.component}:${component}`, merged, this.byComponent);
  }
}

export function createLogger(level: LogLevel = 'info', component = 'lateral', options: boolean | LoggerOptions = {}): Logger {
  const opts: LoggerOptions = typeof options === 'boolean' ? { json: options } : options;
  const json = opts.json ?? process.env.NODE_ENV === 'production';
  const destination = json ? (opts.destination ?? defaultJsonDestination()) : opts.destination ? readableDestination(asStream(opts.destination), asStream(opts.destination)) : readableDestination();
  const root = pino(
    {
      level,
      base: json ? { pid: process.pid } : null,
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
      // A fresh object each time: pino merges the call's fields into it.
      mixin: () => ({ ...context.getStore() }),
    },
    destination as DestinationStream,
  );
  return new PinoBackedLogger(root, component, undefined, new Map());
}

function asStream(d: LogDestination): NodeJS.WritableStream {
  return { write: (s: string) => (d.write(s), true) } as unknown as NodeJS.WritableStream;
}
