import { runCommand, type Command } from './lib/command';

/**
 * `npm run eval -- <name> [--json] [...]`: ranking-quality evaluations on real judged data.
 *   rerank       re-rank a TREC-DL-format folder's candidates per scorer (--dataset DIR --scorers a,b)
 *   negation     synthetic LIMIT-style negation benchmark: maxsim vs signed-maxsim
 *   compression  bytes per token vs nDCG@10 per codec setting (--dataset DIR in TREC-DL format, --plot out.svg, --quick)
 *   retrieval    POST /v1/search per mode through the service: nDCG@10, recall@100, latency p50/p95
 *                (--dataset DIR in Vaswani (TREC) or Cranfield (Glasgow) format, --model NAME, --plot out.svg, --quick)
 *   heads        learned heads (LITE default / small, K-NRM) trained per fold vs MaxSim: cross-validated nDCG@10 on Cranfield
 *                and Vaswani with glove-ctx-100d and minilm-l6-384, and trained on both re-ranking TREC DL 2019 (--dl19); each also
 *                interpolated with MaxSim; the AESI comparison (--aesi, --aesi-json) (--quick, --folds, --heads, --models, --datasets, --no-cv)
 *   fusion       hybrid's default fusion: exact MaxSim and BM25 ('english') fused by every setting of a grid, in process,
 *                on Cranfield and Vaswani (--datasets a,b --model NAME --depth N)
 * With --json the last line of output is one JSON object.
 */
const evals: Record<string, () => Promise<Command>> = {
  rerank: async () => (await import('./eval/rerank')).runRerankEval,
  negation: async () => (await import('./eval/negation')).runNegationEval,
  compression: async () => (await import('./eval/compression')).runCompressionEvalCli,
  retrieval: async () => (await import('./eval/retrieval')).runRetrievalEvalCli,
  heads: async () => (await import('./eval/heads')).runHeadsEval,
  fusion: async () => (await import('./eval/fusion')).runFusionEval,
};

runCommand('eval', evals);
