export { createApiApp, closeApi } from './app';
export { openApiDocument } from './openapi';
