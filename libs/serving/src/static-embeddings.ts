import path from 'node:path';
import type { ReadSegmentOptions } from '@lateral/codec';
import { PermanentJobError, type Collection, type CollectionManifest } from '@lateral/shared';
import type { CodecArtifactRepository, CollectionRepository } from '@lateral/infra';
import { loadStaticEmbeddings, readModelDir, type StaticEmbeddings } from '@lateral/model';

/** What readSegment needs to decode a side-information segment: doc i's static rows from its token ids. */
export type SideInfoReader = NonNullable<ReadSegmentOptions['staticEmbeddings']>;

/**
 * Static input embedding tables (manifest `staticEmbeddings`) of the models under MODELS_DIR,
 * read once per model per process (a table is tens of MB; segments of every side-information
 * collection of the model share it). A failed read is forgotten, so a fixed model directory is
 * picked up by the next job.
 */
export class StaticEmbeddingsCache {
  private readonly tables = new Map<string, Promise<StaticEmbeddings | null>>();

  constructor(private readonly modelsDir: string) {}

  /** The model's table, or null when its manifest declares none. ModelLoadError (permanent) for a bad directory or table. */
  forModel(model: string): Promise<StaticEmbeddings | null> {
    let t = this.tables.get(model);
    if (!t) {
      t = (async () => {
        const dir = path.resolve(this.modelsDir, model);
        const { manifest } = readModelDir(dir);
        return manifest.staticEmbeddings ? loadStaticEmbeddings(dir, manifest) : null;
      })();
      t.catch(() => this.tables.delete(model));
      this.tables.set(model, t);
    }
    return t;
  }

  /** The table of a collection's model; PermanentJobError when the model declares none. */
  async forCollection(collection: Pick<Collection, 'tenantId' | 'id' | 'model'>): Promise<StaticEmbeddings> {
    const se = await this.forModel(collection.model);
    if (!se) {
      throw new PermanentJobError(
        `collection ${collection.tenantId}/${collection.id} uses codec.sideInfo but its model '${collection.model}' declares no staticEmbeddings in manifest.json`,
      );
    }
    return se;
  }
}

/** readSegment's `staticEmbeddings` option: the rows of each document's token ids. */
export function sideInfoReader(se: StaticEmbeddings): SideInfoReader {
  return (_docIndex, tokenIds) => se.lookup(tokenIds);
}

/** For CollectionViewCache: the side-information reader a generation needs, or undefined when none of its segments uses side information. */
export type SideInfoProvider = (manifest: CollectionManifest) => Promise<SideInfoReader | undefined>;

/**
 * A generation needs its model's static embeddings when any of its segments was written with a
 * side-information codec (checked on the segments' codec artifacts, so a re-compression away
 * from sideInfo stops needing the table). The table is only loaded in that case.
 */
export function generationSideInfo(deps: { collections: Pick<CollectionRepository, 'get'>; codecs: Pick<CodecArtifactRepository, 'get'>; staticEmbeddings: StaticEmbeddingsCache }): SideInfoProvider {
  return async (manifest) => {
    const versions = [...new Set(manifest.segments.map((s) => s.codecVersion))];
    const artifacts = await Promise.all(versions.map((v) => deps.codecs.get(manifest.tenantId, manifest.collectionId, v)));
    if (!artifacts.some((a) => a.settings.sideInfo)) return undefined;
    const collection = await deps.collections.get(manifest.tenantId, manifest.collectionId);
    if (!collection) throw new PermanentJobError(`collection ${manifest.tenantId}/${manifest.collectionId} no longer exists`);
    return sideInfoReader(await deps.staticEmbeddings.forCollection(collection));
  };
}

/**
 * readSegment's options for one segment: the side-information reader when its codec artifact
 * uses side information (the model's static table, loaded once per process), else none.
 */
export async function segmentReadOptions(
  artifact: { settings: { sideInfo?: boolean } },
  collection: Pick<Collection, 'tenantId' | 'id' | 'model'>,
  staticEmbeddings: Pick<StaticEmbeddingsCache, 'forCollection'>,
): Promise<ReadSegmentOptions> {
  return artifact.settings.sideInfo ? { staticEmbeddings: sideInfoReader(await staticEmbeddings.forCollection(collection)) } : {};
}
