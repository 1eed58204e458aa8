import { parseArgs, type ParseArgsConfig } from 'node:util';

/**
 * The command lines of scripts/: node:util's parseArgs, strict (an unknown flag, a flag without
 * its value or a value given to a boolean flag is refused), with `-h` / `--help` on every script.
 * One addition: `--flag -3` passes -3 as the value of a string flag (parseArgs alone would call it
 * ambiguous), so a negative number reaches the script's own check and its message.
 */

type Options = NonNullable<ParseArgsConfig['options']>;

/** A bad command line: the script prints the message and its usage, and exits 2. */
export class CliUsageError extends Error {
  override name = 'CliUsageError';
}

const HELP = { help: { type: 'boolean', short: 'h' } } as const;

/** `argv` parsed against `options` (plus `help`); positionals only when allowed. Throws CliUsageError. */
export function parseCli<const O extends Options>(argv: readonly string[], options: O, opts: { positionals?: boolean } = {}) {
  const args: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const next = argv[i + 1];
    const name = a.startsWith('--') && !a.includes('=') ? a.slice(2) : undefined;
    if (name && options[name]?.type === 'string' && next !== undefined && /^-\d/.test(next)) {
      args.push(`${a}=${next}`);
      i++;
    } else args.push(a);
  }
  try {
    return parseArgs({ args, options: { ...options, ...HELP }, strict: true, allowPositionals: opts.positionals ?? false });
  } catch (err) {
    throw new CliUsageError((err as Error).message);
  }
}

/**
 * The entry of a script: `argv` parsed as parseCli does, then read by `read` (which may throw
 * CliUsageError for a value it refuses); `--help` prints `usage` and exits 0, a bad command line
 * prints `<script>: <why>` and the usage on stderr and exits 2.
 */
export function parseCliOrExit<const O extends Options, T = ReturnType<typeof parseCli<O>>>(
  script: string,
  usage: string,
  argv: readonly string[],
  options: O,
  opts: { positionals?: boolean } = {},
  read: (parsed: ReturnType<typeof parseCli<O>>) => T = (parsed) => parsed as T,
): T {
  try {
    const parsed = parseCli(argv, options, opts);
    if ((parsed.values as { help?: boolean }).help) {
      console.log(usage);
      process.exit(0);
    }
    return read(parsed);
  } catch (err) {
    if (!(err instanceof CliUsageError)) throw err;
    console.error(`${script}: ${err.message}\n\n${usage}`);
    process.exit(2);
  }
}

/** A whole number of at least `min` from flag `flag`'s text (CliUsageError naming the flag otherwise). */
export function intFlag(flag: string, text: string, min = 1): number {
  const n = Number(text);
  if (!Number.isInteger(n) || n < min) throw new CliUsageError(`--${flag} must be a whole number of at least ${min}, got ${JSON.stringify(text)}`);
  return n;
}

/** A comma list of whole numbers of at least `min` from flag `flag`'s text (CliUsageError naming the flag otherwise). */
export function intListFlag(flag: string, text: string, min = 1): number[] {
  const xs = text.split(',').map((t) => Number(t.trim()));
  if (text.trim() === '' || xs.some((n) => !Number.isInteger(n) || n < min)) throw new CliUsageError(`--${flag} must be a comma list of whole numbers of at least ${min}, got ${JSON.stringify(text)}`);
  return xs;
}

/** A finite number of at least `min` from flag `flag`'s text (CliUsageError naming the flag otherwise). */
export function numberFlag(flag: string, text: string, min = 0): number {
  const n = Number(text);
  if (text.trim() === '' || !Number.isFinite(n) || n < min) throw new CliUsageError(`--${flag} must be a number of at least ${min}, got ${JSON.stringify(text)}`);
  return n;
}
