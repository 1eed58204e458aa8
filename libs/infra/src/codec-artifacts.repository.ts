import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { deserializeArtifact, fitCodec, fnv1a64, serializeArtifact, withSettings, type CodecArtifact } from '@lateral/codec';
import { PermanentJobError, mulberry32, redisKeys, s3Keys, trainingKeys, type CodecSettings } from '@lateral/shared';
import type { ObjectStore } from './object-store';

/** Tokens drawn (seeded, without replacement) from the first batch to fit a collection's codec. */
export const FIT_SAMPLE_TOKENS = 20_000;

/**
 * Codec artifacts, one per (collection, codec version), fitted once on a sample of the
 * collection's raw vectors and stored in S3 (versioned, checksummed). The first compress job of
 * a version fits it; the others wait for the object to appear. The Redis lock only saves
 * duplicate fits: the write itself is conditional (If-None-Match), so the first artifact written
 * for a version is the one every segment of that version is read with, even without Redis.
 * The artifact carries its settings, so segments are always read with the codec they were written with.
 * Settings naming a trained codec (`trained`, an AESI autoencoder a train job wrote) are not fitted:
 * the trained weights are stored as this version's artifact under the version's settings.
 */
export class CodecArtifactRepository {
  private readonly cache = new Map<string, Promise<CodecArtifact>>();

  constructor(private readonly store: ObjectStore, private readonly redis: Redis, private readonly prefix: string) {}

  /** Seed of a collection's codec: derived from its tenant and id, so refits are reproducible. */
  static seed(tenantId: string, collectionId: string): bigint {
    return fnv1a64(`${tenantId}/${collectionId}`);
  }

  get(tenantId: string, collectionId: string, version: number): Promise<CodecArtifact> {
    const key = s3Keys.codecArtifact(tenantId, collectionId, version);
    let a = this.cache.get(key);
    if (!a) {
      a = this.store.get(key).then((bytes) => {
        if (!bytes) throw new Error(`codec artifact ${key} is missing from S3`);
        return deserializeArtifact(bytes);
      });
      a.catch(() => this.cache.delete(key));
      this.cache.set(key, a);
    }
    return a;
  }

  /**
   * `sample()` gives the raw vectors to fit on (T x dims) and, for side-information settings, the
   * static embeddings of the same T tokens (T x staticDims).
   */
  async ensure(tenantId: string, collectionId: string, version: number, settings: CodecSettings, sample: () => FitSample): Promise<CodecArtifact> {
    const key = s3Keys.codecArtifact(tenantId, collectionId, version);
    if (await this.store.get(key)) return this.get(tenantId, collectionId, version);
    const lock = redisKeys.codecFitLock(this.prefix, tenantId, collectionId, version);
    const token = randomUUID();
    const deadline = Date.now() + 120_000;
    // A command that times out while another job's fit holds the event loop counts as "not
    // acquired": the loop looks for the artifact and asks again.
    const acquire = () => this.redis.set(lock, token, 'PX', 120_000, 'NX').catch(() => null);
    while ((await acquire()) !== 'OK') {
      if (await this.store.get(key)) return this.get(tenantId, collectionId, version);
      if (Date.now() > deadline) throw new Error(`codec v${version} of ${tenantId}/${collectionId} was not fitted within 120 s`);
      await new Promise((r) => setTimeout(r, 200));
    }
    try {
      if (!(await this.store.get(key)) && settings.trained) {
        // A trained AESI codec (train job, head 'aesi'): its weights under this version's settings.
        const bytes = await this.store.get(trainingKeys.trainedCodec(tenantId, collectionId, settings.trained));
        if (!bytes) throw new PermanentJobError(`trained codec '${settings.trained}' of ${tenantId}/${collectionId} is missing from S3`);
        await this.store.putIfAbsent(key, serializeArtifact(withSettings(deserializeArtifact(bytes), settings)));
      } else if (!(await this.store.get(key))) {
        const { vectors, dims, staticEmbeddings, staticDims } = sample();
        const seed = CodecArtifactRepository.seed(tenantId, collectionId);
        // Both subsamples draw the same rows: same row count, same seed.
        const side = staticEmbeddings && staticDims ? { staticEmbeddings: subsample(staticEmbeddings, staticDims, FIT_SAMPLE_TOKENS, seed), staticDims } : {};
        const artifact = fitCodec(settings, subsample(vectors, dims, FIT_SAMPLE_TOKENS, seed), dims, { seed, ...side });
        await this.store.putIfAbsent(key, serializeArtifact(artifact));
      }
    } finally {
      // Best effort: the lock expires by itself, and the artifact (written conditionally) is what
      // counts. A fit keeps the event loop busy for seconds at large dims, so a Redis command
      // timing out here must not fail a job whose artifact is already in S3.
      await this.redis
        .eval("if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end", 1, lock, token)
        .catch(() => undefined);
    }
    return this.get(tenantId, collectionId, version);
  }
}

export interface FitSample {
  vectors: Float32Array;
  dims: number;
  /** sideInfo: static embeddings of the same tokens, rows in the same order. */
  staticEmbeddings?: Float32Array;
  staticDims?: number;
}

/** Up to `max` rows of an n x d matrix, chosen by a seeded partial Fisher-Yates shuffle, in order. */
function subsample(x: Float32Array, d: number, max: number, seed: bigint): Float32Array {
  const n = x.length / d;
  if (n <= max) return x;
  const rand = mulberry32(Number(seed & 0xffffffffn));
  const idx = Array.from({ length: n }, (_, i) => i);
  for (let i = 0; i < max; i++) {
    const j = i + Math.floor(rand() * (n - i));
    [idx[i], idx[j]] = [idx[j], idx[i]];
  }
  const chosen = idx.slice(0, max).sort((a, b) => a - b);
  const out = new Float32Array(max * d);
  chosen.forEach((r, i) => out.set(x.subarray(r * d, (r + 1) * d), i * d));
  return out;
}
