export { createApiApp, closeApi } from './app';
export { openApiDocument } from './openapi/document';
export { liveLimits, liveOpenApiDocument } from './openapi/live';
