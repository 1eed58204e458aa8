import 'reflect-metadata';
import { Module, type DynamicModule } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import type { NestExpressApplication } from '@nestjs/platform-express';
import { SwaggerModule, type OpenAPIObject } from '@nestjs/swagger';
import type { Runtime } from '@lateral/infra';
import { CollectionsController } from './collections.controller';
import { DeletesController } from './deletes.controller';
import { DeletesService } from './deletes.service';
import { HealthController } from './health.controller';
import { JudgmentsController } from './judgments.controller';
import { JudgmentsService } from './judgments.service';
import { RerankController } from './rerank.controller';
import { SearchController } from './search.controller';
import { SearchService } from './search.service';
import { BatchesController } from './batches.controller';
import { BatchesService } from './batches.service';
import { UploadsController } from './uploads.controller';
import { ModelsController } from './models.controller';
import { LandingController } from './landing.controller';
import { CohereController } from './cohere.controller';
import { CohereService } from './cohere.service';
import { CollectionsService } from './collections.service';
import { HttpErrorsFilter, loadProbe } from './http-errors.filter';
import { backpressure } from './backpressure';
import { bodyReader } from './body-reader';
import { liveOpenApiDocument } from './openapi/live';
import { metricsEndpoint } from './metrics-endpoint';
import { requestLogContext, requestLogging } from './request-logging';
import { RerankService } from './rerank.service';
import { RUNTIME } from './tokens';
import { ADMIN_PATHS, AdminModule, mountAdminAuth } from './admin.module';
import { AdminKeysController } from './admin-keys.controller';
import { apiKeyProviders, authenticateEarly, markAdminApiKey } from './api-keys.guard';
import { ApiKeysService } from './api-keys.service';
import { requestContextMiddleware } from './request-context';
import { lapTiming, startTiming } from './server-timing';
import { QuotaController, TenantQuotasAdminController } from './quotas.controller';

@Module({})
class ApiModule {
  static forRuntime(rt: Runtime): DynamicModule {
    return {
      module: ApiModule,
      imports: [AdminModule.forRuntime(rt)],
      controllers: [CollectionsController, DeletesController, RerankController, SearchController, HealthController, AdminKeysController, BatchesController, UploadsController, ModelsController, LandingController, CohereController, JudgmentsController, QuotaController, TenantQuotasAdminController],
      providers: [
        { provide: RUNTIME, useValue: rt },
        { provide: CollectionsService, useFactory: () => new CollectionsService(rt) },
        { provide: DeletesService, useFactory: () => new DeletesService(rt) },
        { provide: RerankService, useFactory: () => new RerankService(rt) },
        { provide: SearchService, useFactory: () => new SearchService(rt) },
        { provide: JudgmentsService, useFactory: () => new JudgmentsService(rt) },
        // Batch files and the Cohere-compatible endpoint share the re-rank service's text submitter.
        { provide: BatchesService, inject: [RerankService], useFactory: (rr: RerankService) => new BatchesService(rt, rr.texts) },
        { provide: CohereService, inject: [RerankService], useFactory: (rr: RerankService) => new CohereService(rr, rt.config.RERANK_MAX_WAIT_SECONDS, rt.config.COHERE_MODEL ?? rt.config.DEFAULT_MODEL) },
        // AUTH=keys: ApiKeysGuard on every route (tenant and role from the key, rate limits)
        ...apiKeyProviders(rt, ADMIN_PATHS),
      ],
    };
  }
}

/** Builds the HTTP API around a runtime. Bodies are read as text (body-reader.ts) so JSON and NDJSON share one parser. */
export async function createApiApp(rt: Runtime): Promise<NestExpressApplication> {
  const app = await NestFactory.create<NestExpressApplication>(ApiModule.forRuntime(rt), { bodyParser: false, logger: ['error', 'warn'] });
  // The request's clock (Server-Timing on re-rank and search: server-timing.ts), then the request
  // id (x-request-id) and one log line + duration metric per request.
  app.use(startTiming);
  app.use(requestLogging(rt.logger));
  // AUTH=keys: an admin API key is an operator credential too (admin-auth.ts accepts it when marked).
  app.use(ADMIN_PATHS, markAdminApiKey(app.get(ApiKeysService)));
  mountAdminAuth(app, rt);
  // AUTH=keys: the caller's key and rate limit, before anything reads the body (the guard checks the role).
  app.use(lapTiming('http'));
  app.use(authenticateEarly(app.get(ApiKeysService), ADMIN_PATHS));
  app.use(lapTiming('auth'));
  // Back-pressure first (a saturated queue refuses before a body is read), then the body reader:
  // content types, Content-Encoding, UTF-8, MAX_JSON_DEPTH, bounded concurrency of large bodies.
  app.use(backpressure(rt.queues, rt.config.MAX_QUEUE_BACKLOG, 1000, loadProbe(rt)));
  app.use(lapTiming('backpressure'));
  app.use(bodyReader({ maxBytes: rt.config.MAX_REQUEST_BYTES, maxDepth: rt.config.MAX_JSON_DEPTH, concurrency: rt.config.BODY_PARSE_CONCURRENCY }));
  app.use(lapTiming('parse'));
  // Each request's own context (its tenant, set by ApiKeysGuard), after the body is read.
  app.use(requestContextMiddleware);
  // The request id on every line logged for this request and in the payload of every job it enqueues.
  app.use(requestLogContext);
  app.useGlobalFilters(new HttpErrorsFilter(rt.logger.child('http'), { ...rt.config, S3_ENDPOINT: rt.services.s3Endpoint ?? rt.config.S3_ENDPOINT, REDIS_URL: rt.services.redisUrl }, loadProbe(rt)));
  // Keep idle connections longer than clients and load balancers do (60 s is common): a server
  // that closes a kept-alive socket first races the client's next request on it (ECONNRESET),
  // most often when the event loop was busy (all-in-one: an index build in the same process).
  const http = app.getHttpServer() as { keepAliveTimeout: number; headersTimeout: number };
  http.keepAliveTimeout = 65_000;
  http.headersTimeout = 66_000;
  app.enableShutdownHooks();
  // The document states what this service has now (built models, operator artifacts): rebuilt when they change.
  const doc = liveOpenApiDocument(rt.config);
  app.getHttpAdapter().get('/openapi.json', (_req: unknown, res: unknown) => (res as { json(v: unknown): void }).json(doc()));
  // Prometheus: this process's registry (its workers' too in the all-in-one process) + queue depths.
  app.getHttpAdapter().get('/metrics', metricsEndpoint(rt));
  SwaggerModule.setup('docs', app, doc() as unknown as OpenAPIObject, { jsonDocumentUrl: 'docs/openapi.json' });
  return app;
}

export async function closeApi(app: NestExpressApplication): Promise<void> {
  await app.get(RerankService).close();
  await app.get(SearchService).close();
  await app.close();
}
