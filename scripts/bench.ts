import { runCommand, type Command } from './lib/command';

/**
 * `npm run bench -- <name> [--json] [...]`: the repository's benchmarks. Each reports ratios
 * measured in the same run (pipeline vs bare compute, kernel vs the machine's GEMM peak), never
 * absolute times alone. With --json the last line of output is one JSON object.
 */
const benches: Record<string, () => Promise<Command>> = {
  ingest: async () => (await import('./bench/ingest')).runIngestBench,
  score: async () => (await import('./bench/score')).runScoreBench,
  peers: async () => (await import('./bench/peers')).runPeersBench,
  'rerank-batch': async () => (await import('./bench/rerank-batch')).runRerankBatchBench,
  documents: async () => (await import('./bench/documents')).runDocumentsBench,
  'segment-cache': async () => (await import('./bench/segment-cache')).runSegmentCacheBench,
  'cold-scorer': async () => (await import('./bench/cold-scorer')).runColdScorerBench,
  load: async () => (await import('./bench/load')).runLoadBench,
  latency: async () => (await import('./bench/latency')).runLatencyBench,
  scale: async () => (await import('./bench/scale')).runScaleBench,
  encode: async () => (await import('./bench/encode')).runEncodeBench,
  refit: async () => (await import('./bench/refit')).runRefitBench,
};

runCommand('bench', benches);
