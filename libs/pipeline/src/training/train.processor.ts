import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Job } from 'bullmq';
import {
  PermanentJobError,
  headArtifactName,
  trainedArtifactCachePath,
  trainingKeys,
  type Collection,
  type CollectionManifest,
  type JobPayload,
  type JobResults,
  type JudgmentSet,
  type QueueName,
  type StoredTrainRequest,
  type TrainReport,
} from '@lateral/shared';
import { LITE_DEFAULT, LITE_SMALL, type KnrmWeights, type LiteWeights } from '@lateral/scoring';
import type { CollectionRepository, GenerationRepository, ObjectStore } from '@lateral/infra';
import { writeKnrmArtifact, writeLiteArtifact, type ScorerResources } from '@lateral/kernels';
import {
  TooFewQueriesError, TrainingDivergedError, assembleTrainingQuery, trainHeadInThread, type TokenSource, type TrainProgress, type TrainingQuery,
} from '@lateral/training';
import type { EncoderProvider } from '../encoders';
import { trainAesiCodec } from './aesi-train';
import type { TrainJobProgressOf } from './job-progress';
import { type CollectionView, scoreGroup, type StaticEmbeddingsCache } from '@lateral/serving';
import { permanentModelErrors } from '../model-errors';

/** What the train processor touches. */
export interface TrainDeps {
  store: Pick<ObjectStore, 'get' | 'getJson' | 'putJson' | 'put' | 'list'>;
  collections: Pick<CollectionRepository, 'get'>;
  generations: Pick<GenerationRepository, 'manifest'>;
  encoders: EncoderProvider;
  /** Every live document of the generation, loaded for scoring (the composition root says how: one cache for re-rank, search and training). */
  loadView: (collection: Collection, manifest: CollectionManifest) => Promise<CollectionView>;
  scorers: ScorerResources;
  scorersDir: string;
  /** head 'aesi': the models' static input embedding tables (side information) */
  staticEmbeddings?: Pick<StaticEmbeddingsCache, 'forCollection'>;
  /** true once DELETE /v1/train/{id} asked this run to stop (checked between steps) */
  cancelled: (tenantId: string, trainId: string) => Promise<boolean>;
}

/** Progress a train job reports (BullMQ job progress; GET /v1/train/{id} shows it). */
export type TrainJobProgress = TrainJobProgressOf<'loading' | 'first-stage' | 'training' | 'writing', TrainProgress['curve']>;

export class TrainingCancelledError extends PermanentJobError {}

/** Documents MaxSim-scored per query for the first stage; larger collections are sampled (seeded) to this many plus the judged ones. */
export const FIRST_STAGE_POOL = 20_000;

/**
 * Fits a LITE or K-NRM head on a collection's judgments (see @lateral/training for the method) and
 * writes it as a versioned scorer artifact: `heads/{name}.training.json` (with the artifact's
 * sha256) then `heads/{name}.onnx` in S3, the copy every scorer fetches on first use, and the same
 * two files in this process's cache `SCORERS_DIR/tenants/{tenant}/`. Re-rank requests of the
 * tenant name it as `{"name": "lite" | "knrm", "artifact": name}`.
 */
export async function trainProcessor(deps: TrainDeps, p: JobPayload<QueueName.train>, job?: Pick<Job, 'updateProgress'>): Promise<JobResults[QueueName.train]> {
  const t0 = Date.now();
  const report = async (pr: TrainJobProgress) => {
    await job?.updateProgress(pr as unknown as object);
  };
  await report({ percent: 0, stage: 'loading' });
  const req = await deps.store.getJson<StoredTrainRequest>(p.requestKey);
  if (!req) throw new PermanentJobError(`train request missing from S3: ${p.requestKey}`);
  if (req.head === 'aesi') {
    if (!deps.staticEmbeddings) throw new PermanentJobError('this worker was started without static embeddings: it cannot train AESI');
    return trainAesiCodec({ ...deps, staticEmbeddings: deps.staticEmbeddings }, p, req, job);
  }
  const judgments = await deps.store.getJson<JudgmentSet>(trainingKeys.judgments(p.tenantId, p.collectionId, req.judgmentsId));
  if (!judgments) throw new PermanentJobError(`judgment set ${req.judgmentsId} of collection ${p.collectionId} is missing from S3`);
  const collection = await deps.collections.get(p.tenantId, p.collectionId);
  if (!collection) throw new PermanentJobError(`collection ${p.tenantId}/${p.collectionId} does not exist`);
  const manifest = await deps.generations.manifest(p.tenantId, p.collectionId);
  if (!manifest) throw new PermanentJobError(`collection ${p.collectionId} has no committed documents yet`);
  const view = await deps.loadView(collection, manifest);
  const encoder = await deps.encoders(collection.model).catch(permanentModelErrors);
  const d = view.dims;

  // Judged documents -> rows of the current generation; ids it lacks are recorded, not fatal.
  const unknown = new Set<string>();
  const judged = judgments.queries.map((q) => {
    const grades = new Map<number, number>();
    for (const j of q.judgments) {
      const row = view.rowOf.get(j.doc);
      if (row === undefined) unknown.add(j.doc);
      else grades.set(row, Math.max(grades.get(row) ?? 0, j.grade));
    }
    return { q, grades };
  }).filter((x) => [...x.grades.values()].some((g) => g > 0));

  await report({ percent: 2, stage: 'first-stage' });
  let lastYield = Date.now();
  const yieldEvery = async () => {
    if (Date.now() - lastYield > 50) {
      await new Promise((r) => setImmediate(r));
      lastYield = Date.now();
    }
  };
  const encoded = await encoder.encodeQueries(judged.map((x) => x.q.text)).catch(permanentModelErrors);
  // First stage: MaxSim over the collection (or a seeded sample of FIRST_STAGE_POOL documents plus the judged ones).
  const nDocs = view.docIds.length;
  let pool: number[];
  if (nDocs <= FIRST_STAGE_POOL) pool = Array.from({ length: nDocs }, (_, i) => i);
  else {
    const set = new Set<number>();
    for (const x of judged) for (const r of x.grades.keys()) set.add(r);
    let s = req.seed >>> 0 || 1;
    while (set.size < FIRST_STAGE_POOL) {
      s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
      set.add(s % nDocs);
    }
    pool = [...set].sort((a, b) => a - b);
  }
  const queries: TrainingQuery[] = [];
  const chunk = 32;
  for (let i = 0; i < judged.length; i += chunk) {
    const part = encoded.slice(i, i + chunk);
    const scores = await scoreGroup(deps.scorers, { view, encoder, queries: part, rows: pool, firstStage: null, yieldEvery }, { name: 'maxsim', normalize: false });
    part.forEach((e, k) => {
      const x = judged[i + k];
      queries.push(assembleTrainingQuery({ id: x.q.id, vectors: e.vectors, length: e.length }, x.grades, pool, scores[k], req.depth));
    });
    if (await deps.cancelled(p.tenantId, p.trainId)) throw new TrainingCancelledError(`training ${p.trainId} was cancelled`);
  }

  // Token vectors of the candidates: views over the generation's fp32 vectors, or decoded once.
  const needed = [...new Set(queries.flatMap((q) => q.candidates))].sort((a, b) => a - b);
  let src: TokenSource;
  if (view.vectors) {
    const vectors = view.vectors;
    src = { dims: d, doc: (row) => ({ vectors: vectors.subarray(view.offsets[row] * d, view.offsets[row + 1] * d), length: view.offsets[row + 1] - view.offsets[row] }) };
  } else {
    const block = view.rowVectors(needed);
    const at = new Map(needed.map((r, i) => [r, i]));
    src = { dims: d, doc: (row) => { const i = at.get(row)!; return { vectors: block.docs.subarray(block.offsets[i] * d, block.offsets[i + 1] * d), length: block.offsets[i + 1] - block.offsets[i] }; } };
  }

  let lastReport = 0;
  const sizes = req.head === 'lite' ? (req.size === 'small' ? LITE_SMALL : LITE_DEFAULT) : undefined;
  // In a worker thread (the candidates' token vectors and the queries packed and transferred):
  // TF.js steps would otherwise hold this process's event loop for up to seconds each. A
  // cancellation thrown from onProgress terminates the thread.
  const result = await trainHeadInThread(src, queries, {
    head: req.head,
    ...(sizes ? { sizes: { ...sizes } } : {}),
    ...(req.residual ? { residual: true } : {}),
    seed: req.seed,
    maxEpochs: req.maxEpochs,
    patience: req.patience,
    ...(req.learningRate !== undefined ? { learningRate: req.learningRate } : {}),
    negatives: req.negatives,
    valFraction: req.valFraction,
    onProgress: async (pr) => {
      if (Date.now() - lastReport < 1000 && pr.step !== pr.stepsPerEpoch) return;
      lastReport = Date.now();
      if (await deps.cancelled(p.tenantId, p.trainId)) throw new TrainingCancelledError(`training ${p.trainId} was cancelled in epoch ${pr.epoch}`);
      // epoch 0: LITE's MaxSim warm start, shown as the first 10% of the training stage
      const done = pr.epoch === 0 ? 0.1 * (pr.step / pr.stepsPerEpoch) : 0.1 + 0.9 * ((pr.epoch - 1 + pr.step / pr.stepsPerEpoch) / pr.maxEpochs);
      await report({ percent: Math.min(95, Math.round(5 + 90 * done)), stage: 'training', epoch: pr.epoch, maxEpochs: pr.maxEpochs, step: pr.step, stepsPerEpoch: pr.stepsPerEpoch, loss: pr.loss, etaSeconds: pr.etaSeconds, curve: pr.curve });
    },
  }).catch((err) => {
    // A diverged run, or data that cannot be split, will not succeed on a retry.
    if (err instanceof TrainingDivergedError || err instanceof TooFewQueriesError) throw new PermanentJobError(err.message);
    throw err;
  });

  await report({ percent: 96, stage: 'writing' });
  const base = headArtifactName(p.collectionId, req.head, req.size, 0, req.residual).replace(/\.v0$/, '');
  const existing = await deps.store.list(trainingKeys.headsPrefix(p.tenantId, p.collectionId));
  const version = 1 + existing.reduce((mx, o) => {
    const m = new RegExp(`/${base.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\.v(\\d+)\\.onnx$`).exec(o.key);
    return m ? Math.max(mx, Number(m[1])) : mx;
  }, 0);
  const artifact = headArtifactName(p.collectionId, req.head, req.size, version, req.residual);
  const file = trainedArtifactCachePath(deps.scorersDir, p.tenantId, artifact);
  mkdirSync(path.dirname(file), { recursive: true });
  if (req.head === 'lite') writeLiteArtifact(file, result.weights as LiteWeights);
  else writeKnrmArtifact(file, result.weights as KnrmWeights);
  const trainReport: TrainReport = {
    trainId: p.trainId,
    artifact,
    head: req.head,
    ...(req.head === 'lite' ? { size: req.size, residual: req.residual } : {}),
    version,
    collection: p.collectionId,
    generation: manifest.generation,
    model: collection.model,
    judgmentsId: req.judgmentsId,
    bestEpoch: result.bestEpoch,
    curve: result.curve,
    heldOut: result.heldOut,
    data: {
      ...result.data,
      judgedQueries: judgments.queries.length,
      unknownDocuments: unknown.size,
      unknownDocumentIds: [...unknown].slice(0, 100),
      firstStagePool: pool.length,
      depth: req.depth,
      split: result.split,
    },
    options: { ...result.options },
    ...(result.warmStart ? { warmStart: result.warmStart } : {}),
    seconds: (Date.now() - t0) / 1000,
    createdAt: new Date().toISOString(),
    sha256: createHash('sha256').update(readFileSync(file)).digest('hex'),
  };
  writeFileSync(file.replace(/\.onnx$/, '.training.json'), JSON.stringify(trainReport, null, 2));
  // The report (with the checksum) first: once the artifact is in S3, a scorer fetching it finds both.
  const reportKey = trainingKeys.headReport(p.tenantId, p.collectionId, artifact);
  await deps.store.putJson(reportKey, trainReport);
  const artifactKey = trainingKeys.headArtifact(p.tenantId, p.collectionId, artifact);
  await deps.store.put(artifactKey, readFileSync(file));
  await report({ percent: 100, stage: 'writing', epoch: result.curve.length, curve: result.curve, loss: result.curve.at(-1)?.trainLoss, etaSeconds: 0 });
  return { artifact, version, artifactKey, reportKey, bestEpoch: result.bestEpoch, heldOutNdcg10: result.heldOut.ndcg10, maxsimNdcg10: result.heldOut.maxsimNdcg10 };
}
