import { s3Keys } from '@lateral/shared';
import { SegmentCorruptError } from '@lateral/codec';
import { deserializeBm25Stats, type Bm25Stats } from '@lateral/search';

/** How long a generation found without statistics is not asked for again (its writer may still be at work). */
export const BM25_STATS_RETRY_MS = 5_000;

/**
 * The BM25 statistics of the generations searched (LB25 objects, written after each commit:
 * libs/pipeline's bm25-generation-stats.ts), the newest generation's per collection kept in
 * memory, so a BM25 or hybrid search reads only its own terms' postings, in one walk. `get`
 * answers null when the generation has none (written before they existed, its writer not done or
 * failed, or the object corrupt): the search then counts them over the indexes as before.
 */
export class Bm25StatsCache {
  private readonly held = new Map<string, { generation: number; stats: Bm25Stats | null; at: number }>();

  constructor(
    private readonly store: { get(key: string): Promise<Uint8Array | null> },
    private readonly onCorrupt: (key: string, err: Error) => void = () => {},
    private readonly now: () => number = Date.now,
  ) {}

  async get(tenantId: string, collectionId: string, generation: number): Promise<Bm25Stats | null> {
    const id = `${tenantId}/${collectionId}`;
    const h = this.held.get(id);
    if (h && h.generation === generation && (h.stats || this.now() - h.at < BM25_STATS_RETRY_MS)) return h.stats;
    // An older generation than the one held (a search that read its manifest earlier): read, not kept.
    const key = s3Keys.bm25Stats(tenantId, collectionId, generation);
    const bytes = await this.store.get(key);
    let stats: Bm25Stats | null = null;
    if (bytes) {
      try {
        const got = deserializeBm25Stats(bytes, key);
        if (got.generation === generation) stats = got.stats;
        else this.onCorrupt(key, new Error(`holds generation ${got.generation}`));
      } catch (err) {
        if (!(err instanceof SegmentCorruptError)) throw err;
        this.onCorrupt(key, err);
      }
    }
    if (!h || generation >= h.generation) this.held.set(id, { generation, stats, at: this.now() });
    return stats;
  }
}
