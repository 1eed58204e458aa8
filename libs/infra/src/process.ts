import type { Logger } from './logger';

const SIGNAL_EXIT_CODES: Record<string, number> = { SIGINT: 130, SIGTERM: 143 };

/** Exits once what was written to stdout and stderr is flushed (writes to pipes are asynchronous on some platforms). */
function exitFlushed(code: number): void {
  process.stdout.write('', () => process.stderr.write('', () => process.exit(code)));
}

/**
 * The apps' graceful shutdown: on the first SIGTERM or SIGINT, logs it, runs `stop` once and exits
 * 0 (1 when `stop` throws or takes longer than `timeoutMs`). The handlers stay installed, so the
 * same signal delivered again does not kill the process half-way through `stop` with the default
 * action: one Ctrl-C in a terminal reaches this process twice (directly, as a member of the
 * foreground process group, and forwarded by `npm start`), so a repeat within `duplicateMs` is
 * ignored; a later one exits at once (128 + signal), e.g. when `stop` hangs and the user insists.
 * Embedded services die with the process anyway (see startEmbeddedRedis).
 */
export function stopOnSignal(
  stop: () => Promise<void>,
  opts: { logger?: Logger; timeoutMs?: number; duplicateMs?: number } = {},
): void {
  const info = (m: string) => (opts.logger ? opts.logger.info(m) : console.log(m));
  const error = (m: string) => (opts.logger ? opts.logger.error(m) : console.error(m));
  const timeoutMs = opts.timeoutMs ?? 60_000;
  const duplicateMs = opts.duplicateMs ?? 2_000;
  let since: number | undefined;
  const handler = (signal: NodeJS.Signals) => {
    if (since !== undefined) {
      if (Date.now() - since < duplicateMs) return;
      error(`${signal} again while shutting down: exiting now`);
      process.exit(SIGNAL_EXIT_CODES[signal] ?? 1);
    }
    since = Date.now();
    info(`${signal} received: shutting down`);
    const timer = setTimeout(() => {
      error(`shutdown did not finish within ${timeoutMs / 1000} s: exiting`);
      process.exit(1);
    }, timeoutMs);
    timer.unref();
    stop().then(
      () => {
        clearTimeout(timer);
        info(`stopped in ${Date.now() - since!} ms`);
        exitFlushed(0);
      },
      (err: unknown) => {
        clearTimeout(timer);
        error(`shutdown failed: ${err instanceof Error ? err.message : String(err)}`);
        exitFlushed(1);
      },
    );
  };
  process.on('SIGTERM', handler);
  process.on('SIGINT', handler);
}

/** Runs an entry point; a failure prints its message (with `prefix`) and exits 1. */
export function runMain(main: () => Promise<void>, prefix = ''): void {
  main().catch((err: unknown) => {
    console.error(`${prefix}${err instanceof Error ? err.message : err}`);
    process.exit(1);
  });
}
