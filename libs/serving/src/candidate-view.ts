import type { Collection, CollectionManifest } from '@lateral/shared';
import type { RotatedImageSet } from '@lateral/kernels';
import type { CollectionView } from './collection-view';
import { findId } from './id-table';
import { SegmentUnavailableError } from './search-plan';
import { decodedDocs, keepsWholeDecode } from './decode-keeping';
import { pooledFrom } from './head-sections';
import { liveTable, unavailableOf } from './generation-tables';
import type { GenTable, SegmentStore } from './segment-store';

/** A re-rank's candidates as a CollectionView: from whole segments, or from their bytes read by ranges. */

/**
 * The generation's live documents among `ids` as a CollectionView over those documents only
 * (rows in the order of `ids`, unknown and deleted ids left out). Only the segments holding
 * them are loaded beyond their id tables.
 */
export async function view(store: SegmentStore, collection: Pick<Collection, 'tenantId' | 'id' | 'model'>, manifest: CollectionManifest, ids: readonly string[]): Promise<CollectionView> {
  const table = await liveTable(store, collection, manifest);
  const found: [string, number, number][] = [];
  const seen = new Set<string>();
  for (const id of ids) {
    if (seen.has(id)) continue;
    seen.add(id);
    const at = findId(table.ids, id);
    if (at >= 0) found.push([id, table.seg[at], table.doc[at]]);
  }
  if (store.opts.rangeReads && store.opts.scoreFromCodes && store.source.readRanges && found.length > 0) {
    const fromRanges = await viewFromRanges(store, collection, manifest, table, found);
    if (fromRanges) return fromRanges;
  }
  const { got: loaded, failed } = await eachSegment(found, (s) => store.segment(collection, manifest.segments[s]));
  const { rowOf, docIds, where, unavailableIds } = splitCandidates(found, failed);
  const unavailable = unavailableOf(store, collection, manifest, table, [...failed.entries()]);
  const touched = [...new Set(where.map(([s]) => s))];
  const dims = loaded.size > 0 ? loaded.get(touched[0])!.reader.dims : 0;
  const offsets = new Uint32Array(docIds.length + 1);
  where.forEach(([s, d], row) => {
    const r = loaded.get(s)!.reader;
    offsets[row + 1] = offsets[row] + (r.tokenOffsets[d + 1] - r.tokenOffsets[d]);
  });
  const tokens = offsets[docIds.length];
  const docVectors = new Float32Array(docIds.length * dims);
  where.forEach(([s, d], row) => {
    const r = loaded.get(s)!.reader;
    if (r.docVectors) docVectors.set(r.docVectors.subarray(d * dims, (d + 1) * dims), row * dims);
  });

  // The int8 rotated image of the candidates' tokens only, made from their codes at each request:
  // caching whole segments' images (128+ B per token against ~80 B of codes) made a re-rank's
  // working set the images of every segment it touches, and thrashed once that passed the bound.
  let rotated: RotatedImageSet | null = null;
  const codecs = store.opts.scoreFromCodes ? touched.map((s) => store.imageCodec(loaded.get(s)!)) : [];
  if (codecs.length > 0 && codecs.every((c) => c !== null && c.descriptor === codecs[0]!.descriptor)) {
    const { codec, p } = codecs[0]!;
    const image = new Uint8Array(tokens * p);
    const scales = new Float32Array(tokens);
    where.forEach(([s, d], row) => {
      const r = loaded.get(s)!.reader;
      codec.rotatedImage(r.encodedDoc(d), r.tokenOffsets[d + 1] - r.tokenOffsets[d], dims, image, scales, offsets[row]);
    });
    rotated = { codec, seed: loaded.get(touched[0])!.reader.seed, dims, p, image, scales, offsets };
  }
  // The candidates' rows only (decodedDocs: from the kept whole decode when there is one, else
  // document by document): decoding every touched segment whole for a few of its documents was
  // most of WARP's exact stage (fp16 segments, a profile of `npm run bench -- peers --exact 64`).
  const rowBlock = (row: number) => {
    const [s, d] = where[row];
    return decodedDocs(store, manifest.segments[s].key, loaded.get(s)!.reader, d, d + 1);
  };
  // Every touched segment's whole decode kept: MaxSim reads each candidate's rows where they
  // are (rowBlocks, GemmMaxsim.scoreBlocks) and the contiguous copy of them all is made only when
  // something asks for `vectors` (issue 31: a re-rank of 100 Cranfield ids allocated and filled
  // ~5.6 MB per request at d = 100, most of the compute thread's garbage under re-rank load).
  const inPlace = !rotated && touched.every((s) => keepsWholeDecode(store, manifest.segments[s].key, loaded.get(s)!.reader));
  let copied: Float32Array | null = null;
  const contiguous = () => {
    if (!copied) {
      copied = new Float32Array(tokens * dims);
      for (let row = 0; row < where.length; row++) copied.set(rowBlock(row), offsets[row] * dims);
    }
    return copied;
  };
  if (!rotated && !inPlace) contiguous();
  const rowVectors = (rows: number[]) => {
    const vectors = rotated ? null : copied;
    if (vectors && rows.length === docIds.length && rows.every((r, i) => r === i)) return { docs: vectors, offsets };
    const out = new Uint32Array(rows.length + 1);
    rows.forEach((r, i) => (out[i + 1] = out[i] + (offsets[r + 1] - offsets[r])));
    const docs = new Float32Array(out[rows.length] * dims);
    rows.forEach((r, i) => {
      if (vectors) docs.set(vectors.subarray(offsets[r] * dims, offsets[r + 1] * dims), out[i] * dims);
      else if (!rotated) docs.set(rowBlock(r), out[i] * dims);
      else docs.set(loaded.get(where[r][0])!.reader.decodeDoc(where[r][1]), out[i] * dims);
    });
    return { docs, offsets: out };
  };
  return {
    generation: manifest.generation,
    dims,
    get vectors() {
      return rotated ? null : contiguous();
    },
    rotated,
    offsets,
    docVectors,
    rowOf,
    docIds,
    tokens,
    rowVectors,
    ...(inPlace ? { rowBlocks: (rows: number[]) => rows.map(rowBlock) } : {}),
    unavailable,
    unavailableIds,
  };
}

/**
 * view() from the candidates' bytes alone: each touched segment's head (cached), then one
 * positioned read per candidate's codes, norms and pooled vector from the segment's local copy,
 * expanded to the int8 image as the segment path does. The memory cache then holds heads (~30 B
 * per document plus its id), not codes, so a collection whose codes pass the bound does not
 * thrash; the OS page cache keeps the hot bytes. null: some segment cannot be read this way (not
 * EDEN token layout, other codec, no local copy), and the caller loads whole segments.
 */
export async function viewFromRanges(store: SegmentStore, collection: Pick<Collection, 'tenantId' | 'id' | 'model'>, manifest: CollectionManifest, table: GenTable, found: [string, number, number][]): Promise<CollectionView | null> {
  // Checked heads: the candidates' bytes are read by ranges next (a head from S3 gets its segment checked first).
  const { got: heads, failed } = await eachSegment(found, (s) => store.checkedHead(collection, manifest.segments[s]));
  const image = [...heads.values()][0]?.image;
  if (!image || [...heads.values()].some((h) => h.image?.descriptor !== image.descriptor)) return null;
  const { rowOf, docIds, where, unavailableIds } = splitCandidates(found, failed);
  const dims = heads.get(where[0][0])!.dims;
  const rowsBySegment = new Map<number, number[]>();
  where.forEach(([s], row) => (rowsBySegment.get(s) ?? rowsBySegment.set(s, []).get(s)!).push(row));
  const encoded: { codes: Uint8Array; norms: Uint8Array }[] = new Array(docIds.length);
  const pooled: (Uint8Array | null)[] = new Array(docIds.length).fill(null);
  const read = await Promise.all(
    [...rowsBySegment].map(async ([s, rows]) => {
      const h = heads.get(s)!;
      const ranges: [number, number][] = [];
      for (const row of rows) {
        const d = where[row][1];
        ranges.push([h.codeAt + h.codeStart[d], h.codeStart[d + 1] - h.codeStart[d]], [h.normAt + h.normStart[d], h.normStart[d + 1] - h.normStart[d]]);
        if (h.dvWidth > 0) ranges.push([h.dvecAt + d * h.dvWidth, h.dvWidth]);
      }
      const ref = manifest.segments[s];
      // A copy fetched again here is checked first; a corrupt one sends the request to whole reads, which name it.
      const got = await store.source.readRanges!(ref.key, ranges, store.copyCheck(collection, ref)).catch((err: unknown) => {
        if (err instanceof SegmentUnavailableError) return null;
        throw err;
      });
      if (!got) return false;
      const per = h.dvWidth > 0 ? 3 : 2;
      rows.forEach((row, k) => {
        encoded[row] = { codes: got[k * per], norms: got[k * per + 1] };
        if (h.dvWidth > 0) pooled[row] = got[k * per + 2];
      });
      return true;
    }),
  );
  if (!read.every(Boolean)) return null;
  const offsets = new Uint32Array(docIds.length + 1);
  where.forEach(([s, d], row) => {
    const off = heads.get(s)!.tokenOffsets;
    offsets[row + 1] = offsets[row] + (off[d + 1] - off[d]);
  });
  const tokens = offsets[docIds.length];
  const docVectors = new Float32Array(docIds.length * dims);
  where.forEach(([s], row) => {
    const b = pooled[row];
    if (!b) return;
    docVectors.set(pooledFrom(b, heads.get(s)!.dvFormat, dims), row * dims);
  });
  const { codec, p } = image;
  const imageBytes = new Uint8Array(tokens * p);
  const scales = new Float32Array(tokens);
  for (let row = 0; row < docIds.length; row++) codec.rotatedImage(encoded[row], offsets[row + 1] - offsets[row], dims, imageBytes, scales, offsets[row]);
  const seed = heads.get(where[0][0])!.seed;
  const rotated: RotatedImageSet = { codec, seed, dims, p, image: imageBytes, scales, offsets };
  // fp32 vectors of some rows (scorers that need them): decoded from the bytes read, as the segment's reader decodes them.
  const rowVectors = (rows: number[]) => {
    const out = new Uint32Array(rows.length + 1);
    rows.forEach((r, i) => (out[i + 1] = out[i] + (offsets[r + 1] - offsets[r])));
    const docs = new Float32Array(out[rows.length] * dims);
    rows.forEach((r, i) => docs.set(codec.decodeDoc(encoded[r], offsets[r + 1] - offsets[r], dims, { docId: docIds[r], seed: heads.get(where[r][0])!.seed }), out[i] * dims));
    return { docs, offsets: out };
  };
  const unavailable = unavailableOf(store, collection, manifest, table, [...failed.entries()]);
  return { generation: manifest.generation, dims, vectors: null, rotated, offsets, docVectors, rowOf, docIds, tokens, rowVectors, unavailable, unavailableIds };
}

/** `load` for each segment holding a found candidate, at once; a segment that cannot be read goes to `failed` (other errors throw). */
async function eachSegment<T>(found: readonly [string, number, number][], load: (s: number) => Promise<T>): Promise<{ got: Map<number, T>; failed: Map<number, SegmentUnavailableError> }> {
  const got = new Map<number, T>();
  const failed = new Map<number, SegmentUnavailableError>();
  await Promise.all(
    [...new Set(found.map(([, s]) => s))].map(async (s) => {
      try {
        got.set(s, await load(s));
      } catch (err) {
        if (!(err instanceof SegmentUnavailableError)) throw err;
        failed.set(s, err);
      }
    }),
  );
  return { got, failed };
}

/**
 * The found candidates (id, segment, document) as a view's rows, in request order, and the ids
 * held by a segment that cannot be read: those are named, not scored (nor silently dropped).
 */
function splitCandidates(found: readonly [string, number, number][], failed: ReadonlyMap<number, unknown>): { rowOf: Map<string, number>; docIds: string[]; where: [number, number][]; unavailableIds: string[] } {
  const rowOf = new Map<string, number>();
  const docIds: string[] = [];
  const where: [number, number][] = [];
  const unavailableIds: string[] = [];
  for (const [id, s, d] of found) {
    if (failed.has(s)) {
      unavailableIds.push(id);
      continue;
    }
    rowOf.set(id, docIds.length);
    docIds.push(id);
    where.push([s, d]);
  }
  return { rowOf, docIds, where, unavailableIds };
}
