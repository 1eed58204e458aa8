import type { Collection, CollectionManifest, SegmentRef } from '@lateral/shared';
import type { CodecArtifactRepository } from '@lateral/infra';
import { searchSegment, type SegmentSource, type WarpDirectory, type WarpLayoutExpectations } from '@lateral/search';
import type { CollectionView } from './collection-view';
import { generationTableBytes } from './id-table';
import type { StaticEmbeddingsCache } from './static-embeddings';
import { ALL_SEARCH_NEEDS, SegmentUnavailableError, type LazySearchPart, type SearchGeneration, type SearchNeeds, type SearchPart, type SearchPlan } from './search-plan';
import { SegmentStore, type GenTable, type ObjectSource, type SegmentCacheOptions, type SegmentCacheStats } from './segment-store';
import { decoded, decodedDocs, decodedPrefixes, rowScorer } from './decode-keeping';
import { codesSource, headSource, pooledSource, prefixSource } from './head-sections';
import { documentRows, warpDirectory, warpLists, type WarpListReads } from './warp-reads';
import { view } from './candidate-view';
import { documentScores } from './exact-scores';
import { liveTable, tableKey, unavailableOf } from './generation-tables';

export { HEAD_SUFFIX, HEAD_READS_PER_LOAD, UNAVAILABLE_RECHECK_MS, type ObjectSource, type SegmentCacheOptions, type SegmentCacheStats } from './segment-store';
export { WHOLE_DECODE_FRACTION } from './decode-keeping';
export { WARP_WHOLE_READ_BYTES, WARP_RANGE_GAP_BYTES, type WarpListReads } from './warp-reads';

/**
 * A scorer's memory: segments, not generations. One byte-bounded LRU (SCORER_CACHE_BYTES) holds,
 * by S3 key, each segment's reader, its sorted id table, its search index and its decoded fp32
 * vectors (each made when first needed), plus one id table per
 * generation. Segments are immutable, so a new generation reuses everything already loaded and
 * committing a batch costs loading that batch; a re-rank finds its candidates in the
 * generation's sorted id table and builds the int8 image (or vectors) of those documents only. Objects
 * are read through the local disk cache, at most `loadConcurrency` at a time (a generation of
 * hundreds of segments queues behind the limiter, never issues every read at once), and the
 * event loop is yielded between decodes.
 */
export class SegmentCache {
  private readonly store: SegmentStore;
  /** Search walks begun (alternateScans: odd ones go in reverse). */
  private walks = 0;

  constructor(source: ObjectSource, codecs: Pick<CodecArtifactRepository, 'get'>, staticEmbeddings: Pick<StaticEmbeddingsCache, 'forCollection'>, opts: SegmentCacheOptions) {
    this.store = new SegmentStore(source, codecs, staticEmbeddings, opts);
  }

  stats(): SegmentCacheStats {
    const s = this.store;
    const disk = s.source.stats?.();
    return { ...s.lru.stats(), loadPeak: s.limiter.peak, storedHeads: s.storedHeadReads, ...(disk ? { disk } : {}) };
  }

  /** Keys held now, least recently used first (for tests and debugging). */
  heldKeys(): string[] {
    return this.store.lru.keys();
  }

  /** Keys of the objects known unreadable now (for tests and stats). */
  unavailableKeys(): string[] {
    return [...this.store.bad.keys()];
  }

  /** The fp32 token rows of documents named by where they lie, in that order: WARP's exact final stage (warp-reads.ts, documentRows). */
  documentRows(
    collection: Pick<Collection, 'tenantId' | 'id' | 'model'>,
    where: readonly (readonly [SegmentRef, number])[],
  ): Promise<{ dims: number; docs: Float32Array; offsets: Uint32Array; failed: Map<string, SegmentUnavailableError> }> {
    return documentRows(this.store, collection, where);
  }

  /**
   * Exact MaxSim / query tokens of documents named by where they lie, in that order, scored from
   * their codes in the WebAssembly module (exact-scores.ts); null when the module is not in use
   * (documentRows + GemmMaxsim then, the same scores).
   */
  documentScores(
    collection: Pick<Collection, 'tenantId' | 'id' | 'model'>,
    where: readonly (readonly [SegmentRef, number])[],
    query: { vectors: Float32Array; length: number },
  ): Promise<{ scores: Float32Array; failed: Map<string, SegmentUnavailableError> } | null> {
    return documentScores(this.store, collection, where, query);
  }

  /** The generation's live documents among `ids` as a CollectionView over those documents only (candidate-view.ts). */
  view(collection: Pick<Collection, 'tenantId' | 'id' | 'model'>, manifest: CollectionManifest, ids: readonly string[]): Promise<CollectionView> {
    return view(this.store, collection, manifest, ids);
  }

  /** A segment's WARP search layout directory, verified, checked against `expect` and kept (warp-reads.ts). */
  warpDirectory(collection: Pick<Collection, 'tenantId' | 'id'>, ref: SegmentRef, expect: WarpLayoutExpectations): Promise<WarpDirectory> {
    return warpDirectory(this.store, collection, ref, expect);
  }

  /** The lists of the probed `centroids` (ascending, distinct) of a segment's WARP layout (warp-reads.ts). */
  warpLists(collection: Pick<Collection, 'tenantId' | 'id'>, ref: SegmentRef, dir: WarpDirectory, centroids: ArrayLike<number>): Promise<WarpListReads> {
    return warpLists(this.store, collection, ref, dir, centroids);
  }

  /** The generation's sorted table of live ids (built from the segments' id tables, kept per generation). */
  table(collection: Pick<Collection, 'tenantId' | 'id' | 'model'>, manifest: CollectionManifest): Promise<GenTable> {
    return liveTable(this.store, collection, manifest);
  }

  /** Every segment of the generation with its search index and live documents; throws SegmentUnavailableError when one cannot be read. */
  async searchParts(collection: Pick<Collection, 'tenantId' | 'id' | 'model'>, manifest: CollectionManifest, needs: SearchNeeds = ALL_SEARCH_NEEDS): Promise<SearchPart[]> {
    const { parts, unavailable } = await this.searchGeneration(collection, manifest, needs);
    if (unavailable.length > 0) {
      const u = unavailable[0];
      throw new SegmentUnavailableError(u.key, u.object, u.segment, u.reason);
    }
    return parts;
  }

  /**
   * The generation's segments that can be read, with their search indexes and live documents,
   * in manifest order, and those that cannot (a segment or index that failed its checksum or
   * decoding, or is missing): search answers from the first and names the second.
   */
  async searchGeneration(collection: Pick<Collection, 'tenantId' | 'id' | 'model'>, manifest: CollectionManifest, needs: SearchNeeds = ALL_SEARCH_NEEDS): Promise<SearchGeneration> {
    const plan = await this.searchPlan(collection, manifest, needs);
    const failed: [number, SegmentUnavailableError][] = [];
    const all = await Promise.all(
      plan.parts.map((part) =>
        part.open().catch((err: unknown) => {
          if (!(err instanceof SegmentUnavailableError)) throw err;
          failed.push([part.position, err]);
          return null;
        }),
      ),
    );
    return { parts: all.filter((p): p is SearchPart => p !== null), unavailable: plan.unavailable(failed) };
  }

  /**
   * The generation's segments for a segment-major search (@lateral/search's passes): nothing is
   * read here beyond the generation's id table; each part is opened when the search reaches it
   * (its source as `searchSource` reads it, and its index, under the load limiter) and is let go
   * by the search after, so what a search holds beyond the memory cache is the few segments it
   * has open, not the generation (searchGeneration opened every segment before scoring and held
   * them all to the end: a search's memory grew with the collection). Segments with no live
   * document are left out, as in searchGeneration. A part that cannot be read throws
   * SegmentUnavailableError from `open` or `index`; `unavailable` names those the search
   * recorded, with the segments whose ids are not known. `docBaseOf`: each segment's first global
   * document key (a shard's plan over its scoped manifest); default its place in this manifest.
   */
  async searchPlan(
    collection: Pick<Collection, 'tenantId' | 'id' | 'model'>,
    manifest: CollectionManifest,
    needs: SearchNeeds = ALL_SEARCH_NEEDS,
    docBaseOf?: (ref: SegmentRef) => number,
  ): Promise<SearchPlan> {
    const table = await liveTable(this.store, collection, manifest);
    const parts: LazySearchPart[] = [];
    let docBase = 0;
    manifest.segments.forEach((ref, position) => {
      // A shard's segments keep the global document keys of the whole generation.
      const base = docBaseOf ? docBaseOf(ref) : docBase;
      docBase += ref.documents;
      const live = table.live[position];
      if (live && !live.includes(1)) return;
      parts.push({
        position,
        ref,
        live,
        index: () => this.store.index(collection, ref),
        open: async () => {
          const [src, idx] = await Promise.allSettled([this.searchSource(collection, ref, needs), this.store.index(collection, ref)]);
          if (src.status === 'rejected') throw src.reason;
          if (idx.status === 'rejected') throw idx.reason;
          return { ref, segment: searchSegment(src.value, base), index: idx.value, live };
        },
        docIds: () => this.store.docIdsOf(collection, ref, this.store.readsHeads(needs)),
      });
    });
    return {
      parts,
      openAhead: Math.max(2, this.store.opts.loadConcurrency),
      reversed: () => !!this.store.opts.alternateScans && (this.walks++ & 1) === 1,
      keep: () => {
        if (!table.unknown) this.store.lru.keep(tableKey(manifest), table, generationTableBytes(table));
      },
      unavailable: (failed) => unavailableOf(this.store, collection, manifest, table, [...failed].sort((a, b) => a[0] - b[0])),
    };
  }

  /**
   * A segment as search reads it (SearchNeeds): from its head and pooled vectors, from its head and
   * prefix section (ME-BERT), from its head and code sections, or whole. A segment held whole already, one with no local copy, and one whose
   * codes cannot be scored are read whole.
   */
  private async searchSource(collection: Pick<Collection, 'tenantId' | 'id' | 'model'>, ref: SegmentRef, needs: SearchNeeds): Promise<SegmentSource> {
    if (this.store.readsHeads(needs) && !this.store.lru.has(`seg:${ref.key}`)) {
      // BM25 reads the head alone; modes that read ranges of the segment's bytes get them checked first.
      const head = needs.rows === 'scores' || needs.pooled ? await this.store.checkedHead(collection, ref) : await this.store.head(collection, ref);
      // ME-BERT: the prefix section where it holds m rows per document, else the code sections.
      const prefix = needs.prefixRows && head.pfxRows >= needs.prefixRows ? await prefixSource(this.store, collection, ref, head) : null;
      const part = prefix ?? (needs.rows === 'scores' ? await codesSource(this.store, collection, ref, head) : needs.pooled ? await pooledSource(this.store, collection, ref, head) : headSource(ref, head, null));
      if (part) return part;
    }
    const loaded = await this.store.segment(collection, ref);
    const r = loaded.reader;
    // Decoded vectors are kept in the cache (shared with re-rank), not in the wrapper.
    return {
      name: r.name,
      documents: r.documents,
      dims: r.dims,
      docIds: r.docIds,
      tokenOffsets: r.tokenOffsets,
      tokenIds: r.tokenIds,
      docVectors: r.docVectors,
      metadata: (d: number) => r.metadata(d),
      decodeAll: () => decoded(this.store, ref.key, r),
      decodeDocs: (from: number, to: number) => decodedDocs(this.store, ref.key, r, from, to),
      decodeDocPrefixes: (from: number, to: number, m: number) => decodedPrefixes(this.store, ref.key, r, from, to, m),
      rowScorer: (q: Float32Array, n: number) => rowScorer(this.store, loaded, q, n),
    };
  }
}
