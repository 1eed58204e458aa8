import { IMAGE_MAX_BITS, codecFromDescriptor, readSegment, type CodecArtifact, type EdenCodec, type SegmentReader } from '@lateral/codec';
import type { CollectionManifest } from '@lateral/shared';
import type { ObjectStore } from '@lateral/infra';
import type { CodecArtifactRepository } from '@lateral/infra';
import type { RotatedImageSet } from '@lateral/kernels';
import type { SideInfoProvider } from './static-embeddings';

/**
 * A committed generation of a collection, loaded for scoring: per-document token offsets, pooled
 * document vectors and an id -> row map, plus the token vectors in one of two forms:
 * - `rotated`: EDEN token-layout codes (bits <= IMAGE_MAX_BITS, no side information) as the int8
 *   rotated image MaxSim scores with integer GEMMs; `vectors` is null and other scorers get
 *   their candidates decoded from the codes by `rowVectors`.
 * - `vectors`: every token decoded to fp32 (T x dims), for the other codecs.
 * When a document id appears in several segments the last committed one wins.
 */
export interface CollectionView {
  generation: number;
  dims: number;
  vectors: Float32Array | null;
  rotated: RotatedImageSet | null;
  /** docs + 1 offsets (in tokens) into `vectors` / the rotated image. */
  offsets: Uint32Array;
  docVectors: Float32Array;
  rowOf: Map<string, number>;
  docIds: string[];
  tokens: number;
  /** Token vectors of `rows` as one T x dims fp32 block with rows + 1 offsets (decoded from the codes when `vectors` is null). */
  rowVectors(rows: number[]): { docs: Float32Array; offsets: Uint32Array };
}

/** Loads generations once per process; segments are immutable so loaded generations are cached by key. */
export class CollectionViewCache {
  private readonly views = new Map<string, Promise<CollectionView>>();

  constructor(
    private readonly store: ObjectStore,
    private readonly codecs: CodecArtifactRepository,
    private readonly maxViews = 4,
    /** Static embeddings for side-information segments (undefined: the generation has none). */
    private readonly sideInfo: SideInfoProvider = async () => undefined,
    /** false: decode EDEN token-layout generations to fp32 too (COMPRESSED_SCORING=decode). */
    private readonly scoreFromCodes = true,
  ) {}

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
    const staticEmbeddings = await this.sideInfo(manifest);
    const loaded = await Promise.all(
      manifest.segments.map(async (s) => {
        const bytes = await this.store.get(s.key);
        if (!bytes) throw new Error(`segment ${s.key} of generation ${manifest.generation} is missing from S3`);
        // Each segment is decoded with the codec artifact of the version it was written with.
        const artifact = await this.codecs.get(manifest.tenantId, manifest.collectionId, s.codecVersion);
        return { reader: readSegment(bytes, s.key, artifact, { staticEmbeddings }), artifact };
      }),
    );
    const readers = loaded.map((l) => l.reader);
    const dims = readers[0]?.dims ?? 0;
    // Last committed occurrence of each id wins.
    const owner = new Map<string, [number, number]>();
    readers.forEach((r, si) => r.docIds.forEach((id, di) => owner.set(id, [si, di])));
    const docIds = [...owner.keys()];
    const sources = docIds.map((id) => owner.get(id)!);
    const offsets = new Uint32Array(docIds.length + 1);
    sources.forEach(([si, di], row) => {
      const r = readers[si];
      offsets[row + 1] = offsets[row] + (r.tokenOffsets[di + 1] - r.tokenOffsets[di]);
    });
    const tokens = offsets[docIds.length];
    const docVectors = new Float32Array(docIds.length * dims);
    const rowOf = new Map<string, number>();
    sources.forEach(([si, di], row) => {
      const r = readers[si];
      if (r.docVectors) docVectors.set(r.docVectors.subarray(di * dims, (di + 1) * dims), row * dims);
      rowOf.set(docIds[row], row);
    });

    const rotated = this.scoreFromCodes ? rotatedImage(loaded, sources, offsets, dims) : null;
    let vectors: Float32Array | null = null;
    if (!rotated) {
      vectors = new Float32Array(tokens * dims);
      const decoded = readers.map((r) => r.decodeAll());
      sources.forEach(([si, di], row) => {
        const r = readers[si];
        vectors!.set(decoded[si].subarray(r.tokenOffsets[di] * dims, r.tokenOffsets[di + 1] * dims), offsets[row] * dims);
      });
    }
    const rowVectors = (rows: number[]) => {
      if (vectors && rows.length === docIds.length && rows.every((r, i) => r === i)) return { docs: vectors, offsets };
      const out = new Uint32Array(rows.length + 1);
      rows.forEach((r, i) => (out[i + 1] = out[i] + (offsets[r + 1] - offsets[r])));
      const docs = new Float32Array(out[rows.length] * dims);
      rows.forEach((r, i) => {
        if (vectors) docs.set(vectors.subarray(offsets[r] * dims, offsets[r + 1] * dims), out[i] * dims);
        else docs.set(readers[sources[r][0]].decodeDoc(sources[r][1]), out[i] * dims);
      });
      return { docs, offsets: out };
    };
    return { generation: manifest.generation, dims, vectors, rotated, offsets, docVectors, rowOf, docIds, tokens, rowVectors };
  }
}

/**
 * The rotated int8 image of a generation whose segments all use one EDEN token-layout codec
 * (same artifact and seed, bits <= IMAGE_MAX_BITS, no side information); null otherwise.
 */
function rotatedImage(
  loaded: { reader: SegmentReader; artifact: CodecArtifact }[],
  sources: [number, number][],
  offsets: Uint32Array,
  dims: number,
): RotatedImageSet | null {
  if (loaded.length === 0) return null;
  const first = loaded[0];
  const d = first.reader.codec;
  const eligible = (r: SegmentReader) =>
    r.codec.kind === 'eden' && r.codec.layout === 'token' && !r.codec.sideInfo && (r.codec.bits ?? 8) <= IMAGE_MAX_BITS &&
    r.seed === first.reader.seed && JSON.stringify(r.codec) === JSON.stringify(d);
  if (!loaded.every((l) => eligible(l.reader)) || !d.artifact) return null;
  const codec = codecFromDescriptor(d, first.artifact) as EdenCodec;
  const p = codec.paddedDims(dims);
  const T = offsets[offsets.length - 1];
  const image = new Uint8Array(T * p);
  const scales = new Float32Array(T);
  sources.forEach(([si, di], row) => {
    const r = loaded[si].reader;
    codec.rotatedImage(r.encodedDoc(di), offsets[row + 1] - offsets[row], dims, image, scales, offsets[row]);
  });
  return { codec, seed: first.reader.seed, dims, p, image, scales, offsets };
}
