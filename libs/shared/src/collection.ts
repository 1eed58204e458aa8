import { z } from 'zod';
import { CodecSettingsSchema } from './codec-settings';
import { modelId, resourceId } from './ids';
import { MAX_SHARDS } from './shards';
import type { FittedFusion } from './fusion-record';

export const MAX_PASSAGE_OVERLAP = 4096;
export const PassageSettingsSchema = z
  .object({
    /** Tokens shared by consecutive passages (at most half of maxDocTokens). */
    overlap: z.number().int().min(0).max(MAX_PASSAGE_OVERLAP).default(0),
  })
  .strict();
export type PassageSettings = z.infer<typeof PassageSettingsSchema>;

/**
 * How token search (mode `xtr`) reads a collection, chosen at creation (an IVF collection can be
 * moved to WARP by POST /v1/collections/{id}/reindex, never back).
 * - `layout: 'warp'` (the default of new collections, `bits` 4): the index job and merges also
 *   write each segment's centroid-major search layout (docs/segment-format.md, "Search layout
 *   (centroid-major)"; `bits` per residual dimension, 2 or 4), and XTR searches run WARP's engine
 *   over it (SPEC 3.5), reading only the probed lists' byte ranges.
 * - `layout: 'ivf'`: the IVF of the segment index alone (XTR's two-stage inference, SPEC 3.2), as
 *   every collection searched before WARP layouts existed.
 * A stored record without `search` (written before WARP became the default) is an IVF collection:
 * see warpLayoutOf, which alone decides.
 */
export const SEARCH_LAYOUTS = ['warp', 'ivf'] as const;
export type SearchLayoutName = (typeof SEARCH_LAYOUTS)[number];
export const DEFAULT_WARP_BITS = 4;
export const WarpLayoutSettingsSchema = z
  .object({
    layout: z.literal('warp').describe("'warp': each segment also gets a centroid-major search layout, and mode xtr runs WARP's engine over it"),
    bits: z.literal([2, 4], { error: 'bits must be 2 or 4' }).default(DEFAULT_WARP_BITS).describe('bits per residual dimension of the search layout: 2 or 4 (default 4)'),
  })
  .strict();
export const IvfLayoutSettingsSchema = z
  .object({ layout: z.literal('ivf').describe("'ivf': no search layout; mode xtr probes the segment index's IVF") })
  .strict();
export type WarpLayoutSettings = z.infer<typeof WarpLayoutSettingsSchema>;
export type SearchLayoutSettings = WarpLayoutSettings | z.infer<typeof IvfLayoutSettingsSchema>;

/**
 * `search` at creation: one closed object whose `layout` defaults to 'warp', so that a refusal
 * names the field at fault (`search.layout`, `search.bits`); `bits` belongs to 'warp' alone.
 * Parses to the stored form: `{ layout: 'warp', bits }` or `{ layout: 'ivf' }`.
 */
export const SearchLayoutRequestSchema = z
  .object({
    layout: z
      .enum(SEARCH_LAYOUTS, { error: `layout must be one of ${SEARCH_LAYOUTS.join(', ')}` })
      .default('warp')
      .describe("'warp' (default): a centroid-major search layout per segment, mode xtr runs WARP's engine over it; 'ivf': the segment index's IVF alone"),
    bits: z.literal([2, 4], { error: 'bits must be 2 or 4' }).optional().describe("layout 'warp' only: bits per residual dimension, 2 or 4 (default 4)"),
  })
  .strict()
  .superRefine((v, ctx) => {
    if (v.layout === 'ivf' && v.bits !== undefined) ctx.addIssue({ code: 'custom', path: ['bits'], message: "bits is for layout 'warp' only (layout 'ivf' has no packed residuals)" });
  })
  .transform((v): SearchLayoutSettings => (v.layout === 'ivf' ? { layout: 'ivf' } : { layout: 'warp', bits: v.bits ?? DEFAULT_WARP_BITS }));

/**
 * Whether XTR searches of the collection read WARP search layouts: only a record that names
 * `search.layout` 'warp'. A record without `search` (stored before WARP became the default of new
 * collections) keeps the IVF path; it gets layouts only by a re-index.
 */
export function warpLayoutOf(c: Pick<Collection, 'search'>): WarpLayoutSettings | null {
  return c.search?.layout === 'warp' ? c.search : null;
}

/**
 * POST /v1/collections/{id}/reindex: the WARP layout an IVF collection is to get (`layout` 'warp',
 * the only one a re-index builds; `bits` 2 or 4, default 4). Absent `search`: WARP at 4 bits.
 */
export const ReindexRequestSchema = z
  .object({
    search: z
      .object({
        layout: z.literal('warp', { error: "layout must be 'warp': a re-index builds WARP search layouts (an IVF collection needs none)" }).default('warp').describe("'warp' (default): the only layout a re-index builds"),
        bits: z.literal([2, 4], { error: 'bits must be 2 or 4' }).default(DEFAULT_WARP_BITS).describe('bits per residual dimension: 2 or 4 (default 4)'),
      })
      .strict()
      .prefault({})
      .describe("the WARP search layout to build: `{ layout: 'warp', bits: 2 | 4 }` (default bits 4)"),
  })
  .strict();
export type ReindexRequest = z.infer<typeof ReindexRequestSchema>;

/**
 * A re-index in flight (POST /v1/collections/{id}/reindex): an IVF collection getting WARP search
 * layouts for `codecVersion` at centroid epoch `epoch` (fitted by the re-index job, on the merge
 * queue; absent until then). Searches keep the IVF path until every live segment has its layout
 * and the job sets `search`; index jobs meanwhile write the new segments' layouts at `epoch`.
 */
export interface PendingReindex {
  search: WarpLayoutSettings;
  codecVersion: number;
  epoch?: number;
  startedAt: string;
}

/**
 * The WARP layout an index job or a commit writes a segment with: the collection's own, or the one
 * a re-index in flight builds (at its fitted epoch, for its codec version); null: none.
 */
export function warpLayoutToWrite(c: Pick<Collection, 'search' | 'reindex'>, codecVersion: number): { search: WarpLayoutSettings; epoch: number | null } | null {
  const own = warpLayoutOf(c);
  if (own) return { search: own, epoch: null };
  const r = c.reindex;
  return r && r.epoch !== undefined && r.codecVersion === codecVersion ? { search: r.search, epoch: r.epoch } : null;
}

/** The layout a collection's XTR searches use ('ivf' for a record stored without `search`). */
export function searchLayoutOf(c: Pick<Collection, 'search'>): SearchLayoutName {
  return warpLayoutOf(c) ? 'warp' : 'ivf';
}

/**
 * What BM25 counts as a term in a collection (SPEC 3.6; libs/search/src/analyzer.ts):
 * `english` = words lowercased, Lucene's English stop words removed, Porter-stemmed (the default
 * of new collections); `pieces` = the encoder's sub-word token ids (what BM25 counted before
 * analysers existed). Fixed at creation.
 */
export const BM25_ANALYZERS = ['english', 'pieces'] as const;
export type Bm25AnalyzerName = (typeof BM25_ANALYZERS)[number];
export const DEFAULT_BM25_ANALYZER: Bm25AnalyzerName = 'english';
export const Bm25SettingsSchema = z
  .object({
    analyzer: z
      .enum(BM25_ANALYZERS, { error: `analyzer must be one of ${BM25_ANALYZERS.join(', ')}` })
      .default(DEFAULT_BM25_ANALYZER)
      .describe("'english' (default): words, lowercased, Lucene's English stop words removed, Porter-stemmed; 'pieces': the encoder's sub-word tokens"),
  })
  .strict();
export type Bm25Settings = z.infer<typeof Bm25SettingsSchema>;

/** A collection's BM25 analyser; records written before analysers existed have none and count the encoder's pieces. */
export function bm25AnalyzerOf(c: Pick<Collection, 'bm25'>): Bm25AnalyzerName {
  return c.bm25?.analyzer ?? 'pieces';
}

export const CreateCollectionSchema = z
  .object({
    id: resourceId('id'),
    /** Model directory name under MODELS_DIR (default: the configured default model). */
    model: modelId().optional(),
    /** Cap on document tokens (<= the model's maxDocTokens). */
    maxDocTokens: z.number().int().positive().max(16384).optional(),
    codec: CodecSettingsSchema.prefault({}),
    /**
     * Split documents longer than maxDocTokens into passages `docId#0`, `docId#1`, ... (windows of
     * maxDocTokens, consecutive windows sharing about `overlap` tokens) instead of truncating them.
     */
    passages: PassageSettingsSchema.optional(),
    /**
     * Shards the collection's segments are split into (each served through its own queue by the
     * scorers holding it; re-rank and search fan out over them). Fixed at creation; at most
     * MAX_SHARDS here, and COLLECTION_MAX_SHARDS of the deployment (checked by the API).
     */
    bm25: Bm25SettingsSchema.prefault({}).describe("BM25's text analysis, fixed at creation: `{ analyzer: 'english' | 'pieces' }` (default 'english')"),
    search: SearchLayoutRequestSchema.prefault({}).describe("how mode xtr reads the collection, chosen at creation: `{ layout: 'warp', bits: 2 | 4 }` (the default, bits 4) writes a centroid-major layout per segment and runs WARP's engine over it; `{ layout: 'ivf' }` probes the segment index's IVF alone (POST /v1/collections/{id}/reindex moves it to WARP later)"),
    shards: z.number().int().min(1).max(MAX_SHARDS).optional().describe('shards the segments are split into, each served through its queue `shard-<i>`; re-rank and search fan out over them (default 1; at most COLLECTION_MAX_SHARDS, 8 by default)'),
  })
  .strict();

export type CreateCollection = z.infer<typeof CreateCollectionSchema>;

export interface Collection {
  tenantId: string;
  id: string;
  model: string;
  dims: number;
  maxDocTokens: number;
  codec: z.infer<typeof CodecSettingsSchema>;
  /** Documents over maxDocTokens are split into passages (absent: they are truncated). */
  passages?: PassageSettings;
  /** Shards (absent: 1, the records written before shards existed). */
  shards?: number;
  /**
   * How mode xtr reads the collection: `{ layout: 'warp', bits }` (written for new collections by
   * default) or `{ layout: 'ivf' }`. Absent: a record stored before WARP became the default, read
   * as 'ivf' (warpLayoutOf).
   */
  search?: SearchLayoutSettings;
  /** A re-index to WARP search layouts in flight (POST /v1/collections/{id}/reindex); absent: none. */
  reindex?: PendingReindex;
  /** BM25's analyser (absent: records written before analysers existed, BM25 over the encoder's pieces; see bm25AnalyzerOf). */
  bm25?: Bm25Settings;
  /** Hybrid's fusion fitted on the collection's judgments (POST /v1/collections/{id}/fusion/fit); absent: the service's defaults. */
  fusion?: FittedFusion;
  /** Codec artifact version (bumped by re-compression). */
  codecVersion: number;
  createdAt: string;
  /** A re-compression in flight: segments at `codecVersion` are being written from the raw vectors. */
  pending?: { codecVersion: number; codec: z.infer<typeof CodecSettingsSchema>; batches: string[]; startedAt: string };
}

/** One committed generation of a collection: the list of live segments. Immutable once written. */
export interface CollectionManifest {
  tenantId: string;
  collectionId: string;
  generation: number;
  codecVersion: number;
  committedAt: string;
  segments: SegmentRef[];
  /** Distinct live document ids (an id in several segments counts once). Absent in manifests written before 0.2. */
  documents?: number;
}

export interface SegmentRef {
  /**
   * The ingest batch that wrote the segment (`ingestBatchId` in code; a merge's output: `merge-...`).
   * Stored under this name in every manifest: `batchId` alone always means an ingest batch (a batch
   * re-rank file is a `rerankBatchId`), so the stored name stays and old manifests load unchanged.
   */
  batchId: string;
  /** Codec version the segment was written with (its codec artifact). */
  codecVersion: number;
  key: string;
  documents: number;
  tokens: number;
  bytes: number;
  /** CRC32C of the whole segment object, as hex. */
  checksum: string;
  /**
   * true: the segment's head is stored in S3 (`s3Keys.segmentHead`, written by the index stage or
   * the merge that wrote the segment), so a scorer with an empty disk reads it instead of the
   * whole object. Absent: segments committed before heads were stored (read whole once).
   */
  head?: boolean;
  /**
   * Deleted documents of this segment in this generation: their indexes in the segment, sorted
   * ascending (a delete, or a later ingest of the same id). Absent: none. Written with the
   * manifest, so a generation says by itself which documents are live.
   */
  tombstones?: number[];
  /**
   * The ingest batches whose documents this segment holds, when it is a merge's output (sorted);
   * absent: just `batchId`. Ingestion progress counts a batch as committed while a segment of the
   * current generation lists it, so a merge does not take finished batches back.
   */
  batches?: string[];
  /**
   * The shard holding this segment, in collections of more than one shard (assigned when the
   * segment is committed, kept by merges and re-compressions); absent: shard 0 of 1, or see
   * segmentShard.
   */
  shard?: number;
  /**
   * WARP collections: the centroid epoch the segment's search layout was built with
   * (`s3Keys.searchLayout(..., warpEpoch)`, centroids `s3Keys.ivfCentroids(..., warpEpoch)`);
   * absent: 0. A refit (docs/scaling.md, "WARP centroids") moves every segment to a new epoch.
   */
  warpEpoch?: number;
}

/** The newest WARP centroid epoch among segments (0 when none was refitted). */
export function warpEpochOf(segments: readonly Pick<SegmentRef, 'warpEpoch'>[]): number {
  return segments.reduce((e, s) => Math.max(e, s.warpEpoch ?? 0), 0);
}

/** The ingest batches a segment stands for: its own batch, or those a merge put into it. */
export function segmentBatches(ref: Pick<SegmentRef, 'batchId' | 'batches'>): readonly string[] {
  return ref.batches ?? [ref.batchId];
}

export const STAGES = ['accepted', 'encoded', 'compressed', 'indexed', 'failed'] as const;
export type Stage = (typeof STAGES)[number];

/** One ingestion as recorded in S3 when it is accepted: its batches and their document counts. */
export interface IngestionRecord {
  ingestionId: string;
  createdAt: string;
  documents: number;
  /** `batchId`: the ingest batch's id (stored name; `ingestBatchId` in code). */
  batches: { batchId: string; documents: number }[];
}

/** Why a batch stopped for good (recorded in S3 by the worker's final-failure hook). */
export interface IngestBatchFailure {
  /** The ingest batch's id (stored and answered as `failures[].batchId`). */
  batchId: string;
  ingestionId: string | null;
  queue: string;
  documents: number;
  error: string;
  failedAt: string;
}

/**
 * Progress of documents through the stages, derived from what S3 holds per batch (raw vectors,
 * segments, the current manifest, failure records), so replaying a job cannot count twice and
 * losing Redis loses nothing. `indexed` means searchable: the batch is in the current generation.
 */
export type StageCounts = Record<Stage, number>;
