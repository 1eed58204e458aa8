import { vi } from 'vitest';

/**
 * The specs of the scripts' command lines (scripts/bench/cli.spec.ts, scripts/eval/cli.spec.ts):
 * a script's entry called in the spec's process with process.exit stopped where it is called, so a
 * spec reads the exit code and what the script printed. Restore the mocks after each call
 * (`afterEach(() => vi.restoreAllMocks())`).
 */
export class Exit extends Error {
  constructor(readonly code: number | undefined) {
    super(`exit ${code}`);
  }
}

export type ScriptEntry = (args: string[]) => Promise<unknown>;

/** Runs `entry(args)` until it exits: the exit code and what it printed. `what` names it when it runs on instead of exiting. */
export async function runUntilExit(entry: ScriptEntry, args: string[], what = 'the script'): Promise<{ code: number | undefined; out: string; err: string }> {
  let out = '';
  let err = '';
  vi.spyOn(console, 'log').mockImplementation((...a: unknown[]) => void (out += `${a.join(' ')}\n`));
  vi.spyOn(console, 'error').mockImplementation((...a: unknown[]) => void (err += `${a.join(' ')}\n`));
  vi.spyOn(process, 'exit').mockImplementation((code?: string | number | null) => {
    throw new Exit(code == null ? undefined : Number(code));
  });
  try {
    await entry(args);
  } catch (e) {
    if (e instanceof Exit) return { code: e.code, out, err };
    throw e;
  }
  throw new Error(`${what} ran with ${JSON.stringify(args)} instead of exiting`);
}
