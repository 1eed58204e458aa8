// Module boundaries: apps wire things together, adapters talk to the outside world,
// the contract and math libraries stay free of frameworks, queues, cloud SDKs and ONNX Runtime.
import nx from '@nx/eslint-plugin';
import tseslint from 'typescript-eslint';

const heavy = ['bullmq', 'ioredis', '@aws-sdk/*', '@nestjs/*', 'onnxruntime-node', 'onnxruntime-common', 's3rver', 'express'];

export default [
  { ignores: ['**/node_modules/**', '**/dist/**', '.cache/**', '.data/**', '.nx/**', '**/*.cjs'] },
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
            { sourceTag: 'scope:contract', onlyDependOnLibsWithTags: ['scope:contract'], bannedExternalImports: heavy },
            { sourceTag: 'scope:math', onlyDependOnLibsWithTags: ['scope:contract', 'scope:math'], bannedExternalImports: heavy },
            { sourceTag: 'scope:adapter', onlyDependOnLibsWithTags: ['scope:contract', 'scope:math', 'scope:adapter'] },
          ],
        },
      ],
    },
  },
  {
    // Belt and braces for the pure libraries: the rule also holds where Nx's project graph is unavailable.
    files: ['libs/shared/**/*.ts', 'libs/scoring/**/*.ts', 'libs/codec/**/*.ts'],
    rules: {
      'no-restricted-imports': ['error', { patterns: heavy.map((group) => ({ group: [group], message: 'pure libraries do no I/O and import no framework' })) }],
    },
  },
];
