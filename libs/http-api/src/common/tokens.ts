/** Nest injection tokens: the configuration, and the repositories the health check reads (app.ts provides both). */
export const CONFIG = 'LATERAL_CONFIG';
export const HEALTH_CHECKS = 'LATERAL_HEALTH_CHECKS';
