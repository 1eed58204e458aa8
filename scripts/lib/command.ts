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
