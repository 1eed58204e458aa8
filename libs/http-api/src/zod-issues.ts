import type { z } from 'zod';
import type { FieldIssue } from '@lateral/shared';

/** Zod issues as `{ field, message }`, the field a dotted path such as `queries.3.text`. */
export function zodIssues(error: z.ZodError, root = ''): FieldIssue[] {
  return error.issues.map((i) => ({ field: [root, ...i.path.map(String)].filter(Boolean).join('.') || '(body)', message: i.message }));
}
