import { EdenCodec, Fp16Codec, Fp32Codec, type Codec } from '@lateral/codec';
import { kernels, type ExactRows, type Kernels } from '@lateral/simd';
import type { Collection, SegmentRef } from '@lateral/shared';
import { SegmentUnavailableError } from './search-plan';
import type { LoadedSegment, SegmentStore } from './segment-store';
import { decodeCodec, documentCodesByRanges } from './warp-reads';

/*
 * WARP's exact final stage scored from the candidates' codes: exact MaxSim / query tokens of a few
 * documents named by where they lie, each document's codes read alone (from the segment held in
 * memory, or by positioned reads of its local copy, one per document) and decoded and
 * scored in the resident WebAssembly module (Kernels.exactMaxsim): fp16 halves converted there,
 * EDEN token codes scored in the rotated domain against the query rotated once (no inverse
 * Hadamard per row), other codecs decoded by the codec and scored there. No fp32 copy of the
 * candidates is made in JavaScript and no ONNX Runtime call is made. Equal to decode + GEMM
 * MaxSim (documentRows + GemmMaxsim) within float32 rounding (exact-scores.spec.ts).
 */

/** One segment's candidates as the module scores them: one entry per document asked for, in order. */
interface SegmentCodes {
  dims: number;
  codec: Codec | null;
  seed: bigint;
  docs: ({ kind: 'codes'; codes: Uint8Array; norms: Uint8Array; tokens: number; docId: string } | { kind: 'rows'; rows: Float32Array })[];
}

/**
 * Exact MaxSim / query tokens of the documents at `where` ([segment, document] pairs), in that
 * order (NaN where the segment cannot be read; those segments in `failed` by key). null when the
 * WebAssembly module is not in use (the caller decodes rows and scores them with ONNX Runtime:
 * documentRows + GemmMaxsim, the same scores).
 */
export async function documentScores(
  store: SegmentStore,
  collection: Pick<Collection, 'tenantId' | 'id' | 'model'>,
  where: readonly (readonly [SegmentRef, number])[],
  query: { vectors: Float32Array; length: number },
  using: Kernels = kernels(),
): Promise<{ scores: Float32Array; failed: Map<string, SegmentUnavailableError> } | null> {
  if (!using.exactMaxsim) return null;
  const bySegment = new Map<string, { ref: SegmentRef; at: number[] }>();
  where.forEach(([ref], i) => (bySegment.get(ref.key) ?? bySegment.set(ref.key, { ref, at: [] }).get(ref.key)!).at.push(i));
  const failed = new Map<string, SegmentUnavailableError>();
  const scores = new Float32Array(where.length).fill(NaN);
  // The candidates' codes read from the local copies go to a scratch this call holds (its bytes are
  // only read below, before it returns), not to ~1.2 MB of new buffers a query (Vaswani's 32 fp16
  // documents): external memory that drove the search thread's full garbage collections.
  const scratch = ExactScratch.take();
  let done = false;
  try {
    const out = scoreCodes(using.exactMaxsim.bind(using), query, scores, failed, await Promise.all(
      [...bySegment.values()].map(async ({ ref, at }) => {
        try {
          return { at, codes: await segmentDocumentCodes(store, collection, ref, at.map((i) => where[i][1]), scratch.into) };
        } catch (err) {
          if (!(err instanceof SegmentUnavailableError)) throw err;
          failed.set(ref.key, err);
          return null;
        }
      }),
    ));
    done = true;
    return out;
  } finally {
    // After a failure another segment's read may still be going on: that scratch is not lent again.
    if (done) scratch.give();
  }
}

/**
 * A bump allocator over one buffer, lent to one documentScores call at a time (a call takes a
 * free one or makes one, and gives it back when it returns): the views it handed out are not
 * read after that. Growing starts a new buffer (views of the old one stay valid). At most
 * KEPT_SCRATCH are kept, each at most KEPT_SCRATCH_BYTES.
 */
class ExactScratch {
  private static readonly free: ExactScratch[] = [];
  private buf = new Uint8Array(1 << 16);
  private at = 0;

  static take(): ExactScratch {
    return ExactScratch.free.pop() ?? new ExactScratch();
  }

  readonly into = (bytes: number): Uint8Array => {
    if (this.at + bytes > this.buf.length) {
      this.buf = new Uint8Array(Math.max(2 * this.buf.length, bytes + 7) & ~7);
      this.at = 0;
    }
    const out = this.buf.subarray(this.at, this.at + bytes);
    this.at = (this.at + bytes + 7) & ~7;
    return out;
  };

  give(): void {
    this.at = 0;
    if (this.buf.byteLength <= KEPT_SCRATCH_BYTES && ExactScratch.free.length < KEPT_SCRATCH) ExactScratch.free.push(this);
  }
}

const KEPT_SCRATCH = 2;
const KEPT_SCRATCH_BYTES = 16 << 20;

/** documentScores' scoring of the segments' codes read (null: a segment that failed). */
function scoreCodes(
  exactMaxsim: NonNullable<Kernels['exactMaxsim']>,
  query: { vectors: Float32Array; length: number },
  scores: Float32Array,
  failed: Map<string, SegmentUnavailableError>,
  got: readonly ({ at: number[]; codes: SegmentCodes } | null)[],
): { scores: Float32Array; failed: Map<string, SegmentUnavailableError> } {
  const n = query.length;
  const rotated = new Map<string, { q: Float32Array; w: number; offsets: number; scaleOf: (norms: Uint8Array, tokens: number) => Float32Array; levels: Float32Array; bits: number }>();
  for (const g of got) {
    if (!g) continue;
    const { at, codes: seg } = g;
    const d = seg.dims;
    if (n > 0 && query.vectors.length !== n * d) throw new Error(`WARP exact stage: query rows of ${query.vectors.length / n} dimensions against documents of ${d}`);
    const out = new Float64Array(at.length);
    const codec = seg.codec;
    const eden = codec instanceof EdenCodec ? codec.rotatedRows(d) : null;
    if (codec instanceof EdenCodec && eden && n > 0 && seg.docs.every((x) => x.kind === 'codes')) {
      // EDEN token codes against the query rotated once per codec and seed: offsets_i + scale_r <R q_i, levels[C_r]>.
      const key = `${JSON.stringify(codec.descriptor)}#${seg.seed}`;
      let r = rotated.get(key);
      if (!r) {
        const rq = codec.rotateQuery(query.vectors, d, seg.seed);
        let offsets = 0;
        for (let i = 0; i < n; i++) offsets += rq.offsets[i];
        r = { q: Float32Array.from(rq.rotated), w: eden.p, offsets, scaleOf: eden.scales, levels: Float32Array.from(eden.levels), bits: codec.bits };
        rotated.set(key, r);
      }
      const rows: ExactRows[] = seg.docs.map((x) => {
        const c = x as Extract<SegmentCodes['docs'][number], { kind: 'codes' }>;
        return { kind: 'codes', rows: c.tokens, codes: c.codes, scales: r.scaleOf(c.norms, c.tokens) };
      });
      exactMaxsim(r.q, n, r.w, rows, out, { bits: r.bits, levels: r.levels });
      at.forEach((i, k) => (scores[i] = (out[k] + r.offsets) / n));
      continue;
    }
    const rows: ExactRows[] = seg.docs.map((x) => {
      if (x.kind === 'rows') return { kind: 'f32', rows: x.rows.length / d, values: x.rows };
      if (codec instanceof Fp16Codec) return { kind: 'f16', rows: x.tokens, bytes: x.codes };
      if (codec instanceof Fp32Codec) return { kind: 'f32', rows: x.tokens, values: new Float32Array(x.codes.buffer.slice(x.codes.byteOffset, x.codes.byteOffset + x.codes.byteLength)) };
      return { kind: 'f32', rows: x.tokens, values: codec!.decodeDoc({ codes: x.codes, norms: x.norms }, x.tokens, d, { docId: x.docId, seed: seg.seed }) };
    });
    exactMaxsim(query.vectors, n, d, rows, out);
    at.forEach((i, k) => (scores[i] = n > 0 ? out[k] / n : out[k]));
  }
  return { scores, failed };
}

/**
 * The codes of one segment's documents `docs` (indexes into it): from its reader when the memory
 * cache holds it (rows sliced from a kept whole decode, or the document's code bytes); else, with
 * range reads on, its head (cached) and positioned reads of each document's code bytes (and norm
 * bytes, which fp16 and fp32 have none of) from the local copy; else the segment loaded as
 * re-rank loads it. A codec with side information gets rows decoded by the segment's reader.
 */
export async function segmentDocumentCodes(store: SegmentStore, collection: Pick<Collection, 'tenantId' | 'id' | 'model'>, ref: SegmentRef, docs: readonly number[], into?: (bytes: number) => Uint8Array): Promise<SegmentCodes> {
  const fromReader = async (loaded: LoadedSegment): Promise<SegmentCodes> => {
    const r = loaded.reader;
    for (const d of docs) if (!(Number.isInteger(d) && d >= 0 && d < r.documents)) throw new RangeError(`document ${d} is outside segment ${ref.key} (${r.documents} documents)`);
    const whole = store.lru.peek(`dec:${ref.key}`) as Float32Array | undefined;
    const off = r.tokenOffsets;
    if (whole || r.codec.sideInfo) return { dims: r.dims, codec: null, seed: r.seed, docs: docs.map((d) => ({ kind: 'rows', rows: whole ? whole.subarray(off[d] * r.dims, off[d + 1] * r.dims) : r.decodeDoc(d) })) };
    const codec = await decodeCodec(store, collection, ref, r.codec);
    return { dims: r.dims, codec, seed: r.seed, docs: docs.map((d) => ({ kind: 'codes', ...r.encodedDoc(d), tokens: off[d + 1] - off[d], docId: r.docIds[d] })) };
  };
  const held = store.lru.peek(`seg:${ref.key}`) as LoadedSegment | undefined;
  if (held) return fromReader(held);
  const read = await documentCodesByRanges(store, collection, ref, docs, into);
  if (read) {
    const { head: h, codec, codes, norms } = read;
    const off = h.tokenOffsets;
    return { dims: h.dims, codec, seed: h.seed, docs: docs.map((d, k) => ({ kind: 'codes', codes: codes[k], norms: norms[k], tokens: off[d + 1] - off[d], docId: h.docIds[d] })) };
  }
  return fromReader(await store.segment(collection, ref));
}
