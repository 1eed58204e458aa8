import { readSegment } from '@lateral/codec';
import type { CollectionManifest } from '@lateral/shared';
import type { ObjectStore } from '@lateral/infra';
import type { CodecArtifacts } from './codec-artifacts';

/**
 * A committed generation of a collection, decoded for scoring: all token vectors of all live
 * segments concatenated (T x dims), per-document offsets, pooled document vectors, and an
 * id -> row map. When a document id appears in several segments the last committed one wins.
 */
export interface CollectionView {
  generation: number;
  dims: number;
  vectors: Float32Array;
  /** docs + 1 offsets (in tokens) into `vectors`. */
  offsets: Uint32Array;
  docVectors: Float32Array;
  rowOf: Map<string, number>;
  docIds: string[];
  tokens: number;
}

/** Loads generations once per process; segments are immutable so decoded generations are cached by key. */
export class CollectionViewCache {
  private readonly views = new Map<string, Promise<CollectionView>>();

  constructor(private readonly store: ObjectStore, private readonly codecs: CodecArtifacts, private readonly maxViews = 4) {}

  get(manifest: CollectionManifest): Promise<CollectionView> {
    const key = `${manifest.tenantId}/${manifest.collectionId}/${manifest.generation}`;
    let view = this.views.get(key);
    if (!view) {
      view = this.load(manifest);
      view.catch(() => this.views.delete(key));
      this.views.set(key, view);
      while (this.views.size > this.maxViews) this.views.delete(this.views.keys().next().value as string);
    }
    return view;
  }

  private async load(manifest: CollectionManifest): Promise<CollectionView> {
    const readers = await Promise.all(
      manifest.segments.map(async (s) => {
        const bytes = await this.store.get(s.key);
        if (!bytes) throw new Error(`segment ${s.key} of generation ${manifest.generation} is missing from S3`);
        // Each segment is decoded with the codec artifact of the version it was written with.
        return readSegment(bytes, s.key, await this.codecs.get(manifest.tenantId, manifest.collectionId, s.codecVersion));
      }),
    );
    const dims = readers[0]?.dims ?? 0;
    // Last committed occurrence of each id wins.
    const owner = new Map<string, [number, number]>();
    readers.forEach((r, si) => r.docIds.forEach((id, di) => owner.set(id, [si, di])));
    const docIds = [...owner.keys()];
    const offsets = new Uint32Array(docIds.length + 1);
    const decoded = readers.map((r) => ({ vectors: r.decodeAll(), r }));
    docIds.forEach((id, row) => {
      const [si, di] = owner.get(id)!;
      const r = readers[si];
      offsets[row + 1] = offsets[row] + (r.tokenOffsets[di + 1] - r.tokenOffsets[di]);
    });
    const tokens = offsets[docIds.length];
    const vectors = new Float32Array(tokens * dims);
    const docVectors = new Float32Array(docIds.length * dims);
    const rowOf = new Map<string, number>();
    docIds.forEach((id, row) => {
      const [si, di] = owner.get(id)!;
      const { vectors: v, r } = decoded[si];
      vectors.set(v.subarray(r.tokenOffsets[di] * dims, r.tokenOffsets[di + 1] * dims), offsets[row] * dims);
      if (r.docVectors) docVectors.set(r.docVectors.subarray(di * dims, (di + 1) * dims), row * dims);
      rowOf.set(id, row);
    });
    return { generation: manifest.generation, dims, vectors, offsets, docVectors, rowOf, docIds, tokens };
  }
}
