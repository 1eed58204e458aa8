/**
 * `npm run bench -- ingest [--json] [--docs N]`
 *
 * Cranfield end to end through the HTTP API, queues and S3 (documents/s, tokens/s), and in the
 * same run the bare compute of the same work in-process (tokenize + encode + write the raw and
 * the compressed segment), so the pipeline's overhead is a ratio rather than a wall-clock number
 * that depends on the machine.
 */
import path from 'node:path';
import { loadConfig } from '@lateral/shared';
import { createCodec, readSegment, writeSegment } from '@lateral/codec';
import { getEncoder } from '@lateral/model';
import { RAW_CODEC, assembleSegmentDocs } from '@lateral/pipeline';
import { startServer } from '../../apps/all-in-one/src/server';
import { loadCranfield, withPlaceholders } from '../lib/cranfield';
import { ingest, recreateCollection } from '../lib/client';

export async function runIngestBench(args: string[]): Promise<Record<string, unknown>> {
  const limit = Number(args[args.indexOf('--docs') + 1]) || undefined;
  const config = loadConfig({ ...process.env, PORT: '0', LOG_LEVEL: 'warn', DATA_DIR: process.env.DATA_DIR ?? '.data/bench' });
  const cran = loadCranfield(path.resolve('data/cranfield'));
  const docs = withPlaceholders(cran.docs.slice(0, limit));

  // Bare compute, in-process, same model, same batching budget, same segment writer.
  const encoder = await getEncoder(path.resolve(config.MODELS_DIR, config.DEFAULT_MODEL), { executionProvider: 'cpu' });
  const codec = createCodec({ kind: 'fp16', layout: 'token', norms: 'fp32', sideInfo: false });
  await encoder.encodeDocuments(docs.slice(0, 32).map((d) => d.text)); // warm-up
  const batch = config.ENCODE_BATCH_DOCUMENTS;
  const t0 = performance.now();
  let bareTokens = 0;
  for (let i = 0; i < docs.length; i += batch) {
    const chunk = docs.slice(i, i + batch);
    const enc = await encoder.encodeDocuments(chunk.map((d) => d.text), { maxTokens: encoder.manifest.maxDocTokens, tokenBudget: config.ENCODE_TOKEN_BUDGET });
    const raw = writeSegment(assembleSegmentDocs(chunk.map((d) => d.id), enc, encoder.dims), RAW_CODEC);
    const r = readSegment(raw, 'bench');
    writeSegment({ docIds: r.docIds, tokenOffsets: r.tokenOffsets, tokenIds: r.tokenIds, vectors: r.decodeAll(), dims: r.dims, docVectors: r.docVectors ?? undefined }, codec);
    bareTokens += enc.reduce((s, e) => s + e.length, 0);
  }
  const bareSeconds = (performance.now() - t0) / 1000;

  // The pipeline: HTTP -> S3 -> encode -> S3 -> compress -> S3 -> index (manifest commit).
  const server = await startServer(config, { quiet: true });
  try {
    await recreateCollection(server.url, 'bench-ingest', config.DEFAULT_MODEL);
    const run = await ingest(server.url, 'bench-ingest', docs, { label: 'pipeline', progress: !args.includes('--json') });
    const out = {
      documents: docs.length,
      tokens: run.tokens,
      docs_per_s: round(docs.length / run.seconds),
      tokens_per_s: round(run.tokens / run.seconds),
      pipeline_seconds: round(run.seconds, 3),
      bare_seconds: round(bareSeconds, 3),
      bare_docs_per_s: round(docs.length / bareSeconds),
      overhead_ratio: round(run.seconds / bareSeconds, 2),
      bare_tokens: bareTokens,
      model: config.DEFAULT_MODEL,
    };
    console.log(`ingest ${out.documents} Cranfield documents (${out.tokens} tokens, ${out.model})`);
    console.log(`  pipeline (HTTP + Redis + S3 + workers): ${out.pipeline_seconds} s = ${out.docs_per_s} docs/s, ${out.tokens_per_s} tokens/s`);
    console.log(`  bare compute (tokenize + encode + segments, in-process): ${out.bare_seconds} s = ${out.bare_docs_per_s} docs/s`);
    console.log(`  pipeline / bare = ${out.overhead_ratio}x`);
    return out;
  } finally {
    await server.stop();
  }
}

function round(x: number, digits = 1): number {
  return Number(x.toFixed(digits));
}
