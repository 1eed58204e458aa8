/** Runs `stop` once on SIGTERM or SIGINT, then exits 0 (the apps' graceful shutdown). */
export function stopOnSignal(stop: () => Promise<void>): void {
  const handler = async () => {
    await stop();
    process.exit(0);
  };
  process.once('SIGTERM', handler);
  process.once('SIGINT', handler);
}

/** Runs an entry point; a failure prints its message (with `prefix`) and exits 1. */
export function runMain(main: () => Promise<void>, prefix = ''): void {
  main().catch((err: unknown) => {
    console.error(`${prefix}${err instanceof Error ? err.message : err}`);
    process.exit(1);
  });
}
