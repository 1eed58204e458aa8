import { decodeHalf } from '@lateral/codec';
import type { Collection, SegmentRef } from '@lateral/shared';
import { concatDocPrefixes, type SegmentSource } from '@lateral/search';
import { queryLut } from './decode-keeping';
import type { Cached, SegmentHead, SegmentStore } from './segment-store';

/**
 * A segment as a search reads it without holding it whole (SearchNeeds): its head, with its
 * pooled vectors (BM25, dense) or its code and norm sections (XTR, ME-BERT), each section read
 * from the segment's local copy by one positioned read and kept in the memory cache.
 */

/** A segment's head, with what a search that reads neither token ids nor metadata never touches made to fail loudly. */
export function headSource(ref: SegmentRef, head: SegmentHead, docVectors: Float32Array | null, rows: Partial<Pick<SegmentSource, 'decodeAll' | 'decodeDocs' | 'decodeDocPrefixes' | 'rowScorer'>> = {}): SegmentSource {
  const absent = (what: string) => () => {
    throw new Error(`segment ${ref.key} was opened for a search that reads no ${what} (SearchNeeds)`);
  };
  return {
    name: ref.key,
    documents: head.documents,
    dims: head.dims,
    docIds: head.docIds as string[],
    tokenOffsets: head.tokenOffsets,
    get tokenIds(): Int32Array {
      return absent('token ids')();
    },
    docVectors,
    metadata: absent('metadata'),
    decodeAll: absent('token vectors'),
    ...rows,
  };
}

/** BM25 and dense: the head and the pooled vectors; null when there is no local copy. */
export async function pooledSource(store: SegmentStore, collection: Pick<Collection, 'tenantId' | 'id' | 'model'>, ref: SegmentRef, head: SegmentHead): Promise<SegmentSource | null> {
  const docVectors = await pooledVectors(store, collection, ref, head);
  return docVectors === undefined ? null : headSource(ref, head, docVectors);
}

/**
 * XTR and ME-BERT: the head and the code and norm sections (kept in the cache as `rows:`), rows
 * scored from the codes as a whole segment's would be; documents decode from the same bytes.
 * null when the segment cannot be scored from its codes or has no local copy.
 */
export async function codesSource(store: SegmentStore, collection: Pick<Collection, 'tenantId' | 'id' | 'model'>, ref: SegmentRef, head: SegmentHead): Promise<SegmentSource | null> {
  const image = head.image;
  if (!store.opts.scoreFromCodes || !image) return null;
  const rows = await sectionCodes(store, collection, ref, head);
  if (!rows) return null;
  const off = head.tokenOffsets;
  const d = head.dims;
  const decodeDoc = (i: number) =>
    image.codec.decodeDoc(
      { codes: rows.codes.subarray(head.codeStart[i], head.codeStart[i + 1]), norms: rows.norms.subarray(head.normStart[i], head.normStart[i + 1]) },
      off[i + 1] - off[i],
      d,
      { docId: head.docIds[i], seed: head.seed },
    );
  const decodeDocs = (from: number, to: number) => {
    const out = new Float32Array((off[to] - off[from]) * d);
    for (let i = from; i < to; i++) out.set(decodeDoc(i), (off[i] - off[from]) * d);
    return out;
  };
  // Pooled vectors are not read: no mode that scores token rows uses them.
  return headSource(ref, head, null, {
    decodeAll: () => decodeDocs(0, head.documents),
    decodeDocs,
    decodeDocPrefixes: (from: number, to: number, m: number) => concatDocPrefixes(off, d, from, to, m, (i, k) => decodeDoc(i).subarray(0, k * d)),
    rowScorer: (q: Float32Array, n: number) => (n === 0 ? null : queryLut(store, image, q, d, head.seed).rows(rows)),
  });
}

/** The code and norm sections of a segment (every row's), from two positioned reads of its local copy, kept; null when there is no local copy. */
export function sectionCodes(store: SegmentStore, collection: Pick<Collection, 'tenantId' | 'id' | 'model'>, ref: SegmentRef, head: SegmentHead): Promise<{ codes: Uint8Array; norms: Uint8Array } | null> {
  const D = head.documents;
  return keptRanges(store, `rows:${ref.key}`, collection, ref, [[head.codeAt, head.codeStart[D]], [head.normAt, head.normStart[D]]], ([codes, norms]) => ({ value: { codes, norms }, bytes: codes.byteLength + norms.byteLength }));
}

/**
 * A segment's pooled vectors (documents x dims, fp32) from one positioned read of its local copy,
 * kept in the cache; null when the segment has none; undefined when there is no local copy to read.
 */
export async function pooledVectors(store: SegmentStore, collection: Pick<Collection, 'tenantId' | 'id' | 'model'>, ref: SegmentRef, head: SegmentHead): Promise<Float32Array | null | undefined> {
  if (head.dvWidth === 0) return null;
  const value = await keptRanges(store, `dvec:${ref.key}`, collection, ref, [[head.dvecAt, head.documents * head.dvWidth]], ([b]) => {
    const v = pooledFrom(b, head.dvFormat, head.documents * head.dims);
    return { value: v, bytes: v.byteLength };
  });
  return value ?? undefined;
}

/**
 * Byte ranges of a segment's local copy made into a value kept in the cache under `key`, read
 * under the load limiter; null when there is no local copy, or when the copy is shorter than the
 * ranges (dropped, so the segment is read whole, and checked, from S3). A failed read is not kept.
 */
export async function keptRanges<T>(store: SegmentStore, key: string, collection: Pick<Collection, 'tenantId' | 'id' | 'model'>, ref: SegmentRef, ranges: [number, number][], make: (got: Uint8Array[]) => { value: T; bytes: number }): Promise<T | null> {
  const noCopy = new Error('no local copy');
  try {
    return (await store.lru.get(key, async () => {
      const got = await store.limiter.run(() => store.source.readRanges!(ref.key, ranges, store.copyCheck(collection, ref)));
      if (!got) throw noCopy;
      return make(got) as { value: Cached; bytes: number };
    })) as T;
  } catch (err) {
    if (err === noCopy) return null;
    if (err instanceof RangeError) {
      await store.source.invalidate?.(ref.key);
      return null;
    }
    throw err;
  }
}

/** `n` pooled-vector values as stored in a segment (fp32, or fp16 widened), from bytes read out of it. */
export function pooledFrom(b: Uint8Array, format: SegmentHead['dvFormat'], n: number): Float32Array {
  return format === 'fp32' ? new Float32Array(b.buffer, b.byteOffset, n) : decodeHalf(new Uint16Array(b.buffer, b.byteOffset, n));
}
