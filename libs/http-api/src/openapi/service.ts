/** The service's own operations (models.controller.ts, health.controller.ts): tag `service`. */
import { LivenessSchema, ModelListSchema, ReadinessSchema } from '@lateral/shared';
import { json, type ApiRegistry } from './registry';

const READY_DESCRIPTION =
  "200 with status 'ok' when Redis and S3 answer within HEALTH_CHECK_TIMEOUT_MS and DEFAULT_MODEL's manifest.json is under MODELS_DIR. " +
  "200 with status 'overloaded' (+ Retry-After) when a check did not answer in time because of load: a connected Redis or an S3 endpoint that accepts connections that did not answer within HEALTH_CHECK_TIMEOUT_MS, or any check while this process's event loop was held up past EVENT_LOOP_OVERLOAD_MS; that check has `ok` false and `overloaded` true. A busy process is not taken out of the load balancer for being busy. " +
  "Otherwise 503 with status 'degraded' and the same body: a backing service down (refused, not connected, no answer while neither connected nor busy) sets its `ok` to false and adds `Retry-After`; a default model that is not built sets `models.ok` to false and lists it in `models.missing` with a `hint` (`npm run build-model`), without Retry-After: it needs an operator, not a retry. " +
  'Public (no API key). A Kubernetes readiness probe (infra/k8s/api.yaml).';

export function registerService(api: ApiRegistry): void {
  api.op('service', 'get', '/v1/models', {
    summary:
      'The models this service encodes with (every model directory under MODELS_DIR with a valid manifest.json), which one is DEFAULT_MODEL and which one the Cohere-compatible route uses for Cohere model names (COHERE_MODEL)',
    responses: { '200': json('models', api.output(ModelListSchema)) },
  });
  const ready = {
    '200': json("ready: status 'ok', or 'overloaded' (then with a Retry-After header)", api.output(ReadinessSchema)),
    '503': json('not ready: Redis or S3 down (Retry-After set), or the default model missing (models.ok false)', api.output(ReadinessSchema)),
  };
  api.op('service', 'get', '/v1/health', { summary: 'Readiness (the same answer as /v1/health/ready, kept for existing clients)', description: READY_DESCRIPTION, responses: ready });
  api.op('service', 'get', '/v1/health/ready', { summary: 'Readiness: Redis, S3, the default model, queue counts', description: READY_DESCRIPTION, responses: ready });
  api.op('service', 'get', '/v1/health/live', {
    summary: 'Liveness: the process answers',
    description:
      'Always 200 while the process can answer HTTP: it checks no dependency (Redis or S3 down or slow does not fail it) and does not fail because the process is busy (the lag is reported, not judged). ' +
      'Public (no API key). A Kubernetes liveness probe (infra/k8s/api.yaml): give it a timeout and failure threshold longer than the longest task that may hold the event loop.',
    responses: { '200': json('alive', api.output(LivenessSchema)) },
  });
}
