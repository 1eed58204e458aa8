import { defineConfig } from 'vitest/config';
import base from './vitest.config';

/**
 * The fault suite (`npm run test:faults`, also run by .ci/run): each file starts its own Redis,
 * S3 server, API and worker processes on loopback and kills, restarts or breaks them. One file at
 * a time: they measure recovery, and CI's machines are small. `npm test` leaves these files out.
 */
export default defineConfig({
  ...base,
  test: {
    ...base.test,
    include: ['test/faults/*.faults.spec.ts'],
    exclude: [],
    fileParallelism: false,
    testTimeout: 420_000,
  },
});
