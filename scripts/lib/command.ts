import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

/**
 * The shared entry of `npm run bench -- <name>` and `npm run eval -- <name>`: look the command up,
 * run it with the remaining arguments, and with --json print its result as the last line.
 */
export type Command = (args: string[]) => Promise<unknown>;

export function runCommand(kind: string, commands: Record<string, () => Promise<Command>>): void {
  const [name, ...args] = process.argv.slice(2);
  const usage = `usage: npm run ${kind} -- <${Object.keys(commands).join('|')}> [--json] [...] (npm run ${kind} -- <name> --help: its flags)`;
  if (name === '--help' || name === '-h') {
    console.log(usage);
    process.exit(0);
  }
  if (!name || !commands[name]) {
    console.error(name ? `${kind}: unknown ${kind} ${JSON.stringify(name)}\n\n${usage}` : usage);
    process.exit(2);
  }
  commands[name]()
    .then((command) => command(args))
    .then((result) => {
      if (args.includes('--json')) console.log(JSON.stringify(result));
      process.exit(0);
    })
    .catch((err) => {
      console.error(`${kind} failed: ${err instanceof Error ? err.stack : err}`);
      process.exit(1);
    });
}

/** Whether the module whose import.meta.url is `moduleUrl` is the script node was started with. */
export function isMainModule(moduleUrl: string): boolean {
  return !!process.argv[1] && moduleUrl === pathToFileURL(resolve(process.argv[1])).href;
}

/**
 * A command file run directly (`npx tsx scripts/bench/score.ts ...`): `command` with the script's
 * arguments, its result as the last line with --json, a failure's stack on stderr and exit 1.
 * Imported (by scripts/bench.ts, scripts/eval.ts or a spec), it does nothing.
 */
export function runIfMain(moduleUrl: string, command: Command): void {
  if (!isMainModule(moduleUrl)) return;
  command(process.argv.slice(2))
    .then((res) => {
      if (process.argv.includes('--json')) console.log(JSON.stringify(res));
    })
    .catch((err: unknown) => {
      console.error(err instanceof Error ? err.stack : err);
      process.exit(1);
    });
}
