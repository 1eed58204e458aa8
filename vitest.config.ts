import { configDefaults, defineConfig } from 'vitest/config';
import { fileURLToPath } from 'node:url';

const lib = (name: string) => fileURLToPath(new URL(`./libs/${name}/src/index.ts`, import.meta.url));

export default defineConfig({
  resolve: {
    alias: {
      '@lateral/shared': lib('shared'),
      '@lateral/scoring': lib('scoring'),
      '@lateral/codec': lib('codec'),
      '@lateral/search': lib('search'),
      '@lateral/simd': lib('simd'),
      '@lateral/training': lib('training'),
      '@lateral/model': lib('model'),
      '@lateral/infra': lib('infra'),
      '@lateral/kernels': lib('kernels'),
      '@lateral/serving': lib('serving'),
      '@lateral/pipeline': lib('pipeline'),
      '@lateral/http-api': lib('http-api'),
      '@lateral/workers': lib('workers'),
    },
  },
  test: {
    include: ['apps/**/*.spec.ts', 'libs/**/*.spec.ts', 'scripts/**/*.spec.ts', 'test/**/*.spec.ts'],
    // The fault suite runs on its own: `npm run test:faults` (vitest.faults.config.ts; .ci/run calls both).
    exclude: [...configDefaults.exclude, 'test/faults/**'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    pool: 'forks',
    globalSetup: ['test/global-setup.ts'],
  },
});
