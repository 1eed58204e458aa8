export {};
/**
 * `npm run eval -- <name> [--json] [...]`: ranking-quality evaluations on real judged data.
 *   rerank       re-rank a TREC-DL-format folder's candidates per scorer (--dataset DIR --scorers a,b)
 *   negation     synthetic LIMIT-style negation benchmark: maxsim vs signed-maxsim
 *   compression  bytes per token vs nDCG@10 per codec setting (--dataset DIR in TREC-DL format, --plot out.svg, --quick)
 * With --json the last line of output is one JSON object.
 */
const evals: Record<string, () => Promise<(args: string[]) => Promise<unknown>>> = {
  rerank: async () => (await import('./eval/rerank')).runRerankEval,
  negation: async () => (await import('./eval/negation')).runNegationEval,
  compression: async () => (await import('./eval/compression')).runCompressionEvalCli,
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
