export {};
/**
 * `npm run bench -- <name> [--json] [...]`: the repository's benchmarks. Each reports ratios
 * measured in the same run (pipeline vs bare compute, kernel vs the machine's GEMM peak), never
 * absolute times alone. With --json the last line of output is one JSON object.
 */
const benches: Record<string, () => Promise<(args: string[]) => Promise<Record<string, unknown>>>> = {
  ingest: async () => (await import('./bench/ingest')).runIngestBench,
  score: async () => (await import('./bench/score')).runScoreBench,
};

async function main() {
  const [name, ...args] = process.argv.slice(2);
  if (!name || !benches[name]) {
    console.error(`usage: npm run bench -- <${Object.keys(benches).join('|')}> [--json]`);
    process.exit(2);
  }
  const result = await (await benches[name]())(args);
  if (args.includes('--json')) console.log(JSON.stringify(result));
  process.exit(0);
}

main().catch((err) => {
  console.error(`bench failed: ${err instanceof Error ? err.stack : err}`);
  process.exit(1);
});
