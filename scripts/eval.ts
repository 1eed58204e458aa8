export {};
/**
 * `npm run eval -- <name> [--json] [...]`: ranking-quality evaluations on real judged data.
 *   rerank       re-rank a TREC-DL-format folder's candidates per scorer (--dataset DIR --scorers a,b)
 *   negation     synthetic LIMIT-style negation benchmark: maxsim vs signed-maxsim
 *   compression  bytes per token vs nDCG@10 for each codec setting (Cranfield, in-process)
 * With --json the last line of output is one JSON object.
 */
const evals: Record<string, () => Promise<(args: string[]) => Promise<unknown>>> = {
  rerank: async () => (await import('./eval/rerank')).runRerankEval,
  negation: async () => (await import('./eval/negation')).runNegationEval,
  compression: async () => {
    const m = await import('./eval/compression');
    return async (args: string[]) => {
      const opt = (name: string) => (args.includes(name) ? args[args.indexOf(name) + 1] : undefined);
      const res = await m.runCompressionEval({ dataDir: opt('--data') ?? 'data/cranfield', modelDir: opt('--model'), log: (s: string) => console.log(s) });
      for (const row of res.rows ?? []) console.log(m.formatRow(row));
      return res;
    };
  },
};

async function main() {
  const [name, ...args] = process.argv.slice(2);
  if (!name || !evals[name]) {
    console.error(`usage: npm run eval -- <${Object.keys(evals).join('|')}> [--json]`);
    process.exit(2);
  }
  const result = await (await evals[name]())(args);
  if (args.includes('--json')) console.log(JSON.stringify(result));
  process.exit(0);
}

main().catch((err) => {
  console.error(`eval failed: ${err instanceof Error ? err.stack : err}`);
  process.exit(1);
});
