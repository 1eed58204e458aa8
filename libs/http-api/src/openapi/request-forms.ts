/**
 * The exact forms of the request bodies whose rules span fields, as zod unions that convert to
 * exact JSON Schema (anyOf of closed objects) for the OpenAPI document. They are built from the
 * same field schemas as the validators in @lateral/shared, which keep their own superRefine
 * checks so that a refusal names the field and the rule (a union's error cannot). `npm run
 * contract` (schemathesis against the live document) checks that the two agree in both
 * directions: what a form accepts the service accepts, what it refuses the service refuses.
 */
import { z } from 'zod';
import {
  BatchOptionsSchema,
  CandidateSchema,
  CodecSettingsSchema,
  CreateCollectionSchema,
  IvfLayoutSettingsSchema,
  DeleteDocumentsSchema,
  LIVE,
  MAX_CANDIDATES_PER_QUERY,
  MAX_RERANK_QUERIES,
  RerankRequestSchema,
  ScorerSchema,
  SearchModeSchema,
  SearchRequestSchema,
  TextCandidateSchema,
  TrainRequestSchema,
  WarpLayoutSettingsSchema,
} from '@lateral/shared';
import { FilterFormSchema } from '@lateral/search';

type Shape = Record<string, z.ZodType>;
/** The field without its `.optional()`. */
const required = (s: z.ZodType): z.ZodType => (s as z.ZodOptional).unwrap() as z.ZodType;
const omit = (shape: Shape, ...keys: string[]): Shape => Object.fromEntries(Object.entries(shape).filter(([k]) => !keys.includes(k)));

/** `scorer: "maxsim"`: the names whose parameters all have defaults, accepted as a string. */
const SCORER_OPTIONS = ScorerSchema.options as unknown as z.ZodObject[];
const scorerName = (o: z.ZodObject) => (o.shape.name as z.ZodLiteral<string>).value;
const shorthandNames = SCORER_OPTIONS.filter((o) => ScorerSchema.safeParse({ name: scorerName(o) }).success).map(scorerName);
const hybridScorer = SCORER_OPTIONS.find((o) => scorerName(o) === 'hybrid')!;
/** Any scorer but hybrid (which needs every candidate's first-stage score), object or shorthand. */
const plainScorer = z.union([z.enum(shorthandNames.filter((n) => n !== 'hybrid') as [string, ...string[]]), ...SCORER_OPTIONS.filter((o) => scorerName(o) !== 'hybrid')]);

// ---- re-rank ------------------------------------------------------------------------------------

const R = RerankRequestSchema.shape as unknown as Shape & { queries: z.ZodArray<z.ZodObject> };
const Q = R.queries.element.shape as Shape;
const [idCandidate, scoredIdCandidate] = (CandidateSchema.options as unknown as z.ZodType[]).slice(0, 2);
const scoredText = (TextCandidateSchema as z.ZodObject).extend({ score: z.number() }).strict();
const queries = (candidate: z.ZodType) =>
  z.array(z.object({ id: Q.id, text: Q.text, candidates: z.array(candidate).min(1).max(MAX_CANDIDATES_PER_QUERY) }).strict()).min(1).max(MAX_RERANK_QUERIES);
const rerankCommon = omit(R, 'collection', 'model', 'queries', 'scorer', 'include', 'group');

/**
 * A re-rank request: with a collection (any candidates; `include` and `group` with id candidates
 * only; `model`, when given, must be the collection's: 409 otherwise), or without one (`model`
 * required, text candidates only). The hybrid scorer needs every candidate's first-stage score.
 */
export const RerankRequestForm = z.union([
  z.object({ ...rerankCommon, collection: required(R.collection), model: R.model, queries: queries(z.union([idCandidate, scoredIdCandidate])), scorer: plainScorer.optional(), include: R.include, group: R.group }).strict(),
  z.object({ ...rerankCommon, collection: required(R.collection), model: R.model, queries: queries(CandidateSchema), scorer: plainScorer.optional() }).strict(),
  z.object({ ...rerankCommon, model: required(R.model), queries: queries(TextCandidateSchema), scorer: plainScorer.optional() }).strict(),
  z.object({ ...rerankCommon, collection: required(R.collection), model: R.model, queries: queries(scoredIdCandidate), scorer: hybridScorer, include: R.include, group: R.group }).strict(),
  z.object({ ...rerankCommon, collection: required(R.collection), model: R.model, queries: queries(z.union([scoredIdCandidate, scoredText])), scorer: hybridScorer }).strict(),
  z.object({ ...rerankCommon, model: required(R.model), queries: queries(scoredText), scorer: hybridScorer }).strict(),
]);

// ---- batches ------------------------------------------------------------------------------------

const B = BatchOptionsSchema.shape as unknown as Shape;
const batchScorer = z.union([z.enum(shorthandNames.filter((n) => n !== 'hybrid') as [string, ...string[]]), ...SCORER_OPTIONS]).optional();
const batchCommon = { ...omit(B, 'collection', 'model', 'scorer'), scorer: batchScorer };
/** A batch's options: a collection (and its model, if given: 409 otherwise), or a model for rows of text candidates. */
export const batchOptionsForms = (extra: Shape = {}) => [
  z.object({ ...batchCommon, collection: required(B.collection), model: B.model, ...extra }).strict(),
  z.object({ ...batchCommon, model: required(B.model), ...extra }).strict(),
];

// ---- collections --------------------------------------------------------------------------------

const C = CodecSettingsSchema.shape as unknown as Shape;
const codecCommon = omit(C, 'kind', 'sideInfo', 'poolFactor', 'trained');
const kinds = (C.kind as z.ZodDefault<z.ZodEnum>).unwrap().options as string[];
const poolFactor = C.poolFactor;
/**
 * Codec settings at creation: side information only with kind 'eden' and without pooling
 * (poolFactor 1 or absent); `trained` only at re-compression.
 */
const codecForms = (extra: Shape = {}) => [
  z.object({ ...codecCommon, kind: z.enum(kinds as [string, ...string[]]).optional(), sideInfo: z.literal(false).optional(), poolFactor, ...extra }).strict(),
  z.object({ ...codecCommon, kind: z.literal('eden'), sideInfo: z.literal(true), poolFactor: z.literal(1).optional(), ...extra }).strict(),
];
export const CreateCodecForm = z.union(codecForms());
/** Re-compression: the creation forms, or a trained AESI codec (kind 'eden', sideInfo true). */
export const RecompressForm = z.object({ codec: z.union([...codecForms(), z.object({ ...codecCommon, kind: z.literal('eden'), sideInfo: z.literal(true), poolFactor: z.literal(1).optional(), trained: C.trained }).strict()]) }).strict();

const W = WarpLayoutSettingsSchema.shape as unknown as Shape;
/** `search` at creation: WARP (the default; `bits` 2 or 4), or the IVF alone (no `bits`). */
export const SearchLayoutForm = z.union([z.object({ layout: (W.layout as z.ZodType).optional(), bits: ((W.bits as z.ZodDefault).unwrap() as z.ZodType).optional() }).strict(), IvfLayoutSettingsSchema]);

export const CreateCollectionForm = (CreateCollectionSchema as unknown as z.ZodObject)
  .extend({
    codec: CreateCodecForm.optional(),
    search: SearchLayoutForm.optional().describe((CreateCollectionSchema.shape.search as z.ZodType).description ?? ''),
    shards: ((CreateCollectionSchema.shape.shards as z.ZodOptional).unwrap() as z.ZodNumber).meta({ [LIVE]: 'max-shards' }).optional(),
  })
  .strict()
  .meta({ [LIVE]: 'collection-models' });

// ---- documents, search ------------------------------------------------------------------------

const D = DeleteDocumentsSchema.shape as unknown as Shape;
/** Exactly one of `ids` or `filter`. */
export const DeleteDocumentsForm = z.union([z.object({ ids: required(D.ids) }).strict(), z.object({ filter: FilterFormSchema }).strict()]);

/** Search modes: hybrid with fusion linear (the default) needs `lambda`; with rrf it may leave it out. */
const MODE_OPTIONS = SearchModeSchema.options as unknown as z.ZodObject[];
const modeName = (o: z.ZodObject) => (o.shape.name as z.ZodLiteral<string>).value;
const hybridMode = MODE_OPTIONS.find((o) => modeName(o) === 'hybrid')!;
const modeForm = z.union([
  z.enum(MODE_OPTIONS.map(modeName).filter((n) => SearchModeSchema.safeParse({ name: n }).success) as [string, ...string[]]),
  ...MODE_OPTIONS.filter((o) => modeName(o) !== 'hybrid'),
  z.object({ ...hybridMode.shape, fusion: z.literal('linear').optional(), lambda: (hybridMode.shape.lambda as z.ZodOptional).unwrap() as z.ZodType }).strict(),
  z.object({ ...hybridMode.shape, fusion: z.literal('rrf') }).strict(),
]);
export const SearchRequestForm = (SearchRequestSchema as unknown as z.ZodObject).extend({ filter: FilterFormSchema.optional(), mode: modeForm.optional() }).strict();

// ---- training -----------------------------------------------------------------------------------

const T = TrainRequestSchema.shape as unknown as Shape;
const trainCommon = omit(T, 'head', 'size', 'residual');
/** A train request: `residual` is LITE's only. */
export const TrainRequestForm = z.union([
  z.object({ ...trainCommon, head: z.literal('lite'), size: T.size, residual: T.residual }).strict(),
  z.object({ ...trainCommon, head: z.literal('knrm'), size: T.size, residual: z.literal(false).optional() }).strict(),
  z.object({ ...trainCommon, head: z.literal('aesi'), size: T.size, residual: z.literal(false).optional() }).strict(),
]);
