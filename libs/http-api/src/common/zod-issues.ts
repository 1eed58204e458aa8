import type { z } from 'zod';
import type { FieldIssue } from '@lateral/shared';

const camel = (k: string) => k.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase());

/**
 * Zod issues as `{ field, message }`, the field a dotted path such as `queries.3.text`. An
 * unknown key is one issue per key, named by its own path, with a hint when it is the snake_case
 * spelling of a field this API spells in camelCase (`top_k` -> `topK`): the other routes' and
 * other services' spelling, the commonest typo.
 */
export function zodIssues(error: z.ZodError, root = ''): FieldIssue[] {
  const name = (path: PropertyKey[]) => [root, ...path.map(String)].filter(Boolean).join('.') || '(body)';
  return error.issues.flatMap((i) => {
    if (i.code === 'unrecognized_keys') {
      return i.keys.map((k) => ({ field: name([...i.path, k]), message: k.includes('_') && camel(k) !== k ? `unknown field '${k}': fields are camelCase here, did you mean '${camel(k)}'?` : `unknown field '${k}'` }));
    }
    if (i.code === 'invalid_union' && Array.isArray((i as { errors?: unknown }).errors)) {
      return [{ field: name(i.path), message: unionMessage((i as unknown as { errors: z.core.$ZodIssue[][] }).errors) }];
    }
    return [{ field: name(i.path), message: i.message }];
  });
}

/**
 * One message for a value that matched none of a union's forms (zod's own is "Invalid input"):
 * what each form found wrong first, e.g. `matches none of its forms: expected string, received
 * object | id: required | text: required`. One typo stays one issue, and it says what to fix.
 */
function unionMessage(alternatives: z.core.$ZodIssue[][]): string {
  const first = alternatives.slice(0, 4).map((issues) => {
    const i = issues[0];
    if (!i) return 'no detail';
    const at = i.path.map(String).join('.');
    const what = i.code === 'unrecognized_keys' ? `unknown field '${i.keys[0]}'` : /received undefined$/.test(i.message) ? 'required' : i.message.replace(/^Invalid input: /, '');
    return at ? `${at}: ${what}` : what;
  });
  return `matches none of its forms: ${[...new Set(first)].join(' | ')}`;
}

/**
 * The top-level message of a 400: a summary such as "invalid re-rank request" says nothing a
 * caller can act on, so the first issue's field and rule follow it (`invalid re-rank request:
 * topK: unknown field 'top_k' ...`), and how many more the details list.
 */
export function validationMessage(message: string, issues: FieldIssue[]): string {
  if (issues.length === 0) return message;
  const first = issues[0];
  if (message.includes(`${first.field}:`) || message.includes(first.message)) return message;
  const more = issues.length > 1 ? ` (and ${issues.length - 1} more in details)` : '';
  return `${message}: ${first.field}: ${first.message}${more}`;
}
