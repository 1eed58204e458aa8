import type { SegmentIndex } from '@lateral/search';

/**
 * The search index of a merged segment from its inputs' indexes, without decoding a vector: a
 * merge copies each kept document's coded rows (SegmentCopier), so every row decodes as before and
 * its nearest centroid (same collection centroids) is the one its input's IVF lists it under;
 * BM25 postings are per document and only renumbered. The result is what buildSegmentIndex gives
 * on the merged segment with those assignments and the same skipped terms: IVF lists ascending,
 * terms sorted, postings by document. Inputs must share the centroids (count, dims, CRC); `append`
 * refuses (RangeError) one that does not. Pure: no I/O.
 */
export class SegmentIndexCopier {
  private shape: { dims: number; centroidCount: number; centroidsCrc: number } | null = null;
  private readonly assignments: Uint32Array[] = [];
  private readonly docLengths: Uint32Array[] = [];
  private readonly postings: { terms: Int32Array; docs: Uint32Array; tfs: Uint32Array }[] = [];
  private docs = 0;
  private rows = 0;

  /** Documents appended so far. */
  get documents(): number {
    return this.docs;
  }

  /**
   * Appends the kept documents `keep` (ascending indices into the input) of an input segment whose
   * token rows are cut by `tokenOffsets` (documents + 1), with `index` the input's index.
   */
  append(index: SegmentIndex, tokenOffsets: Uint32Array, keep: ArrayLike<number>): void {
    const shape = { dims: index.dims, centroidCount: index.centroidCount, centroidsCrc: index.centroidsCrc };
    if (!this.shape) this.shape = shape;
    else if (this.shape.dims !== shape.dims || this.shape.centroidCount !== shape.centroidCount || this.shape.centroidsCrc !== shape.centroidsCrc) {
      throw new RangeError(`index built with other centroids (K ${shape.centroidCount}, d ${shape.dims}, CRC ${shape.centroidsCrc}) than the first input's (K ${this.shape.centroidCount}, d ${this.shape.dims}, CRC ${this.shape.centroidsCrc})`);
    }
    if (tokenOffsets.length !== index.documents + 1 || tokenOffsets[index.documents] !== index.tokens) {
      throw new RangeError(`tokenOffsets (${tokenOffsets.length} entries, ${tokenOffsets[tokenOffsets.length - 1]} rows) do not match the index (${index.documents} documents, ${index.tokens} rows)`);
    }
    // IVF: the centroid of every input row, then those of the kept documents' rows in order.
    const K = index.centroidCount;
    const centroidOf = new Uint32Array(index.tokens);
    const { listOffsets, rows } = index.ivf;
    for (let c = 0; c < K; c++) for (let p = listOffsets[c]; p < listOffsets[c + 1]; p++) centroidOf[rows[p]] = c;
    let keptRows = 0;
    const newDoc = new Int32Array(index.documents).fill(-1);
    for (let k = 0; k < keep.length; k++) {
      const i = keep[k];
      if (k > 0 && i <= keep[k - 1]) throw new RangeError(`kept documents must be ascending (${keep[k - 1]} then ${i})`);
      keptRows += tokenOffsets[i + 1] - tokenOffsets[i];
      newDoc[i] = this.docs + k;
    }
    const assignments = new Uint32Array(keptRows);
    const lengths = new Uint32Array(keep.length);
    let o = 0;
    for (let k = 0; k < keep.length; k++) {
      const i = keep[k];
      assignments.set(centroidOf.subarray(tokenOffsets[i], tokenOffsets[i + 1]), o);
      o += tokenOffsets[i + 1] - tokenOffsets[i];
      lengths[k] = index.bm25.docLengths[i];
    }
    // BM25: the postings of kept documents, renumbered (term-major, documents ascending).
    const b = index.bm25;
    let P = 0;
    for (let p = 0; p < b.postingDocs.length; p++) if (newDoc[b.postingDocs[p]] >= 0) P++;
    const terms = new Int32Array(P);
    const docs = new Uint32Array(P);
    const tfs = new Uint32Array(P);
    let q = 0;
    for (let u = 0; u < b.terms.length; u++) {
      for (let p = b.postingOffsets[u]; p < b.postingOffsets[u + 1]; p++) {
        const j = newDoc[b.postingDocs[p]];
        if (j < 0) continue;
        terms[q] = b.terms[u];
        docs[q] = j;
        tfs[q++] = b.postingTfs[p];
      }
    }
    this.assignments.push(assignments);
    this.docLengths.push(lengths);
    this.postings.push({ terms, docs, tfs });
    this.docs += keep.length;
    this.rows += keptRows;
  }

  /** The merged segment's index (documents and rows as appended). */
  finish(): SegmentIndex {
    if (!this.shape) throw new Error('SegmentIndexCopier: nothing was appended');
    const K = this.shape.centroidCount;
    const assignments = concatU32(this.assignments, this.rows);
    const listOffsets = new Uint32Array(K + 1);
    for (let r = 0; r < assignments.length; r++) listOffsets[assignments[r] + 1]++;
    for (let c = 0; c < K; c++) listOffsets[c + 1] += listOffsets[c];
    const cursor = listOffsets.slice(0, K);
    const rows = new Uint32Array(assignments.length);
    for (let r = 0; r < assignments.length; r++) rows[cursor[assignments[r]]++] = r;

    // Distinct terms, sorted; postings grouped by term keep their order (inputs in order, documents ascending).
    const all = this.postings;
    const P = all.reduce((s, x) => s + x.terms.length, 0);
    const seen = new Set<number>();
    for (const x of all) for (let p = 0; p < x.terms.length; p++) seen.add(x.terms[p]);
    const terms = Int32Array.from(seen).sort();
    const slot = new Map<number, number>();
    terms.forEach((t, u) => slot.set(t, u));
    const postingOffsets = new Uint32Array(terms.length + 1);
    for (const x of all) for (let p = 0; p < x.terms.length; p++) postingOffsets[slot.get(x.terms[p])! + 1]++;
    for (let u = 0; u < terms.length; u++) postingOffsets[u + 1] += postingOffsets[u];
    const at = postingOffsets.slice(0, terms.length);
    const postingDocs = new Uint32Array(P);
    const postingTfs = new Uint32Array(P);
    for (const x of all) {
      for (let p = 0; p < x.terms.length; p++) {
        const w = at[slot.get(x.terms[p])!]++;
        postingDocs[w] = x.docs[p];
        postingTfs[w] = x.tfs[p];
      }
    }
    const docLengths = concatU32(this.docLengths, this.docs);
    let totalLength = 0;
    for (let i = 0; i < docLengths.length; i++) totalLength += docLengths[i];
    return {
      documents: this.docs,
      tokens: this.rows,
      dims: this.shape.dims,
      centroidCount: K,
      centroidsCrc: this.shape.centroidsCrc,
      ivf: { listOffsets, rows },
      bm25: { terms, postingOffsets, postingDocs, postingTfs, docLengths, totalLength },
    };
  }
}

function concatU32(parts: Uint32Array[], n: number): Uint32Array {
  const out = new Uint32Array(n);
  let o = 0;
  for (const x of parts) {
    out.set(x, o);
    o += x.length;
  }
  return out;
}
