import type { Job } from 'bullmq';
import { SegmentCorruptError, aesiArtifact, readSegment, serializeArtifact } from '@lateral/codec';
import {
  CodecSettingsSchema,
  PermanentJobError,
  aesiCodecName,
  mulberry32,
  s3Keys,
  trainingKeys,
  type AesiTrainReport,
  type JobPayload,
  type JobResults,
  type QueueName,
  type StoredTrainRequest,
} from '@lateral/shared';
import { CodecArtifactRepository, type CollectionRepository, type GenerationRepository, type ObjectStore } from '@lateral/infra';
import { TrainingDivergedError, trainAesiInThread } from '@lateral/training';
import type { StaticEmbeddingsCache } from '@lateral/serving';
import type { TrainJobProgressOf } from './job-progress';

/** What training an AESI codec touches (the train queue's handler runs it for `head: 'aesi'`: train.processor.ts). */
export interface AesiTrainDeps {
  store: Pick<ObjectStore, 'get' | 'put' | 'putJson' | 'list'>;
  collections: Pick<CollectionRepository, 'get'>;
  generations: Pick<GenerationRepository, 'manifest'>;
  staticEmbeddings: Pick<StaticEmbeddingsCache, 'forCollection'>;
  cancelled: (tenantId: string, trainId: string) => Promise<boolean>;
}

/** Progress of an AESI train job (GET /v1/train/{id}). */
export type AesiJobProgress = TrainJobProgressOf<'loading' | 'training' | 'writing', AesiTrainReport['curve']>;

/**
 * Fits SDR's AESI autoencoder (@lateral/training trainAesi) on a seeded sample of the collection's
 * raw token vectors (every segment of the current generation, from its raw batch in S3) and the
 * static input embeddings of the same token ids (the model's table), and writes it as a trained
 * codec `codecs/trained/{name}.codec` (a codec artifact: EDEN over the AESI code, side information)
 * with `{name}.training.json` (curve, held-out error, data, options) beside it.
 * `POST /v1/collections/{id}/recompress` with `codec.trained = name` re-codes the collection with it.
 */
export async function trainAesiCodec(
  deps: AesiTrainDeps,
  p: JobPayload<QueueName.train>,
  req: StoredTrainRequest,
  job?: Pick<Job, 'updateProgress'>,
): Promise<JobResults[QueueName.train]> {
  const t0 = Date.now();
  const report = async (pr: AesiJobProgress) => {
    await job?.updateProgress(pr as unknown as object);
  };
  await report({ percent: 0, stage: 'loading' });
  const collection = await deps.collections.get(p.tenantId, p.collectionId);
  if (!collection) throw new PermanentJobError(`collection ${p.tenantId}/${p.collectionId} does not exist`);
  const manifest = await deps.generations.manifest(p.tenantId, p.collectionId);
  if (!manifest || manifest.segments.length === 0) throw new PermanentJobError(`collection ${p.collectionId} has no committed documents yet`);
  const se = await deps.staticEmbeddings.forCollection(collection);

  // Every token of the generation's raw batches, then a seeded sample of sampleTokens rows.
  const parts: { vectors: Float32Array; tokenIds: Int32Array }[] = [];
  let dims = 0;
  for (const s of manifest.segments) {
    const key = s3Keys.rawVectors(p.tenantId, p.collectionId, s.batchId);
    const bytes = await deps.store.get(key);
    if (!bytes) throw new PermanentJobError(`raw vectors are missing from S3: ${key}`);
    try {
      const raw = readSegment(bytes, key);
      dims = raw.dims;
      parts.push({ vectors: raw.decodeAll(), tokenIds: raw.tokenIds });
    } catch (err) {
      if (err instanceof SegmentCorruptError) throw new PermanentJobError(err.message);
      throw err;
    }
    if (await deps.cancelled(p.tenantId, p.trainId)) throw new PermanentJobError(`training ${p.trainId} was cancelled`);
  }
  const total = parts.reduce((n, x) => n + x.tokenIds.length, 0);
  const n = Math.min(total, req.sampleTokens);
  if (n < 10) throw new PermanentJobError(`AESI needs at least 10 token vectors; collection ${p.collectionId} has ${total}`);
  const rand = mulberry32(req.seed >>> 0);
  const idx = Array.from({ length: total }, (_, i) => i);
  for (let i = 0; i < n; i++) {
    const j = i + Math.floor(rand() * (total - i));
    [idx[i], idx[j]] = [idx[j], idx[i]];
  }
  const chosen = idx.slice(0, n).sort((a, b) => a - b);
  const vectors = new Float32Array(n * dims);
  const tokenIds = new Int32Array(n);
  let part = 0;
  let base = 0;
  chosen.forEach((g, i) => {
    while (g >= base + parts[part].tokenIds.length) base += parts[part++].tokenIds.length;
    const r = g - base;
    vectors.set(parts[part].vectors.subarray(r * dims, (r + 1) * dims), i * dims);
    tokenIds[i] = parts[part].tokenIds[r];
  });
  parts.length = 0;
  let side: Float32Array;
  try {
    side = se.lookup(tokenIds);
  } catch (err) {
    if (err instanceof RangeError) throw new PermanentJobError(`static embeddings of ${collection.model}: ${err.message}`);
    throw err;
  }

  let lastReport = 0;
  // In a worker thread, `vectors` and `side` transferred to it (this function's own arrays): the
  // TF.js steps would otherwise hold this process's event loop. A cancellation terminates the thread.
  const result = await trainAesiInThread(vectors, side, dims, se.dims, {
    codeDims: req.codeDims,
    width: req.width,
    seed: req.seed,
    maxEpochs: req.maxEpochs,
    patience: req.patience,
    learningRate: req.learningRate ?? 1e-3,
    batchTokens: req.batchTokens,
    valFraction: req.valFraction,
    onProgress: async (pr) => {
      if (Date.now() - lastReport < 1000 && pr.step !== pr.stepsPerEpoch) return;
      lastReport = Date.now();
      if (await deps.cancelled(p.tenantId, p.trainId)) throw new PermanentJobError(`training ${p.trainId} was cancelled in epoch ${pr.epoch}`);
      const done = (pr.epoch - 1 + pr.step / pr.stepsPerEpoch) / pr.maxEpochs;
      await report({ percent: Math.min(95, Math.round(5 + 90 * done)), stage: 'training', epoch: pr.epoch, maxEpochs: pr.maxEpochs, step: pr.step, stepsPerEpoch: pr.stepsPerEpoch, loss: pr.loss, etaSeconds: pr.etaSeconds, curve: pr.curve });
    },
  }).catch((err) => {
    if (err instanceof TrainingDivergedError || err instanceof RangeError) throw new PermanentJobError(err.message);
    throw err;
  });

  await report({ percent: 96, stage: 'writing' });
  const existing = await deps.store.list(trainingKeys.trainedCodecsPrefix(p.tenantId, p.collectionId));
  const stem = aesiCodecName(p.collectionId, req.codeDims, req.width, 0).replace(/\.v0$/, '');
  const version = 1 + existing.reduce((mx, o) => {
    const m = new RegExp(`/${stem.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\.v(\\d+)\\.codec$`).exec(o.key);
    return m ? Math.max(mx, Number(m[1])) : mx;
  }, 0);
  const name = aesiCodecName(p.collectionId, req.codeDims, req.width, version);
  const settings = CodecSettingsSchema.parse({ kind: 'eden', bits: req.bits, dims: req.codeDims, layout: 'cross', sideInfo: true, trained: name });
  const artifact = aesiArtifact(settings, result.weights, CodecArtifactRepository.seed(p.tenantId, p.collectionId));
  const artifactKey = trainingKeys.trainedCodec(p.tenantId, p.collectionId, name);
  await deps.store.put(artifactKey, serializeArtifact(artifact));
  const trainReport: AesiTrainReport = {
    trainId: p.trainId,
    trainedCodec: name,
    head: 'aesi',
    version,
    collection: p.collectionId,
    generation: manifest.generation,
    model: collection.model,
    codec: settings,
    bestEpoch: result.bestEpoch,
    curve: result.curve,
    heldOut: result.heldOut,
    data: { ...result.data, collectionTokens: total, segments: manifest.segments.length, staticDims: se.dims, dims, artifactBytes: serializeArtifact(artifact).length },
    options: { ...result.options },
    seconds: (Date.now() - t0) / 1000,
    createdAt: new Date().toISOString(),
  };
  const reportKey = trainingKeys.trainedCodecReport(p.tenantId, p.collectionId, name);
  await deps.store.putJson(reportKey, trainReport);
  await report({ percent: 100, stage: 'writing', epoch: result.curve.length, curve: result.curve, loss: result.curve.at(-1)?.trainMse, etaSeconds: 0 });
  return { trainedCodec: name, version, artifactKey, reportKey, bestEpoch: result.bestEpoch, heldOutMse: result.heldOut.mse, heldOutRelError: result.heldOut.relError };
}
