import { PREFIX_ROWS_MAX } from './prefix-section';
import { assemble, utf8, type DocVectorFormat, type SegmentReader } from './segment';

/**
 * Writes one segment from documents of existing segments without decoding or re-coding them: each
 * appended document's coded bytes (codes and norms), token ids, stored doc vector, id and metadata
 * are copied as they are. Every codec codes a document on its own, from its vectors, its id and the
 * segment's seed (DocCodec), so a copied document decodes, and scores, exactly as in its input.
 * The inputs must therefore agree on what makes the codes: the codec descriptor (artifact identity
 * and poolFactor included), the seed, the dims and the doc-vector format; `append` refuses
 * (RangeError) an input that differs from the first. Memory: the copied bytes of the documents
 * appended so far (an input can be released once appended), then the output at `finish`.
 */
export class SegmentCopier {
  private shape: { codec: string; seed: bigint; dims: number; dvFormat: DocVectorFormat } | null = null;
  private readonly ids: string[] = [];
  private readonly lengths: number[] = [];
  private readonly meta: (Record<string, unknown> | null)[] = [];
  private readonly parts: Record<'TIDS' | 'NORM' | 'CODE' | 'DVEC' | 'PFXC' | 'PFXN', Uint8Array[]> = { TIDS: [], NORM: [], CODE: [], DVEC: [], PFXC: [], PFXN: [] };
  private rows = 0;
  private finished = false;
  private readonly prefixRows: number;
  /** prefixRows when the inputs' codec codes rows on their own (set at the first append: every input has that codec), else 0. */
  private prefixWritten = 0;

  /**
   * `prefixRows` > 0: the output has a prefix section of that many rows per document (format v2)
   * when the inputs' codec codes rows on their own, made from each document's codes (the bytes
   * writeSegment would write, whether or not the input holds a section); 0 (default), or another
   * codec: none (format v1), whatever the inputs hold.
   */
  constructor(opts: { prefixRows?: number } = {}) {
    const rows = opts.prefixRows ?? 0;
    if (!Number.isInteger(rows) || rows < 0 || rows > PREFIX_ROWS_MAX) throw new RangeError(`prefixRows must be an integer in 0..${PREFIX_ROWS_MAX}, got ${rows}`);
    this.prefixRows = rows;
  }

  /** Documents appended so far. */
  get documents(): number {
    return this.ids.length;
  }

  /** Token rows appended so far. */
  get tokens(): number {
    return this.rows;
  }

  /** Bytes of the sections copied so far (codes, norms, token ids, doc vectors). */
  get copiedBytes(): number {
    return Object.values(this.parts).reduce((s, list) => s + list.reduce((t, x) => t + x.length, 0), 0);
  }

  /** Copies documents `docs` (indices into `reader`, in the order given) to the end of the output. */
  append(reader: SegmentReader, docs: ArrayLike<number>): void {
    if (this.finished) throw new Error('SegmentCopier: append after finish');
    const shape = { codec: JSON.stringify(reader.codec), seed: reader.seed, dims: reader.dims, dvFormat: reader.docVectorFormat };
    if (!this.shape) this.shape = shape;
    else {
      const s = this.shape;
      const differs = s.codec !== shape.codec ? `codec ${shape.codec} (first input: ${s.codec})` : s.seed !== shape.seed ? `seed ${shape.seed} (first input: ${s.seed})` : s.dims !== shape.dims ? `dims ${shape.dims} (first input: ${s.dims})` : s.dvFormat !== shape.dvFormat ? `docVectors ${shape.dvFormat} (first input: ${s.dvFormat})` : null;
      if (differs) throw new RangeError(`segment "${reader.name}" cannot be copied beside the others: ${differs}`);
    }
    const n = docs.length;
    let tokens = 0;
    let codeBytes = 0;
    let normBytes = 0;
    let dvBytes = 0;
    for (let k = 0; k < n; k++) {
      const i = docs[k];
      const e = reader.encodedDoc(i);
      tokens += reader.tokenOffsets[i + 1] - reader.tokenOffsets[i];
      codeBytes += e.codes.length;
      normBytes += e.norms.length;
      dvBytes += reader.docVectorBytes(i).length;
    }
    const tids = new Int32Array(tokens);
    const codes = new Uint8Array(codeBytes);
    const norms = new Uint8Array(normBytes);
    const dv = new Uint8Array(dvBytes);
    // The prefix rows: each document's first min(P, tokens_i) rows of codes and norms, the bytes its code sections hold (inputs with or without a section alike).
    const rb = this.prefixRows > 0 ? reader.rowBytes : null;
    const P = rb ? this.prefixRows : 0;
    let pfxRows = 0;
    if (P > 0) for (let k = 0; k < n; k++) pfxRows += Math.min(P, reader.tokenOffsets[docs[k] + 1] - reader.tokenOffsets[docs[k]]);
    const pfxCodes = new Uint8Array(rb ? pfxRows * rb.codes : 0);
    const pfxNorms = new Uint8Array(rb ? pfxRows * rb.norms : 0);
    let pAt = 0;
    let t = 0;
    let c = 0;
    let m = 0;
    let v = 0;
    for (let k = 0; k < n; k++) {
      const i = docs[k];
      const a = reader.tokenOffsets[i];
      const b = reader.tokenOffsets[i + 1];
      tids.set(reader.tokenIds.subarray(a, b), t);
      t += b - a;
      const e = reader.encodedDoc(i);
      codes.set(e.codes, c);
      c += e.codes.length;
      norms.set(e.norms, m);
      m += e.norms.length;
      const d = reader.docVectorBytes(i);
      dv.set(d, v);
      v += d.length;
      if (rb) {
        const r = Math.min(P, b - a);
        pfxCodes.set(e.codes.subarray(0, r * rb.codes), pAt * rb.codes);
        pfxNorms.set(e.norms.subarray(0, r * rb.norms), pAt * rb.norms);
        pAt += r;
      }
      this.ids.push(reader.docIds[i]);
      this.lengths.push(b - a);
      this.meta.push(reader.metadata(i));
    }
    this.parts.TIDS.push(new Uint8Array(tids.buffer));
    this.parts.CODE.push(codes);
    this.parts.NORM.push(norms);
    this.parts.DVEC.push(dv);
    this.parts.PFXC.push(pfxCodes);
    this.parts.PFXN.push(pfxNorms);
    this.prefixWritten = P;
    this.rows += tokens;
  }

  /** The segment's bytes (format v2 when a prefix section is written, else v1); the copier holds nothing afterwards. */
  finish(): Uint8Array {
    if (this.finished) throw new Error('SegmentCopier: finish called twice');
    if (!this.shape) throw new Error('SegmentCopier: nothing was appended');
    this.finished = true;
    const n = this.ids.length;
    const offsets = new Uint32Array(n + 1);
    for (let i = 0; i < n; i++) offsets[i + 1] = offsets[i] + this.lengths[i];
    const meta = this.meta.some((x) => x !== null) ? utf8.encode(JSON.stringify(this.meta)) : new Uint8Array(0);
    const { TIDS, NORM, CODE, DVEC, PFXC, PFXN } = this.parts;
    const out = assemble(
      { documents: n, tokens: this.rows, dims: this.shape.dims, seed: this.shape.seed, dvFormat: this.shape.dvFormat, descriptor: utf8.encode(this.shape.codec), prefixRows: this.prefixWritten },
      // The prefix section: every row's codes, then every row's norms.
      { DIDS: [utf8.encode(JSON.stringify(this.ids))], TOFF: [new Uint8Array(offsets.buffer)], TIDS, NORM, CODE, DVEC, META: [meta], PFXV: [...PFXC, ...PFXN] },
    );
    this.ids.length = 0;
    this.lengths.length = 0;
    this.meta.length = 0;
    for (const list of Object.values(this.parts)) list.length = 0;
    return out;
  }
}
