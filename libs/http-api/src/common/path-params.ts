import { Injectable, type PipeTransform } from '@nestjs/common';
import type { z } from 'zod';
import { ValidationError, documentId, resourceId } from '@lateral/shared';

/**
 * Ids in URL paths go through the same zod schemas as the ids in bodies, before a controller sees
 * them: a collection, ingestion or job id must match ID_PATTERN (so `x%2F..%2F..` or an id with a
 * NUL never reaches an S3 key or a Redis key), a document id follows the body's document-id rule.
 * A bad one is a 400 naming the path parameter; the value itself is not echoed (it may be 10 kB of
 * control characters).
 *
 *   @Get(':id') get(@Param('id', CollectionIdParam) id: string)
 */
@Injectable()
class ZodParamPipe implements PipeTransform<unknown, string> {
  constructor(
    private readonly param: string,
    private readonly schema: z.ZodType<string>,
  ) {}

  transform(value: unknown): string {
    const parsed = this.schema.safeParse(value);
    if (parsed.success) return parsed.data;
    const message = parsed.error.issues[0]?.message ?? 'invalid';
    throw new ValidationError(`invalid path parameter '${this.param}': ${message}`, [{ field: `path.${this.param}`, message }]);
  }
}

/** A pipe for the path parameter `param`, validated by `schema`. */
export function pathParam(param: string, schema: z.ZodType<string>): PipeTransform<unknown, string> {
  return new ZodParamPipe(param, schema);
}

/** `:id` of /v1/collections/:id/... */
export const CollectionIdParam = pathParam('id', resourceId('collection id'));
/** `:ingestionId` of /v1/collections/:id/ingestions/:ingestionId */
export const IngestionIdParam = pathParam('ingestionId', resourceId('ingestion id'));
/** `:id` of /v1/rerank/:id and /v1/search/:id (rr-…, sr-…) */
export const JobIdParam = pathParam('id', resourceId('job id'));
/** `:docId` of /v1/collections/:id/documents/:docId */
export const DocumentIdParam = pathParam('docId', documentId('document id'));
