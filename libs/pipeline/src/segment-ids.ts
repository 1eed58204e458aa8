import type { SegmentRef } from '@lateral/shared';

/**
 * Document ids per segment key, for the distinct live-document count of a generation. Segments
 * are immutable, so each one is read once per process (the commit being made remembers its own).
 * Bounded: per collection, a segment that none of the last `keepManifests` generations evaluated
 * here (live()) listed, and that was not remembered or read meanwhile, is forgotten (merged-away
 * inputs, a merge output whose commit lost its race); one that comes back is read again.
 */
export class SegmentIds {
  private readonly scopes = new Map<string, { tick: number; entries: Map<string, { ids: string[]; seen: number }> }>();

  constructor(
    private readonly load: (tenantId: string, collectionId: string, ref: SegmentRef) => Promise<string[]>,
    private readonly keepManifests = 8,
  ) {}

  remember(tenantId: string, collectionId: string, key: string, docIds: string[]): void {
    const scope = this.scope(tenantId, collectionId);
    scope.entries.set(key, { ids: docIds, seen: scope.tick });
  }

  /** Segments whose ids are held, over all collections. */
  get held(): number {
    let n = 0;
    for (const s of this.scopes.values()) n += s.entries.size;
    return n;
  }

  /** Distinct live document ids over `segments` (an id in several segments counts once; tombstoned copies not at all). */
  async count(tenantId: string, collectionId: string, segments: SegmentRef[]): Promise<number> {
    return (await this.live(tenantId, collectionId, segments)).documents;
  }

  /** The document ids of one segment, in segment order. */
  async docIds(tenantId: string, collectionId: string, ref: SegmentRef): Promise<readonly string[]> {
    return (await this.ensure(tenantId, collectionId, [ref]))[0];
  }

  /**
   * `segments` with every superseded copy tombstoned (an id's live copy is its last one: the
   * latest segment holding it, the last position in that segment) and the number of live ids:
   * those whose last copy is not tombstoned. `family` groups ids replaced together (passages
   * `d#n` of a document `d`): a family's ids in segments before the latest one holding any of
   * them are tombstoned too, so a document ingested again replaces all of its old passages.
   * Each call is one generation evaluated: segments listed by none of the last `keepManifests` are forgotten.
   */
  async live(tenantId: string, collectionId: string, segments: SegmentRef[], family?: (id: string) => string): Promise<{ segments: SegmentRef[]; documents: number }> {
    const all = await this.ensure(tenantId, collectionId, segments);
    this.sweep(tenantId, collectionId);
    const seen = new Set<string>();
    const latest = new Map<string, number>(); // family -> the latest segment holding one of its ids
    let documents = 0;
    const out: SegmentRef[] = new Array(segments.length);
    for (let s = segments.length - 1; s >= 0; s--) {
      const ref = segments[s];
      const ids = all[s];
      const dead = new Set(ref.tombstones ?? []);
      let added = false;
      for (let i = ids.length - 1; i >= 0; i--) {
        const f = family?.(ids[i]);
        if (f !== undefined && (latest.get(f) ?? s) === s) latest.set(f, s);
        if (seen.has(ids[i]) || (f !== undefined && latest.get(f)! > s)) {
          if (!dead.has(i)) {
            dead.add(i);
            added = true;
          }
          continue;
        }
        seen.add(ids[i]);
        if (!dead.has(i)) documents++;
      }
      out[s] = added ? { ...ref, tombstones: [...dead].sort((a, b) => a - b) } : ref;
    }
    return { segments: out, documents };
  }

  private scope(tenantId: string, collectionId: string) {
    const k = `${tenantId}/${collectionId}`;
    let s = this.scopes.get(k);
    if (!s) this.scopes.set(k, (s = { tick: 0, entries: new Map() }));
    return s;
  }

  /** The ids of `segments` (loaded when not held), each marked as seen now. */
  private async ensure(tenantId: string, collectionId: string, segments: SegmentRef[]): Promise<string[][]> {
    const scope = this.scope(tenantId, collectionId);
    const loaded = await Promise.all(segments.map(async (s) => scope.entries.get(s.key)?.ids ?? (await this.load(tenantId, collectionId, s))));
    segments.forEach((s, i) => scope.entries.set(s.key, { ids: loaded[i], seen: scope.tick }));
    return loaded;
  }

  /** One more generation evaluated: forget what the last `keepManifests` did not see. */
  private sweep(tenantId: string, collectionId: string): void {
    const scope = this.scope(tenantId, collectionId);
    scope.tick++;
    for (const [key, e] of scope.entries) if (e.seen < scope.tick - this.keepManifests) scope.entries.delete(key);
  }
}
