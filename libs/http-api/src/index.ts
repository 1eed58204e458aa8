export { createApiApp, closeApi } from './app';
export { openApiDocument } from './openapi';
export { liveLimits, liveOpenApiDocument } from './openapi-live';
