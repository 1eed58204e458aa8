// Module boundaries: apps wire things together, adapters talk to the outside world,
// the contract and math libraries stay free of frameworks, queues, cloud SDKs and ONNX Runtime.
import nx from '@nx/eslint-plugin';
import tseslint from 'typescript-eslint';

const heavy = ['bullmq', 'ioredis', '@aws-sdk/*', '@nestjs/*', 'onnxruntime-node', 'onnxruntime-common', 's3rver', 'express'];

export default [
  // libs/simd/assembly is AssemblyScript (compiled by scripts/build-simd.cjs with its own checker)
  { ignores: ['**/node_modules/**', '**/dist/**', '.cache/**', '.data/**', '.nx/**', '**/*.cjs', 'libs/simd/assembly/**'] },
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    plugins: { '@nx': nx },
    rules: {
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@nx/enforce-module-boundaries': [
        'error',
        {
          allow: [],
          banTransitiveDependencies: false,
          depConstraints: [
            { sourceTag: 'type:app', onlyDependOnLibsWithTags: ['type:lib'] },
            // contracts and pure math: no I/O, no framework, no ONNX Runtime
            { sourceTag: 'scope:contract', onlyDependOnLibsWithTags: ['scope:contract'], bannedExternalImports: heavy },
            { sourceTag: 'scope:math', onlyDependOnLibsWithTags: ['scope:contract', 'scope:math'], bannedExternalImports: heavy },
            // S3, Redis, queues, repositories, embedded services: no ONNX Runtime, no HTTP framework
            { sourceTag: 'scope:io', onlyDependOnLibsWithTags: ['scope:contract', 'scope:math'], bannedExternalImports: ['onnxruntime-node', 'onnxruntime-common', '@nestjs/*', 'express'] },
            // the kernels own ONNX (issue 28): the graph builder, the one session factory, the inference
            // observer, the production ONNX kernels; no queues, S3, HTTP, and no model library
            { sourceTag: 'scope:kernels', onlyDependOnLibsWithTags: ['scope:contract', 'scope:math'], bannedExternalImports: ['bullmq', 'ioredis', '@aws-sdk/*', '@nestjs/*', 'express', 's3rver'] },
            // model directories, tokenizer, encoder: ONNX Runtime only through the kernels (their
            // session factory, graph builder and `ort`), never imported directly
            { sourceTag: 'scope:model', onlyDependOnLibsWithTags: ['scope:contract', 'scope:math', 'scope:io', 'scope:kernels'], bannedExternalImports: ['bullmq', '@aws-sdk/*', '@nestjs/*', 'express', 's3rver', 'onnxruntime-node', 'onnxruntime-common', 'onnx-proto'] },
            // the scorer's serving engine (segment cache, id tables, heads, segment passes, health, hit helpers):
            // reads segments and lists through the repositories; no queues, no processors, no HTTP, no SDK of its own
            { sourceTag: 'scope:serving', onlyDependOnLibsWithTags: ['scope:contract', 'scope:math', 'scope:io', 'scope:model', 'scope:kernels'], bannedExternalImports: ['bullmq', 'ioredis', '@aws-sdk/*', '@nestjs/*', 'express', 's3rver'] },
            // the processors
            { sourceTag: 'scope:pipeline', onlyDependOnLibsWithTags: ['scope:contract', 'scope:math', 'scope:io', 'scope:model', 'scope:kernels', 'scope:serving'], bannedExternalImports: ['@nestjs/*', 'express'] },
            // the HTTP API never loads ONNX Runtime: no pipeline, serving, kernels or model
            { sourceTag: 'scope:api', onlyDependOnLibsWithTags: ['scope:contract', 'scope:math', 'scope:io'], bannedExternalImports: ['onnxruntime-node', 'onnxruntime-common'] },
            // the worker composition root wires processors to queues
            { sourceTag: 'scope:composition', onlyDependOnLibsWithTags: ['scope:contract', 'scope:math', 'scope:io', 'scope:model', 'scope:kernels', 'scope:serving', 'scope:pipeline'] },
          ],
        },
      ],
    },
  },
  {
    // No processor imports a processor (nor does any module of the library but its index): a step
    // two of them need lives in a named module (ingest/segment-writer.ts, query/rerank-ids.ts, ...;
    // libs/pipeline/README.md). Import cycles anywhere are refused by `npm run lint:cycles`
    // (madge), which `npm run lint` runs.
    files: ['libs/pipeline/src/**/*.ts'],
    ignores: ['**/*.spec.ts', 'libs/pipeline/src/index.ts'],
    rules: {
      'no-restricted-imports': ['error', { patterns: [{ group: ['*.processor', '*.processor.ts'], message: 'a processor is a queue handler, not a library: import the named module that holds the step' }] }],
    },
  },
  {
    // The HTTP API reaches Redis and BullMQ only through the repositories of libs/infra
    // (ApiRepositories: job reads, completions, flows, in-flight sets, heartbeats, cancel flags).
    files: ['libs/http-api/src/**/*.ts'],
    rules: {
      'no-restricted-imports': ['error', { patterns: [{ group: ['bullmq', 'bullmq/*', 'ioredis', 'ioredis/*'], message: 'the API reaches Redis and BullMQ through the repositories of libs/infra (api-repositories.ts)' }] }],
    },
  },
  {
    // Belt and braces for the pure libraries: the rule also holds where Nx's project graph is unavailable.
    files: ['libs/shared/**/*.ts', 'libs/scoring/**/*.ts', 'libs/codec/**/*.ts', 'libs/search/**/*.ts', 'libs/training/**/*.ts', 'libs/simd/**/*.ts'],
    rules: {
      'no-restricted-imports': ['error', { patterns: heavy.map((group) => ({ group: [group], message: 'pure libraries do no I/O and import no framework' })) }],
    },
  },
];
