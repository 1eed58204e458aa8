import 'reflect-metadata';
import { Module, type DynamicModule } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import type { NestExpressApplication } from '@nestjs/platform-express';
import { SwaggerModule, type OpenAPIObject } from '@nestjs/swagger';
import { apiRepositories, pickRepositories, type ApiRepositories, type Runtime } from '@lateral/infra';
import { CollectionsController } from './collections/collections.controller';
import { DeletesController } from './documents/deletes.controller';
import { DELETES_REPOSITORIES, DeletesService } from './documents/deletes.service';
import { HEALTH_REPOSITORIES, HealthController } from './admin/health.controller';
import { JudgmentsController } from './judgments/judgments.controller';
import { JUDGMENTS_REPOSITORIES, JudgmentsService } from './judgments/judgments.service';
import { FUSION_FIT_REPOSITORIES, FusionFitService } from './judgments/fusion-fit.service';
import { RerankController } from './rerank/rerank.controller';
import { SearchController } from './search/search.controller';
import { SEARCH_REPOSITORIES, SearchService } from './search/search.service';
import { BatchesController } from './batches/batches.controller';
import { BATCHES_REPOSITORIES, BatchesService } from './batches/batches.service';
import { UploadsController } from './batches/uploads.controller';
import { ModelsController } from './collections/models.controller';
import { LandingController } from './admin/landing.controller';
import { CohereController } from './rerank/cohere.controller';
import { CohereService } from './rerank/cohere.service';
import { COLLECTIONS_REPOSITORIES, CollectionsService } from './collections/collections.service';
import { DocumentsController } from './documents/documents.controller';
import { DOCUMENTS_REPOSITORIES, DocumentsService } from './documents/documents.service';
import { HttpErrorsFilter, loadProbe } from './common/http-errors.filter';
import { backpressure } from './common/backpressure';
import { bodyReader } from './common/body-reader';
import { liveOpenApiDocument } from './openapi/live';
import { METRICS_REPOSITORIES, metricsEndpoint } from './admin/metrics-endpoint';
import { requestLogContext, requestLogging } from './common/request-logging';
import { RERANK_REPOSITORIES, RerankService } from './rerank/rerank.service';
import { CONFIG, HEALTH_CHECKS } from './common/tokens';
import { ADMIN_PATHS, AdminModule, mountAdminAuth } from './admin/admin.module';
import { ADMIN_REPOSITORIES } from './admin/admin.service';
import { QUOTAS_REPOSITORIES, TenantQuotas } from './auth/quotas';
import { TEXT_RERANK_REPOSITORIES, TextRerankSubmitter } from './rerank/text-candidates';
import { AdminKeysController } from './auth/admin-keys.controller';
import { apiKeyProviders, authenticateEarly, markAdminApiKey } from './auth/api-keys.guard';
import { API_KEYS_REPOSITORIES, ApiKeysService } from './auth/api-keys.service';
import { requestContextMiddleware } from './common/request-context';
import { lapTiming, startTiming } from './common/server-timing';
import { QuotaController, TenantQuotasAdminController } from './auth/quotas.controller';

/**
 * The composition of the API: each service is built here from the few repositories it uses
 * (ApiRepositories, libs/infra/src/api-repositories.ts), picked by the list its file exports
 * (`*_REPOSITORIES`), so it holds no other at run time either; none receives the runtime.
 */
@Module({})
class ApiModule {
  static register(repos: ApiRepositories): DynamicModule {
    const { config } = repos;
    return {
      module: ApiModule,
      imports: [AdminModule.register(pickRepositories(repos, ADMIN_REPOSITORIES))],
      controllers: [CollectionsController, DocumentsController, DeletesController, RerankController, SearchController, HealthController, AdminKeysController, BatchesController, UploadsController, ModelsController, LandingController, CohereController, JudgmentsController, QuotaController, TenantQuotasAdminController],
      providers: [
        { provide: CONFIG, useValue: config },
        { provide: HEALTH_CHECKS, useValue: pickRepositories(repos, HEALTH_REPOSITORIES) },
        // One quota checker for every service: its per-tenant serialisation must be shared.
        { provide: TenantQuotas, useFactory: () => new TenantQuotas(pickRepositories(repos, QUOTAS_REPOSITORIES)) },
        // Re-rank requests, batch files and the Cohere-compatible endpoint share one text submitter.
        { provide: TextRerankSubmitter, useFactory: () => new TextRerankSubmitter(pickRepositories(repos, TEXT_RERANK_REPOSITORIES)) },
        { provide: CollectionsService, useFactory: () => new CollectionsService(pickRepositories(repos, COLLECTIONS_REPOSITORIES)) },
        { provide: DocumentsService, inject: [TenantQuotas], useFactory: (quotas: TenantQuotas) => new DocumentsService({ ...pickRepositories(repos, DOCUMENTS_REPOSITORIES), quotas }) },
        { provide: DeletesService, useFactory: () => new DeletesService(pickRepositories(repos, DELETES_REPOSITORIES)) },
        { provide: RerankService, inject: [TenantQuotas, TextRerankSubmitter], useFactory: (quotas: TenantQuotas, texts: TextRerankSubmitter) => new RerankService({ ...pickRepositories(repos, RERANK_REPOSITORIES), quotas, texts }) },
        { provide: SearchService, inject: [TenantQuotas], useFactory: (quotas: TenantQuotas) => new SearchService({ ...pickRepositories(repos, SEARCH_REPOSITORIES), quotas }) },
        { provide: JudgmentsService, inject: [TenantQuotas], useFactory: (quotas: TenantQuotas) => new JudgmentsService({ ...pickRepositories(repos, JUDGMENTS_REPOSITORIES), quotas }) },
        { provide: FusionFitService, inject: [SearchService], useFactory: (search: SearchService) => new FusionFitService({ ...pickRepositories(repos, FUSION_FIT_REPOSITORIES), search }) },
        { provide: BatchesService, inject: [TenantQuotas, TextRerankSubmitter], useFactory: (quotas: TenantQuotas, texts: TextRerankSubmitter) => new BatchesService({ ...pickRepositories(repos, BATCHES_REPOSITORIES), quotas, texts }) },
        { provide: CohereService, inject: [RerankService], useFactory: (rr: RerankService) => new CohereService(rr, config.RERANK_MAX_WAIT_SECONDS, config.COHERE_MODEL ?? config.DEFAULT_MODEL) },
        // AUTH=keys: ApiKeysGuard on every route (tenant and role from the key, rate limits)
        ...apiKeyProviders(pickRepositories(repos, API_KEYS_REPOSITORIES), ADMIN_PATHS),
      ],
    };
  }
}

/** The repositories each API app was built with (closed by closeApi). */
const built = new WeakMap<NestExpressApplication, ApiRepositories>();

/** Builds the HTTP API around a runtime. Bodies are read as text (body-reader.ts) so JSON and NDJSON share one parser. */
export async function createApiApp(rt: Runtime): Promise<NestExpressApplication> {
  const repos = apiRepositories(rt);
  const { config } = repos;
  const app = await NestFactory.create<NestExpressApplication>(ApiModule.register(repos), { bodyParser: false, logger: ['error', 'warn'] });
  built.set(app, repos);
  // The request's clock (Server-Timing on re-rank and search: server-timing.ts), then the request
  // id (x-request-id) and one log line + duration metric per request.
  app.use(startTiming);
  app.use(requestLogging(repos.logger));
  // AUTH=keys: an admin API key is an operator credential too (admin-auth.ts accepts it when marked).
  app.use(ADMIN_PATHS, markAdminApiKey(app.get(ApiKeysService)));
  mountAdminAuth(app, config);
  // AUTH=keys: the caller's key and rate limit, before anything reads the body (the guard checks the role).
  app.use(lapTiming('http'));
  app.use(authenticateEarly(app.get(ApiKeysService), ADMIN_PATHS));
  app.use(lapTiming('auth'));
  // Back-pressure first (a saturated queue refuses before a body is read), then the body reader:
  // content types, Content-Encoding, UTF-8, MAX_JSON_DEPTH, bounded concurrency of large bodies.
  app.use(backpressure(repos.queues, config.MAX_QUEUE_BACKLOG, 1000, loadProbe(repos)));
  app.use(lapTiming('backpressure'));
  app.use(bodyReader({ maxBytes: config.MAX_REQUEST_BYTES, maxDepth: config.MAX_JSON_DEPTH, concurrency: config.BODY_PARSE_CONCURRENCY }));
  app.use(lapTiming('parse'));
  // Each request's own context (its tenant, set by ApiKeysGuard), after the body is read.
  app.use(requestContextMiddleware);
  // The request id on every line logged for this request and in the payload of every job it enqueues.
  app.use(requestLogContext);
  app.useGlobalFilters(new HttpErrorsFilter(repos.logger.child('http'), { ...config, S3_ENDPOINT: repos.services.s3Endpoint ?? config.S3_ENDPOINT, REDIS_URL: repos.services.redisUrl }, loadProbe(repos)));
  // Keep idle connections longer than clients and load balancers do (60 s is common): a server
  // that closes a kept-alive socket first races the client's next request on it (ECONNRESET),
  // most often when the event loop was busy (all-in-one: an index build in the same process).
  const http = app.getHttpServer() as { keepAliveTimeout: number; headersTimeout: number };
  http.keepAliveTimeout = 65_000;
  http.headersTimeout = 66_000;
  app.enableShutdownHooks();
  // The document states what this service has now (built models, operator artifacts): rebuilt when they change.
  const doc = liveOpenApiDocument(config);
  app.getHttpAdapter().get('/openapi.json', (_req: unknown, res: unknown) => (res as { json(v: unknown): void }).json(doc()));
  // Prometheus: this process's registry (its workers' too in the all-in-one process) + queue depths.
  app.getHttpAdapter().get('/metrics', metricsEndpoint(pickRepositories(repos, METRICS_REPOSITORIES)));
  SwaggerModule.setup('docs', app, doc() as unknown as OpenAPIObject, { jsonDocumentUrl: 'docs/openapi.json' });
  return app;
}

export async function closeApi(app: NestExpressApplication): Promise<void> {
  await built.get(app)?.close();
  await app.close();
}
