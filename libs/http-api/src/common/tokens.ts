/** DI token for the process runtime (config, S3 store, Redis, queues, repositories). */
export const RUNTIME = 'LATERAL_RUNTIME';
