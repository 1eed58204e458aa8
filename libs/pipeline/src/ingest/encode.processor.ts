import type { Job } from 'bullmq';
import { PermanentJobError, QueueName, s3Keys, type JobPayload, type JobResults } from '@lateral/shared';
import { writeSegment } from '@lateral/codec';
import type { CollectionRepository, JobQueues, Logger, ObjectStore } from '@lateral/infra';
import { batchInfoKey, fromNdjson } from '@lateral/shared';
import { enqueueNext } from '../pipeline';
import { batchDocumentInfo, prepareDocuments } from './document-info';
import type { EncoderProvider } from '../encoders';
import { RAW_CODEC, assembleSegmentDocs } from '@lateral/serving';
import { permanentModelErrors } from '../model-errors';

/** What the encode processor touches. */
export interface EncodeDeps {
  store: Pick<ObjectStore, 'get' | 'put'>;
  collections: Pick<CollectionRepository, 'get'>;
  encoders: EncoderProvider;
  queues: Pick<JobQueues, 'add'>;
  /** Padded tokens per encoder batch (ENCODE_TOKEN_BUDGET). */
  tokenBudget: number;
  logger: Logger;
}

export async function encodeProcessor(deps: EncodeDeps, p: JobPayload<QueueName.encode>, job?: Job): Promise<JobResults[QueueName.encode]> {
  const collection = await deps.collections.get(p.tenantId, p.collectionId);
  if (!collection) throw new PermanentJobError(`collection ${p.tenantId}/${p.collectionId} no longer exists`);
  const body = await deps.store.get(p.documentsKey);
  if (!body) throw new PermanentJobError(`accepted documents are missing from S3: ${p.documentsKey}`);
  const docs = fromNdjson(body);
  const encoder = await deps.encoders(collection.model).catch(permanentModelErrors);
  if (encoder.dims !== collection.dims) {
    throw new PermanentJobError(`model ${collection.model} produces ${encoder.dims}-d vectors but collection ${p.collectionId} was created with ${collection.dims} dims`);
  }
  const started = Date.now();
  const prepared = prepareDocuments(docs, collection, encoder); // passages, when the collection asks for them
  const encoded = await encoder
    .encodeDocuments(
      prepared.texts,
      { maxTokens: collection.maxDocTokens, tokenBudget: deps.tokenBudget },
    )
    .catch(permanentModelErrors);
  await job?.updateProgress(80);
  const segment = writeSegment(
    assembleSegmentDocs(prepared.ids, encoded, encoder.dims, prepared.metadata, (e) => encoder.pool(e)),
    RAW_CODEC,
  );
  const rawKey = s3Keys.rawVectors(p.tenantId, p.collectionId, p.batchId);
  await deps.store.put(rawKey, segment);
  await deps.store.put(batchInfoKey(p.tenantId, p.collectionId, p.batchId), JSON.stringify(batchDocumentInfo(p.batchId, prepared, encoded, encoder)), 'application/json');
  const tokens = encoded.reduce((s, e) => s + e.length, 0);
  deps.logger.debug(`encoded ${docs.length} docs / ${tokens} tokens in ${Date.now() - started} ms`, { batch: p.batchId });
  const result = { rawKey, documents: docs.length, tokens, codecVersion: collection.codecVersion };
  await enqueueNext(deps.queues, QueueName.encode, p, result);
  return result;
}
