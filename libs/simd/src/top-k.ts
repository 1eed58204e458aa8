/**
 * Bounded top-k selection on typed arrays: the k best (score, id) pairs, where better means a
 * higher score, then a lower id (so within one segment, ties go to the lower local document or
 * token row, which is the order of the global keys). A binary min-heap whose root is the worst
 * kept pair: a candidate below `floor` is rejected with one comparison, which is the common case
 * once the heap is full.
 *
 * The one heap of the project's selections: @lateral/search's (re-exported there as its TopK) and
 * jsWarpTop's, the JavaScript twin of the WebAssembly warpTop kernel (assembly/kernels.ts ports
 * these pushes and this drain: the same comparisons in the same order, so the same pairs in the
 * same order).
 */
export class TopK {
  readonly k: number;
  private readonly s: Float64Array;
  private readonly id: Uint32Array;
  size = 0;
  /** The worst kept score once full; -Infinity before (a candidate strictly below it cannot enter). */
  floor = -Infinity;

  /** capacity: an upper bound on the number of pushes, so a huge k over few candidates allocates little. */
  constructor(k: number, capacity = k) {
    if (!Number.isInteger(k) || k < 0) throw new RangeError(`TopK: k must be an integer >= 0, got ${k}`);
    this.k = Math.min(k, Math.max(0, capacity));
    this.s = new Float64Array(this.k);
    this.id = new Uint32Array(this.k);
  }

  push(score: number, id: number): void {
    const k = this.k;
    if (k === 0 || !(score === score)) return; // NaN never enters
    const s = this.s;
    const ids = this.id;
    if (this.size < k) {
      let p = this.size++;
      while (p > 0) {
        const parent = (p - 1) >> 1;
        // stop when the parent is worse than or equal to the new pair
        if (s[parent] < score || (s[parent] === score && ids[parent] > id)) break;
        s[p] = s[parent];
        ids[p] = ids[parent];
        p = parent;
      }
      s[p] = score;
      ids[p] = id;
      if (this.size === k) this.floor = s[0];
      return;
    }
    // full: enter only when better than the root (the worst kept)
    if (score < s[0] || (score === s[0] && id > ids[0])) return;
    this.siftDown(score, id, k);
    this.floor = s[0];
  }

  private siftDown(score: number, id: number, size: number): void {
    const s = this.s;
    const ids = this.id;
    let p = 0;
    for (;;) {
      const l = 2 * p + 1;
      if (l >= size) break;
      let c = l;
      const r = l + 1;
      // pick the worse child
      if (r < size && (s[r] < s[l] || (s[r] === s[l] && ids[r] > ids[l]))) c = r;
      if (score < s[c] || (score === s[c] && id > ids[c])) break;
      s[p] = s[c];
      ids[p] = ids[c];
      p = c;
    }
    s[p] = score;
    ids[p] = id;
  }

  /** The kept pairs, best first; empties the selector. */
  drain(): { scores: Float64Array; ids: Uint32Array } {
    const n = this.size;
    const scores = new Float64Array(n);
    const ids = new Uint32Array(n);
    const s = this.s;
    const hid = this.id;
    for (let size = n; size > 0; size--) {
      scores[size - 1] = s[0];
      ids[size - 1] = hid[0];
      const lastS = s[size - 1];
      const lastId = hid[size - 1];
      if (size > 1) this.siftDown(lastS, lastId, size - 1);
    }
    this.size = 0;
    this.floor = -Infinity;
    return { scores, ids };
  }
}
