import { z } from 'zod';
import { ValidationError, type FieldIssue } from '@lateral/shared';
import type { DocMask, SearchSegment } from './types';

/**
 * Metadata filters in Qdrant's shape, applied before ranking (a document a filter rejects never
 * takes a place in any top-k' or top-n list: the search functions skip it through a DocMask).
 *
 * A filter is `{ must?: [...], should?: [...], must_not?: [...] }`: every `must` condition holds,
 * at least one `should` condition holds (when `should` is non-empty), no `must_not` condition
 * holds. The empty filter `{}` keeps every document. A condition is exactly one of:
 *
 * | condition | holds when |
 * |---|---|
 * | `{ key, match: { value } }` | some value at `key` equals `value` (string, number or boolean; strict) |
 * | `{ key, match: { any: [..] } }` | some value at `key` is in the list (SQL `IN`) |
 * | `{ key, match: { except: [..] } }` | some value at `key` is not in the list (a missing field does not match) |
 * | `{ key, range: { gt, gte, lt, lte } }` | some value at `key` satisfies every bound given; bounds are all numbers (compared with numbers) or all ISO-8601 dates (`2024-05-01`, `2024-05-01T12:00:00Z`, `...+02:00`; no zone = UTC; compared with date strings as instants) |
 * | `{ is_empty: { key } }` | the field is missing, null, or an empty array |
 * | `{ is_null: { key } }` | the field is present and null |
 * | `{ exists: { key } }` | the field has at least one non-null value (the negation of is_empty) |
 * | `{ has_id: [..] }` | the document id is in the list |
 * | `{ nested: { key, filter } }` | some object in the array at `key` satisfies `filter` on its own fields |
 * | `{ must?, should?, must_not? }` | the nested filter holds (and / or / not to any depth) |
 *
 * Keys are dotted paths into nested objects (`author.name`); arrays on the way are flattened
 * (`tags` matches if any element matches; `authors[].name` is accepted and means the same).
 * A document without metadata has no fields. Validation errors name the field path, e.g.
 * `filter.must[1].range: unknown condition type "rnage"`.
 */

export type MatchValue = string | number | boolean;
export type RangeBound = number | string;

export interface FilterCondition {
  key?: string;
  match?: { value?: MatchValue; any?: MatchValue[]; except?: MatchValue[] };
  range?: { gt?: RangeBound; gte?: RangeBound; lt?: RangeBound; lte?: RangeBound };
  is_empty?: { key: string };
  is_null?: { key: string };
  exists?: { key: string };
  has_id?: string[];
  nested?: { key: string; filter: Filter };
  must?: FilterCondition[];
  should?: FilterCondition[];
  must_not?: FilterCondition[];
}

export interface Filter {
  must?: FilterCondition[];
  should?: FilterCondition[];
  must_not?: FilterCondition[];
}

export const FILTER_MAX_DEPTH = 16;

const ISO_DATE = /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(\.\d{1,9})?)?(Z|[+-]\d{2}:?\d{2})?)?$/;

/** Milliseconds since the epoch of an ISO-8601 date or date-time (no zone = UTC), or null. */
export function parseIsoDate(s: string): number | null {
  const m = ISO_DATE.exec(s);
  if (!m) return null;
  const [, y, mo, d, h = '0', mi = '0', sec = '0', frac, zone] = m;
  const year = Number(y), month = Number(mo), day = Number(d), hour = Number(h), minute = Number(mi), second = Number(sec);
  if (month < 1 || month > 12 || day < 1 || hour > 23 || minute > 59 || second > 59) return null;
  const ms = frac ? Math.floor(Number(`0${frac}`) * 1000) : 0;
  const t = Date.UTC(year, month - 1, day, hour, minute, second, ms);
  if (new Date(t).getUTCDate() !== day) return null; // 2023-02-30
  let offset = 0;
  if (zone && zone !== 'Z') {
    const sign = zone[0] === '-' ? -1 : 1;
    const digits = zone.slice(1).replace(':', '');
    const zh = Number(digits.slice(0, 2)), zm = Number(digits.slice(2));
    if (zh > 23 || zm > 59) return null;
    offset = sign * (zh * 60 + zm) * 60_000;
  }
  return t - offset;
}

const matchValue = z.union([z.string(), z.number(), z.boolean()]);
const isoDate = z.string().refine((s) => parseIsoDate(s) !== null, { message: 'expected a number or an ISO-8601 date (YYYY-MM-DD[THH:MM[:SS[.fff]]][Z|+HH:MM])' });
const bound = z.union([z.number().refine(Number.isFinite, { message: 'must be finite' }), isoDate]);
const keyRef = z.strictObject({ key: z.string().min(1) });

const MatchSchema = z
  .strictObject({ value: matchValue.optional(), any: z.array(matchValue).optional(), except: z.array(matchValue).optional() })
  .superRefine((m, ctx) => {
    const given = (['value', 'any', 'except'] as const).filter((k) => m[k] !== undefined);
    if (given.length !== 1) ctx.addIssue({ code: 'custom', message: `needs exactly one of value, any, except (got ${given.length ? given.join(', ') : 'none'})` });
  });

const RangeSchema = z
  .strictObject({ gt: bound.optional(), gte: bound.optional(), lt: bound.optional(), lte: bound.optional() })
  .superRefine((r, ctx) => {
    const given = (['gt', 'gte', 'lt', 'lte'] as const).filter((k) => r[k] !== undefined);
    if (given.length === 0) ctx.addIssue({ code: 'custom', message: 'needs at least one of gt, gte, lt, lte' });
    const kinds = new Set(given.map((k) => typeof r[k]));
    if (kinds.size > 1) ctx.addIssue({ code: 'custom', message: 'bounds must be all numbers or all ISO dates' });
  });

const CONDITION_KINDS = ['match', 'range', 'is_empty', 'is_null', 'exists', 'has_id', 'nested', 'must / should / must_not'] as const;

export const FilterConditionSchema: z.ZodType<FilterCondition> = z.lazy(() =>
  z
    .strictObject({
      key: z.string().min(1).optional(),
      match: MatchSchema.optional(),
      range: RangeSchema.optional(),
      is_empty: keyRef.optional(),
      is_null: keyRef.optional(),
      exists: keyRef.optional(),
      has_id: z.array(z.string()).optional(),
      nested: z.strictObject({ key: z.string().min(1), filter: FilterSchema }).optional(),
      must: z.array(FilterConditionSchema).optional(),
      should: z.array(FilterConditionSchema).optional(),
      must_not: z.array(FilterConditionSchema).optional(),
    })
    .superRefine((c, ctx) => {
      const kinds: string[] = [];
      if (c.match !== undefined) kinds.push('match');
      if (c.range !== undefined) kinds.push('range');
      for (const k of ['is_empty', 'is_null', 'exists', 'has_id', 'nested'] as const) if (c[k] !== undefined) kinds.push(k);
      if (c.must !== undefined || c.should !== undefined || c.must_not !== undefined) kinds.push('must / should / must_not');
      if (kinds.length !== 1) {
        ctx.addIssue({ code: 'custom', message: kinds.length ? `one condition per object, got ${kinds.join(' and ')}` : `empty condition: expected one of ${CONDITION_KINDS.join(', ')}` });
      } else if ((kinds[0] === 'match' || kinds[0] === 'range') && c.key === undefined) {
        ctx.addIssue({ code: 'custom', message: `${kinds[0]} needs a key`, path: ['key'] });
      } else if (kinds[0] !== 'match' && kinds[0] !== 'range' && c.key !== undefined) {
        ctx.addIssue({ code: 'custom', message: `key belongs to match or range conditions, not ${kinds[0]}`, path: ['key'] });
      }
    }),
);

/** The filter schema (zod), for request validation and the OpenAPI document. */
export const FilterSchema: z.ZodType<Filter> = z.lazy(() =>
  z.strictObject({
    must: z.array(FilterConditionSchema).optional(),
    should: z.array(FilterConditionSchema).optional(),
    must_not: z.array(FilterConditionSchema).optional(),
  }),
);

/**
 * The filter language as exact JSON Schema, for the OpenAPI document: each condition kind its own
 * closed object (one kind per object; `key` with match and range only), `match` exactly one of
 * value / any / except, `range` at least one bound, all numbers or all dates. FilterSchema above
 * validates (its messages name the path and the rule); `npm run contract` checks the two agree.
 */
const matchForm = z.union([z.strictObject({ value: matchValue }), z.strictObject({ any: z.array(matchValue) }), z.strictObject({ except: z.array(matchValue) })]);
const numberBound = z.number();
/** ISO_DATE with the calendar's bounds (29 February, valid in leap years, is left out of the form). */
const ISO_DATE_FORM = /^\d{4}-(?:(?:0[1-9]|1[0-2])-(?:0[1-9]|1\d|2[0-8])|(?:0[13-9]|1[0-2])-(?:29|30)|(?:0[13578]|1[02])-31)(?:[T ](?:[01]\d|2[0-3]):[0-5]\d(?::[0-5]\d(?:\.\d{1,9})?)?(?:Z|[+-](?:[01]\d|2[0-3]):?[0-5]\d)?)?$/;
const isoDateForm = z.string().regex(ISO_DATE_FORM).describe('ISO-8601 date or date-time (YYYY-MM-DD[THH:MM[:SS[.fff]]][Z|+HH:MM])');
const rangeForm = (b: z.ZodType) => z.strictObject({ gt: b.optional(), gte: b.optional(), lt: b.optional(), lte: b.optional() }).meta({ minProperties: 1 });
const keyForm = z.string().min(1);
const clauseForm = (condition: z.ZodType) => ({ must: z.array(condition).optional(), should: z.array(condition).optional(), must_not: z.array(condition).optional() });
export const FilterConditionFormSchema: z.ZodType = z.lazy(() =>
  z.union([
    z.strictObject({ key: keyForm, match: matchForm }),
    z.strictObject({ key: keyForm, range: z.union([rangeForm(numberBound), rangeForm(isoDateForm)]) }),
    z.strictObject({ is_empty: keyRef }),
    z.strictObject({ is_null: keyRef }),
    z.strictObject({ exists: keyRef }),
    z.strictObject({ has_id: z.array(z.string()) }),
    z.strictObject({ nested: z.strictObject({ key: keyForm, filter: FilterFormSchema }) }),
    z.strictObject(clauseForm(FilterConditionFormSchema)).meta({ minProperties: 1 }),
  ]),
).meta({ id: 'FilterCondition' });
export const FilterFormSchema: z.ZodType = z.lazy(() => z.strictObject(clauseForm(FilterConditionFormSchema))).meta({ id: 'Filter', description: 'Qdrant-like metadata filter: every must condition holds, at least one should condition (when given), no must_not condition; nestable' });

function fieldPath(root: string, path: readonly PropertyKey[]): string {
  let out = root;
  for (const p of path) out += typeof p === 'number' ? `[${p}]` : `.${String(p)}`;
  return out;
}

/**
 * Validates a filter; throws ValidationError whose issues name each field path (`root` first:
 * `filter.must[1].range`). Unknown condition types (unrecognised keys) are reported as such.
 */
export function parseFilter(input: unknown, root = 'filter'): Filter {
  // before zod recurses into it: a hostile body nested thousands deep must not exhaust the stack
  if (jsonDepth(input, 4 * FILTER_MAX_DEPTH + 8) < 0) {
    throw new ValidationError(`${root}: nests deeper than ${FILTER_MAX_DEPTH} levels`, [{ field: root, message: `nests deeper than ${FILTER_MAX_DEPTH} levels` }]);
  }
  const r = FilterSchema.safeParse(input);
  if (!r.success) {
    const issues: FieldIssue[] = [];
    for (const issue of r.error.issues) {
      if (issue.code === 'unrecognized_keys') {
        const atCondition = issue.path.length > 0 && typeof issue.path[issue.path.length - 1] === 'number';
        for (const key of issue.keys) {
          issues.push({
            field: fieldPath(root, [...issue.path, key]),
            message: atCondition ? `unknown condition type "${key}" (expected one of ${CONDITION_KINDS.join(', ')})` : `unknown field "${key}"`,
          });
        }
      } else {
        issues.push({ field: fieldPath(root, issue.path), message: issue.message });
      }
    }
    throw new ValidationError(issues.map((i) => `${i.field}: ${i.message}`).join('; '), issues);
  }
  depthCheck(r.data, root, 0);
  return r.data;
}

/** Nesting depth of objects and arrays, or -1 once it passes `limit`. */
function jsonDepth(x: unknown, limit: number): number {
  if (x === null || typeof x !== 'object') return 0;
  if (limit === 0) return -1;
  let deepest = 0;
  for (const v of Array.isArray(x) ? x : Object.values(x)) {
    const child = jsonDepth(v, limit - 1);
    if (child < 0) return -1;
    deepest = Math.max(deepest, child);
  }
  return deepest + 1;
}

function depthCheck(f: Filter, path: string, depth: number): void {
  if (depth > FILTER_MAX_DEPTH) throw new ValidationError(`${path}: nests deeper than ${FILTER_MAX_DEPTH} levels`, [{ field: path, message: `nests deeper than ${FILTER_MAX_DEPTH} levels` }]);
  for (const part of ['must', 'should', 'must_not'] as const) {
    f[part]?.forEach((c, i) => {
      const p = `${path}.${part}[${i}]`;
      if (c.must || c.should || c.must_not) depthCheck(c, p, depth + 1);
      if (c.nested) depthCheck(c.nested.filter, `${p}.nested.filter`, depth + 1);
    });
  }
}

/** true when a document passes: its metadata (null = none) and its id. */
export type DocPredicate = (metadata: Record<string, unknown> | null, docId?: string) => boolean;

/** Values at a dotted key, arrays flattened (nulls kept; a missing field gives none). */
export function valuesAt(metadata: Record<string, unknown> | null, key: string): unknown[] {
  let current: unknown[] = metadata ? [metadata] : [];
  for (const raw of key.split('.')) {
    const part = raw.endsWith('[]') ? raw.slice(0, -2) : raw;
    const next: unknown[] = [];
    for (const v of current) {
      if (v === null || typeof v !== 'object' || Array.isArray(v)) continue;
      if (!Object.prototype.hasOwnProperty.call(v, part)) continue;
      const child = (v as Record<string, unknown>)[part];
      if (Array.isArray(child)) next.push(...child);
      else next.push(child);
    }
    current = next;
  }
  return current;
}

function compileRange(r: NonNullable<FilterCondition['range']>): (v: unknown) => boolean {
  const dates = [r.gt, r.gte, r.lt, r.lte].some((b) => typeof b === 'string');
  const num = (b: RangeBound | undefined) => (b === undefined ? undefined : typeof b === 'string' ? parseIsoDate(b)! : b);
  const gt = num(r.gt), gte = num(r.gte), lt = num(r.lt), lte = num(r.lte);
  return (v) => {
    let x: number | null;
    if (dates) x = typeof v === 'string' ? parseIsoDate(v) : null;
    else x = typeof v === 'number' && Number.isFinite(v) ? v : null;
    if (x === null) return false;
    return (gt === undefined || x > gt) && (gte === undefined || x >= gte) && (lt === undefined || x < lt) && (lte === undefined || x <= lte);
  };
}

function compileCondition(c: FilterCondition): DocPredicate {
  if (c.must !== undefined || c.should !== undefined || c.must_not !== undefined) return compileParsed(c);
  if (c.match) {
    const key = c.key!;
    const { value, any, except } = c.match;
    if (value !== undefined) return (m) => valuesAt(m, key).some((v) => v === value);
    if (any !== undefined) {
      const set = new Set<unknown>(any);
      return (m) => valuesAt(m, key).some((v) => set.has(v));
    }
    const set = new Set<unknown>(except);
    return (m) => valuesAt(m, key).some((v) => v !== null && !set.has(v));
  }
  if (c.range) {
    const key = c.key!;
    const test = compileRange(c.range);
    return (m) => valuesAt(m, key).some(test);
  }
  if (c.is_empty) {
    const key = c.is_empty.key;
    return (m) => valuesAt(m, key).every((v) => v === null);
  }
  if (c.exists) {
    const key = c.exists.key;
    return (m) => valuesAt(m, key).some((v) => v !== null);
  }
  if (c.is_null) {
    const key = c.is_null.key;
    return (m) => {
      const path = key.split('.');
      const parent = path.length > 1 ? valuesAt(m, path.slice(0, -1).join('.')) : m ? [m] : [];
      const last = path[path.length - 1].replace(/\[\]$/, '');
      return parent.some((p) => p !== null && typeof p === 'object' && !Array.isArray(p) && Object.prototype.hasOwnProperty.call(p, last) && (p as Record<string, unknown>)[last] === null);
    };
  }
  if (c.has_id) {
    const ids = new Set(c.has_id);
    return (_m, docId) => docId !== undefined && ids.has(docId);
  }
  const nested = c.nested!;
  const inner = compileParsed(nested.filter);
  return (m, docId) =>
    valuesAt(m, nested.key).some((v) => v !== null && typeof v === 'object' && !Array.isArray(v) && inner(v as Record<string, unknown>, docId));
}

function compileParsed(f: Filter): DocPredicate {
  const must = (f.must ?? []).map(compileCondition);
  const should = (f.should ?? []).map(compileCondition);
  const mustNot = (f.must_not ?? []).map(compileCondition);
  return (m, docId) => {
    for (const p of must) if (!p(m, docId)) return false;
    for (const p of mustNot) if (p(m, docId)) return false;
    if (should.length === 0) return true;
    for (const p of should) if (p(m, docId)) return true;
    return false;
  };
}

/**
 * Validates (as parseFilter: ValidationError naming the field path) and compiles a filter into a
 * predicate over a document's metadata and id.
 */
export function compileFilter(filter: unknown, root = 'filter'): DocPredicate {
  return compileParsed(parseFilter(filter, root));
}

/** Per document of the segment: 1 when the predicate accepts it. */
export function docMask(segment: Pick<SearchSegment, 'documents' | 'docIds' | 'metadata'>, predicate: DocPredicate): DocMask {
  const out = new Uint8Array(segment.documents);
  for (let i = 0; i < segment.documents; i++) out[i] = predicate(segment.metadata(i), segment.docIds[i]) ? 1 : 0;
  return out;
}

/** Intersection of masks (e.g. a filter and a segment's tombstones); undefined entries are ignored, none gives undefined. */
export function andMasks(...masks: (DocMask | undefined)[]): DocMask | undefined {
  const given = masks.filter((m): m is DocMask => m !== undefined);
  if (given.length === 0) return undefined;
  const out = given[0].slice();
  for (const m of given.slice(1)) {
    if (m.length !== out.length) throw new RangeError(`andMasks: masks of ${out.length} and ${m.length} documents`);
    for (let i = 0; i < out.length; i++) out[i] = out[i] && m[i] ? 1 : 0;
  }
  return out;
}
