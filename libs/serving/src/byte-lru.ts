export interface ByteLruStats {
  hits: number;
  misses: number;
  /** hits / (hits + misses); 0 before any lookup. */
  hitRatio: number;
  bytes: number;
  maxBytes: number;
  entries: number;
  evictions: number;
}

interface Entry<V> {
  value: Promise<V>;
  bytes: number;
  settled: boolean;
  /** The loaded value, once settled. */
  resolved?: V;
  /** `placed` when this entry was last put at the most recent end of the order */
  at: number;
}

/**
 * Values by key, evicted least recently used once the bytes they hold pass `maxBytes`. A value
 * counts from when it has loaded (its loader says how many bytes it holds); concurrent lookups
 * of a key share one load, and a failed load is not kept. A value larger than the bound is
 * handed to its caller and not kept. Eviction only drops the cache's reference: a request still
 * using an evicted value keeps it alive until it finishes.
 *
 * Why not `lru-cache` (npm, isaacs; the maintained choice, `maxSize` + `sizeCalculation` +
 * `fetchMethod`), checked against v11 for issue 28 item 7: it fits the byte bound and the shared
 * load, but not three things the scorer relies on. (1) A load in flight is an entry of size 0 that
 * eviction may drop like any other (and abort; with `ignoreFetchAbort` it still lands): under
 * pressure a second caller of the same key then starts a second load of the same segment, where
 * here a loading entry is never evicted, so one segment is read once however full the cache is.
 * (2) Sizes must be positive integers and there are no hit / miss / eviction counters (only a
 * per-call `status` object), which `stats()` and the cache metrics read. (3) `keep` (put a value
 * back as most recent without counting a lookup) and `peek` of settled values only would be
 * wrappers over its internals. So this stays a Map in insertion order (the LRU order), ~100 lines,
 * tested in byte-lru.spec.ts and through the segment cache.
 */
export class ByteLru<V> {
  private readonly entries = new Map<string, Entry<V>>();
  private held = 0;
  /** Entries put at the most recent end so far (every insertion and promotion counts one): touch's clock. */
  private placed = 0;
  private readonly counters = { hits: 0, misses: 0, evictions: 0 };

  constructor(readonly maxBytes: number) {}

  get(key: string, load: () => Promise<{ value: V; bytes: number }>): Promise<V> {
    const hit = this.entries.get(key);
    if (hit) {
      this.counters.hits++;
      this.promote(key, hit);
      return hit.value;
    }
    this.counters.misses++;
    const entry: Entry<V> = { value: null as unknown as Promise<V>, bytes: 0, settled: false, at: this.placed++ };
    entry.value = load().then(
      ({ value, bytes }) => {
        if (this.entries.get(key) === entry) {
          entry.settled = true;
          entry.resolved = value;
          entry.bytes = bytes;
          this.held += bytes;
          this.evict();
        }
        return value;
      },
      (err: unknown) => {
        if (this.entries.get(key) === entry) this.entries.delete(key);
        throw err;
      },
    );
    this.entries.set(key, entry);
    return entry.value;
  }

  /** A synchronous get: the kept value, or `compute()` kept now. */
  getSync(key: string, compute: () => { value: V; bytes: number }): V {
    const hit = this.entries.get(key);
    if (hit?.settled) {
      this.counters.hits++;
      this.promote(key, hit);
      return hit.resolved as V;
    }
    this.counters.misses++;
    const { value, bytes } = compute();
    this.put(key, value, bytes);
    return value;
  }

  has(key: string): boolean {
    return this.entries.has(key);
  }

  /** `value` kept under `key` as the most recently used: refreshed when held, put back when evicted meanwhile (not counted as a lookup). */
  keep(key: string, value: V, bytes: number): void {
    const e = this.entries.get(key);
    if (e) this.promote(key, e);
    else this.put(key, value, bytes);
  }

  /**
   * The kept, loaded value of `key` (undefined: none), used now: like `keep` of the value held,
   * except that an entry with fewer than half the entries' count of placements after its own stays
   * where it is (it lies in the more recent half of the order, far from eviction).
   * Not counted as a lookup. For values touched by the thousand per request (a WARP query's hot
   * lists: 3,072 a query at 1,000,000 documents), where moving each to the end again cost two
   * map operations per value per request; the order is LRU to within half the entries.
   */
  touch(key: string): V | undefined {
    const e = this.entries.get(key);
    if (!e?.settled) return undefined;
    // entries placed after this one: at most this.placed - e.at - 1 (each placement adds one, deletes remove)
    if (this.placed - e.at - 1 >= this.entries.size >> 1) this.promote(key, e);
    return e.resolved;
  }

  /** Forgets `key` (a value that must not be reused, e.g. a table built while a segment was unreadable). */
  delete(key: string): void {
    this.drop(key);
  }

  /** The kept, loaded value of `key` (undefined: none), without counting a lookup or refreshing it. */
  peek(key: string): V | undefined {
    const e = this.entries.get(key);
    return e?.settled ? e.resolved : undefined;
  }

  keys(): string[] {
    return [...this.entries.keys()];
  }

  stats(): ByteLruStats {
    const { hits, misses, evictions } = this.counters;
    return { hits, misses, hitRatio: hits + misses === 0 ? 0 : hits / (hits + misses), bytes: this.held, maxBytes: this.maxBytes, entries: this.entries.size, evictions };
  }

  /** Most recently used last. */
  private promote(key: string, e: Entry<V>): void {
    this.entries.delete(key);
    e.at = this.placed++;
    this.entries.set(key, e);
  }

  /** A settled value kept under `key` (replacing any entry there), then the bound enforced. */
  private put(key: string, value: V, bytes: number): void {
    this.drop(key);
    this.entries.set(key, { value: Promise.resolve(value), bytes, settled: true, resolved: value, at: this.placed++ });
    this.held += bytes;
    this.evict();
  }

  private drop(key: string): void {
    const e = this.entries.get(key);
    if (!e) return;
    this.entries.delete(key);
    if (e.settled) this.held -= e.bytes;
  }

  private evict(): void {
    if (this.held <= this.maxBytes) return;
    for (const [key, e] of this.entries) {
      if (this.held <= this.maxBytes) break;
      if (!e.settled) continue; // loading: not counted yet
      this.drop(key);
      this.counters.evictions++;
    }
  }
}
