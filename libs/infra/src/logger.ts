/** A small structured logger: one JSON line per event in production, readable lines otherwise. */
export type LogLevel = 'debug' | 'info' | 'warn' | 'error';
const ORDER: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };

export interface Logger {
  debug(msg: string, extra?: Record<string, unknown>): void;
  info(msg: string, extra?: Record<string, unknown>): void;
  warn(msg: string, extra?: Record<string, unknown>): void;
  error(msg: string, extra?: Record<string, unknown>): void;
  child(component: string): Logger;
}

export function createLogger(level: LogLevel = 'info', component = 'lateral', json = process.env.NODE_ENV === 'production'): Logger {
  const emit = (l: LogLevel, msg: string, extra?: Record<string, unknown>) => {
    if (ORDER[l] < ORDER[level]) return;
    const line = json
      ? JSON.stringify({ t: new Date().toISOString(), level: l, component, msg, ...extra })
      : `[${component}] ${l === 'info' ? '' : l.toUpperCase() + ' '}${msg}${extra ? ' ' + JSON.stringify(extra) : ''}`;
    (l === 'error' || l === 'warn' ? process.stderr : process.stdout).write(line + '\n');
  };
  return {
    debug: (m, e) => emit('debug', m, e),
    info: (m, e) => emit('info', m, e),
    warn: (m, e) => emit('warn', m, e),
    error: (m, e) => emit('error', m, e),
    child: (c) => createLogger(level, `${component}:${c}`, json),
  };
}
