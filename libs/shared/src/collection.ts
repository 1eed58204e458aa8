import { z } from 'zod';
import { CodecSettingsSchema } from './codec-settings';
import { resourceId } from './ids';

export const CreateCollectionSchema = z
  .object({
    id: resourceId('id'),
    /** Model directory name under MODELS_DIR (default: the configured default model). */
    model: z.string().regex(/^[A-Za-z0-9_.-]+$/, 'model must be a model directory name').optional(),
    /** Cap on document tokens (<= the model's maxDocTokens). */
    maxDocTokens: z.number().int().positive().max(16384).optional(),
    codec: CodecSettingsSchema.prefault({}),
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
}

export interface SegmentRef {
  batchId: string;
  /** Codec version the segment was written with (its codec artifact). */
  codecVersion: number;
  key: string;
  documents: number;
  tokens: number;
  bytes: number;
  /** CRC32C of the whole segment object, as hex. */
  checksum: string;
}

export const STAGES = ['accepted', 'encoded', 'compressed', 'indexed', 'failed'] as const;
export type Stage = (typeof STAGES)[number];
