import type { Job } from 'bullmq';
import { ChunkFormatError, PermanentJobError, QueueName, batchKeys, binaryChunkTexts, isBinaryChunk, type ChunkHeader, type ChunkTexts, type CodecSettings, type JobPayload, type JobResults } from '@lateral/shared';
import type { CodecArtifact } from '@lateral/codec';
import { listWithDates, objectHead, type CodecArtifactRepository, type CollectionRepository, type ObjectStore } from '@lateral/infra';
import type { EncoderProvider } from '../encoders';
import { encodeTextEntry, mapLimit, modelVersion, textHash, textKey, type TextSpace } from './text-cache';
import { permanentModelErrors } from '../model-errors';

/** Keys this process knows to be in the text cache, with their write time (saves a HEAD per text). */
export class KnownTexts {
  private readonly keys = new Map<string, number>();
  constructor(private readonly max = 1_000_000) {}
  get(key: string): number | undefined {
    return this.keys.get(key);
  }
  set(key: string, at: number): void {
    this.keys.delete(key);
    this.keys.set(key, at);
    while (this.keys.size > this.max) this.keys.delete(this.keys.keys().next().value as string);
  }
}

/** What the encode-texts processor touches. */
export interface EncodeTextsDeps {
  store: Pick<ObjectStore, 'get' | 'getJson' | 'put' | 's3' | 'bucket'>;
  collections: Pick<CollectionRepository, 'get'>;
  codecs: Pick<CodecArtifactRepository, 'get'>;
  encoders: EncoderProvider;
  modelsDir: string;
  tokenBudget: number;
  ttlDays: number;
  known: KnownTexts;
}

/** Above this many texts not known to this process, the text space is listed instead of HEAD per text. */
const LIST_ABOVE = 64;
const MAX_LISTED = 200_000;

/** An entry needs this much life left to count as reused (the job that reads it runs after this one). */
const MIN_LIFE_LEFT_MS = 3600 * 1000;

/**
 * Makes sure every text of the job is in the text cache: texts already there (and not about to
 * expire) are reused, the others are encoded in token-budget batches and written, one object per
 * text. Runs on the encoder pool; the re-rank or batch chunk job that needs the texts is its parent.
 */
export async function encodeTextsProcessor(deps: EncodeTextsDeps, p: JobPayload<QueueName.encodeTexts>, job?: Pick<Job, 'updateProgress'>): Promise<JobResults[QueueName.encodeTexts]> {
  const t0 = Date.now();
  // A batch chunk's hashes from its chunk file's header (its texts are read below only if one is missing); else the texts file.
  const fromChunk = p.chunkKey ? await chunkHashes(deps, p.chunkKey) : null;
  const own: Map<string, string> | null = fromChunk ? null : await readTexts(deps, p.textsKey);
  const hashes = fromChunk ? [...fromChunk.keys()] : [...own!.keys()];
  const encoder = await deps.encoders(p.model).catch(permanentModelErrors);
  const space: TextSpace = { tenantId: p.tenantId, model: p.model, modelVersion: await modelVersion(deps.modelsDir, p.model), maxTokens: p.maxTokens, codec: p.codec };
  const ttlMs = deps.ttlDays * 24 * 3600 * 1000;
  const now = Date.now();
  const fresh = (at: number | null | undefined) => at !== null && at !== undefined && now - at < ttlMs - Math.min(MIN_LIFE_LEFT_MS, ttlMs / 2);

  // Each text's cache key, built once (a chunk names thousands).
  const keys = hashes.map((h) => textKey(space, h));
  // Many texts this process has not seen: one listing of the text space (1,000 keys a request)
  // instead of a HEAD per text; a space too large to list falls back to HEADs.
  // Texts this process knows are answered in one pass, without a promise each (a chunk of a batch
  // that repeats its texts knows them all); the others are listed or HEADed below.
  const present = keys.map((key) => fresh(deps.known.get(key)));
  const unknown = keys.flatMap((_, i) => (present[i] ? [] : [i]));
  let listedAll = false;
  if (unknown.length > LIST_ABOVE) {
    const prefix = textKey(space, '0'.repeat(64)).replace(/00\/0{64}\.seg$/, '');
    let listed = 0;
    listedAll = true;
    for await (const o of listWithDates(deps.store, prefix)) {
      if (o.lastModified) deps.known.set(o.key, o.lastModified.getTime());
      if (++listed >= MAX_LISTED) {
        listedAll = false;
        break;
      }
    }
  }
  await mapLimit(unknown, 16, async (i) => {
    const key = keys[i];
    if (fresh(deps.known.get(key))) present[i] = true;
    else if (!listedAll) {
      const head = await objectHead(deps.store, key);
      const at = head?.lastModified?.getTime() ?? null;
      if (fresh(at)) {
        deps.known.set(key, at!);
        present[i] = true;
      }
    }
  });
  const missing = hashes.filter((_, i) => !present[i]);
  let tokens = 0;
  if (missing.length > 0) {
    // The texts files holding the missing texts: this chunk's, or an earlier chunk's (its header's textsIn).
    const fileOf = (h: string) => {
      const n = fromChunk?.get(h);
      return n === undefined || n === null ? p.textsKey : batchKeys.siblingChunkTexts(p.textsKey, n);
    };
    const files = new Map<string, Map<string, string>>(own ? [[p.textsKey, own]] : []);
    for (const key of new Set(missing.map(fileOf))) if (!files.has(key)) files.set(key, await readTexts(deps, key));
    const missingTexts = missing.map((h) => {
      const file = fileOf(h);
      const t = files.get(file)!.get(h);
      if (t === undefined) throw new PermanentJobError(`candidate texts file ${file} lacks text ${h} that chunk file ${p.chunkKey} names`);
      return t;
    });
    const { settings, artifact } = await cacheCodec(deps, p);
    const encoded = await encoder.encodeDocuments(missingTexts, { maxTokens: p.maxTokens, tokenBudget: deps.tokenBudget }).catch(permanentModelErrors);
    await job?.updateProgress(80);
    const at = Date.now();
    await mapLimit(missing, 32, async (h, i) => {
      const key = textKey(space, h);
      await deps.store.put(key, encodeTextEntry(encoder, encoded[i], at, artifact, settings));
      deps.known.set(key, at);
      tokens += encoded[i].length;
    });
  }
  return { texts: hashes.length, encoded: missing.length, reused: hashes.length - missing.length, tokens, ms: Date.now() - t0 };
}

/** A texts file's distinct texts by hash: a re-rank request's (an array, hashed here), or a batch chunk's with their hashes (ChunkTexts: hashed once, when planned). */
async function readTexts(deps: Pick<EncodeTextsDeps, 'store'>, textsKey: string): Promise<Map<string, string>> {
  const file = await deps.store.getJson<string[] | ChunkTexts>(textsKey);
  if (!file) throw new PermanentJobError(`candidate texts are missing from S3: ${textsKey}`);
  const texts = Array.isArray(file) ? file : file.texts;
  const given = Array.isArray(file) ? null : file.textHashes;
  if (given && given.length !== texts.length) throw new PermanentJobError(`candidate texts file ${textsKey} names ${given.length} hashes for ${texts.length} texts`);
  const distinct = new Map<string, string>();
  texts.forEach((t, i) => distinct.set(given ? given[i] : textHash(t), t));
  return distinct;
}

/**
 * The distinct text hashes a batch chunk file names (a binary file's hashes section, or a JSONL
 * file's header line: only those are decoded),
 * each with the chunk whose texts file holds its text (null: this chunk's own, as for every text of
 * a header without textsIn); null for a chunk file without the header (written before chunks named
 * their texts by hash): its texts file is then the list.
 */
async function chunkHashes(deps: Pick<EncodeTextsDeps, 'store'>, chunkKey: string): Promise<Map<string, number | null> | null> {
  const bytes = await deps.store.get(chunkKey);
  if (!bytes) throw new PermanentJobError(`batch chunk file is missing from S3: ${chunkKey}`);
  if (isBinaryChunk(bytes)) {
    // A binary chunk file (batch-chunk-format.ts): its hashes section only.
    let texts: { textHashes: string[]; textsIn: number[] | null };
    try {
      texts = binaryChunkTexts(bytes);
    } catch (err) {
      if (err instanceof ChunkFormatError) throw new PermanentJobError(`batch chunk file ${chunkKey} cannot be read: ${err.message}`);
      throw err;
    }
    const out = new Map<string, number | null>();
    texts.textHashes.forEach((h, i) => {
      if (!out.has(h)) out.set(h, texts.textsIn ? texts.textsIn[i] : null);
    });
    return out;
  }
  const nl = bytes.indexOf(10);
  const head = Buffer.from(bytes.buffer, bytes.byteOffset, nl < 0 ? bytes.byteLength : nl).toString('utf8');
  if (!head.startsWith('{"textHashes":')) return null;
  let header: ChunkHeader;
  try {
    header = JSON.parse(head) as ChunkHeader;
  } catch {
    throw new PermanentJobError(`batch chunk file ${chunkKey} has a header line that is not JSON`);
  }
  if (!Array.isArray(header.textHashes)) throw new PermanentJobError(`batch chunk file ${chunkKey} has a header line without textHashes`);
  const textsIn = header.textsIn;
  if (textsIn !== undefined && (!Array.isArray(textsIn) || textsIn.length !== header.textHashes.length || !textsIn.every((n) => Number.isInteger(n) && n >= 0))) {
    throw new PermanentJobError(`batch chunk file ${chunkKey} has a header whose textsIn does not name a chunk for each of its textHashes`);
  }
  const out = new Map<string, number | null>();
  header.textHashes.forEach((h, i) => {
    if (!out.has(h)) out.set(h, textsIn ? textsIn[i] : null);
  });
  return out;
}

/** Codec of the cached entries: the collection's (with its artifact), or null = the raw fp16 default. */
async function cacheCodec(deps: EncodeTextsDeps, p: JobPayload<QueueName.encodeTexts>): Promise<{ settings: CodecSettings | null; artifact: CodecArtifact | null }> {
  if (!p.codec) return { settings: null, artifact: null };
  const collection = await deps.collections.get(p.tenantId, p.codec.collectionId);
  const settings = collection && collection.codecVersion === p.codec.codecVersion ? collection.codec : collection?.pending?.codecVersion === p.codec.codecVersion ? collection.pending.codec : null;
  if (!settings || settings.sideInfo) return { settings: null, artifact: null };
  if (settings.kind !== 'eden' && settings.kind !== 'residual') return { settings, artifact: null };
  // A collection that has not compressed anything yet has no artifact: keep the texts at fp16 under its tag.
  const artifact = await deps.codecs.get(p.tenantId, p.codec.collectionId, p.codec.codecVersion).catch(() => null);
  return artifact ? { settings, artifact } : { settings: null, artifact: null };
}
