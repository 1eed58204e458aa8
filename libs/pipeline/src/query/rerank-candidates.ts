import type { Job } from 'bullmq';
import { PermanentJobError, ValidationError, textCodecRef, type Candidate, type Collection, type ScorerSpec, type TextCandidateStats } from '@lateral/shared';
import type { EncodedText, TokenEncoder } from '@lateral/model';
import type { ScorerResources } from '@lateral/kernels';
import { ShapeError } from '@lateral/scoring';
import { eventLoopYielder, groupIndicesByKey, scoreGroup, type CollectionView } from '@lateral/serving';
import { modelVersion, textHash, type CachedText, type TextCacheReader, type TextSpace } from './text-cache';

/*
 * The one candidate resolver of re-rank: a request's candidates (ids of the collection, texts, or
 * texts a batch chunk names by their hash) turned into rows of the view they are scored against.
 * rerank-ids.ts (ids only, the collection's view), rerank-texts.ts (texts, the job's text view)
 * and the sharded parent (shard-fanout.ts, distinct ids only) all resolve through here.
 */

/** A text candidate given by the sha256 of its text (a batch chunk hashes each text once, when it is planned): resolved as that text. */
export interface HashedTextCandidate {
  id?: string;
  textHash: string;
  score?: number;
}

/** What a re-rank query may list: the request's candidates, or texts named by their hash. */
export type ResolvableCandidate = Candidate | HashedTextCandidate;

/** The hash naming a candidate's text in the text cache; null for a candidate given by id. */
export function candidateTextHash(c: ResolvableCandidate): string | null {
  if (typeof c !== 'object') return null;
  if ('textHash' in c) return c.textHash;
  return 'text' in c ? textHash(c.text) : null;
}

/** Whether a candidate is a text (given as is, or by its hash). */
export const isTextLike = (c: ResolvableCandidate): boolean => typeof c === 'object' && ('text' in c || 'textHash' in c);

/** Whether any candidate of the queries is a text. */
export const anyTextCandidate = (queries: readonly { candidates: readonly ResolvableCandidate[] }[]): boolean => queries.some((q) => q.candidates.some(isTextLike));

/** The id a candidate's hits carry: its id, or `#<position>` for a text given without one. */
const idOf = (c: ResolvableCandidate, position: number): string => (typeof c === 'string' ? c : (c.id ?? `#${position}`));

/** A candidate's first-stage score (hybrid), NaN where it has none. */
const firstStageOf = (c: ResolvableCandidate): number => (typeof c === 'string' || c.score === undefined ? NaN : c.score);

/**
 * Each distinct candidate of a query (by the id its hits carry), in first-seen order: a candidate
 * listed twice counts once, at its first place.
 */
export function distinctCandidates<C extends ResolvableCandidate>(candidates: readonly C[]): { id: string; candidate: C; firstStage: number }[] {
  const seen = new Set<string>();
  const out: { id: string; candidate: C; firstStage: number }[] = [];
  candidates.forEach((candidate, position) => {
    const id = idOf(candidate, position);
    if (seen.has(id)) return;
    seen.add(id);
    out.push({ id, candidate, firstStage: firstStageOf(candidate) });
  });
  return out;
}

/** Every distinct candidate given by id (not a text), in first-seen order: what the collection's view must hold. */
export function candidateIds(queries: readonly { candidates: readonly ResolvableCandidate[] }[]): string[] {
  const ids = new Set<string>();
  for (const q of queries) for (const c of q.candidates) if (!isTextLike(c)) ids.add(typeof c === 'string' ? c : (c.id as string));
  return [...ids];
}

/** One query's candidates, resolved to rows of the view it is scored against. */
export interface ResolvedQuery {
  ids: string[];
  rows: number[];
  missing: string[];
  /** First-stage scores (hybrid), NaN where a candidate has none. */
  first: Float64Array;
  /** Queries with equal keys share one candidate list (scored in one pass). */
  key: string;
  /** The collection's view, or the job's text view when the query has text candidates. */
  view: CollectionView | null;
}

/** Resolves a query whose candidates are all ids against the collection's view (absent ids are missing). */
export function resolveIdCandidates(candidates: readonly ResolvableCandidate[], view: CollectionView | null): ResolvedQuery {
  const ids: string[] = [];
  const rows: number[] = [];
  const missing: string[] = [];
  const first: number[] = [];
  for (const { id, firstStage } of distinctCandidates(candidates)) {
    const row = view?.rowOf.get(id);
    if (row === undefined) missing.push(id);
    else {
      ids.push(id);
      rows.push(row);
      first.push(firstStage);
    }
  }
  return { ids, rows, missing, first: Float64Array.from(first), key: `c:${rows.join(',')}`, view };
}

export interface ResolveTextDeps {
  texts: Pick<TextCacheReader, 'read'>;
  modelsDir: string;
}

/**
 * Resolves every query's candidates before scoring. Queries with ids only are resolved against
 * the collection's view. Queries with text candidates are resolved against one view built for the
 * job: each distinct text once (decoded from the text cache, which the job's encode-texts child
 * filled), plus the id candidates those queries name (decoded from the collection), so the
 * scorers run unchanged on either.
 */
export async function resolveCandidates(
  deps: ResolveTextDeps,
  job: { tenantId: string; collection: Collection | null; encoder: TokenEncoder; model: string; view: CollectionView | null },
  queries: readonly { candidates: readonly ResolvableCandidate[] }[],
): Promise<{ resolved: ResolvedQuery[]; texts: TextCandidateStats | null }> {
  const { view } = job;
  const hasText = queries.map((q) => q.candidates.some(isTextLike));
  const resolved: ResolvedQuery[] = queries.map((q, qi) => (hasText[qi] ? (null as unknown as ResolvedQuery) : resolveIdCandidates(q.candidates, view)));
  if (!hasText.some(Boolean)) return { resolved, texts: null };

  // The job's text view: rows are distinct texts and distinct collection rows, in order of first use.
  const space: TextSpace = {
    tenantId: job.tenantId,
    model: job.model,
    modelVersion: await modelVersion(deps.modelsDir, job.model),
    maxTokens: job.collection?.maxDocTokens ?? job.encoder.manifest.maxDocTokens,
    codec: textCodecRef(job.collection),
  };
  const hashRow = new Map<string, number>();
  const collectionRow = new Map<number, number>();
  const sources: ({ hash: string } | { row: number })[] = [];
  let textCandidates = 0;
  // One pass over each query's candidates (a batch chunk holds tens of thousands): distinct by the
  // id its hits carry (distinctCandidates' rule: the first place counts), no object per candidate.
  // Queries given the same candidates array (the rows of a binary chunk file sharing a list) are
  // resolved once.
  type Plan = { ids: string[]; rows: number[]; missing: string[]; first: Float64Array; key: string; texts: number };
  const planOf = new Map<readonly ResolvableCandidate[], Plan>();
  const plans = queries.map((q, qi): (Plan & { qi: number }) | null => {
    if (!hasText[qi]) return null;
    const known = planOf.get(q.candidates);
    if (known) {
      textCandidates += known.texts;
      return { ...known, qi };
    }
    const before = textCandidates;
    const ids: string[] = [];
    const rows: number[] = [];
    const missing: string[] = [];
    const first: number[] = [];
    const seen = new Set<string>();
    const candidates = q.candidates;
    for (let position = 0; position < candidates.length; position++) {
      const candidate = candidates[position];
      const id = idOf(candidate, position);
      if (seen.has(id)) continue;
      seen.add(id);
      let row: number | undefined;
      const h = candidateTextHash(candidate);
      if (h !== null) {
        textCandidates++;
        row = hashRow.get(h);
        if (row === undefined) {
          row = sources.length;
          hashRow.set(h, row);
          sources.push({ hash: h });
        }
      } else {
        const r = view?.rowOf.get(id);
        if (r === undefined) {
          missing.push(id);
          continue;
        }
        row = collectionRow.get(r);
        if (row === undefined) {
          row = sources.length;
          collectionRow.set(r, row);
          sources.push({ row: r });
        }
      }
      ids.push(id);
      rows.push(row);
      first.push(firstStageOf(candidate));
    }
    const plan: Plan = { ids, rows, missing, first: Float64Array.from(first), key: `t:${rows.join(',')}`, texts: textCandidates - before };
    planOf.set(q.candidates, plan);
    return { ...plan, qi };
  });

  const hashes = [...hashRow.keys()];
  const cached = await deps.texts.read(space, hashes);
  const absent = hashes.filter((_, i) => !cached[i]);
  if (absent.length > 0) {
    throw new PermanentJobError(`${absent.length} candidate text(s) are not in the text cache (expired, or their encode-texts job did not run); submit the request again`);
  }
  const byHash = new Map(hashes.map((h, i) => [h, cached[i]!]));
  const textView = buildTextView(job.encoder.dims, view, sources, byHash, collectionRow);
  for (const p of plans) {
    if (!p) continue;
    resolved[p.qi] = { ids: p.ids, rows: p.rows, missing: p.missing, first: p.first, key: p.key, view: textView };
  }
  return { resolved, texts: { candidates: textCandidates, encoded: 0, reused: 0 } };
}

/**
 * Scores resolved queries with the request's scorer: queries sharing a candidate list (equal keys,
 * the common bulk case) in one pass over its tokens. Progress: the share of queries scored,
 * reported when it changes and always ending at 100. A scorer that cannot run on the request
 * (e.g. a model without token_weights) fails the job for good.
 */
export async function scoreResolved(
  scorers: ScorerResources,
  resolved: ResolvedQuery[],
  input: { encoder: TokenEncoder; queries: EncodedText[]; scorer: ScorerSpec; tenantId: string },
  job?: Pick<Job, 'updateProgress'>,
): Promise<Float32Array[]> {
  const scores: Float32Array[] = new Array(resolved.length);
  let done = 0;
  let reported = 0;
  const yieldEvery = eventLoopYielder();
  for (const members of groupIndicesByKey(resolved, (r) => r.key).values()) {
    const { rows, view } = resolved[members[0]];
    if (view && rows.length > 0) {
      const out = await scoreGroup(
        scorers,
        { view, encoder: input.encoder, queries: members.map((i) => input.queries[i]), rows, firstStage: members.map((i) => resolved[i].first), yieldEvery, tenantId: input.tenantId },
        input.scorer,
      ).catch((err) => {
        if (err instanceof ValidationError || err instanceof ShapeError) throw new PermanentJobError(err.message);
        throw err;
      });
      members.forEach((qi, k) => (scores[qi] = out[k]));
    } else for (const i of members) scores[i] = new Float32Array(0);
    done += members.length;
    const pct = Math.round((100 * done) / resolved.length);
    if (pct !== reported) await job?.updateProgress((reported = pct));
  }
  // Groups without candidates are counted too, so a finished job always reports 100.
  if (reported < 100) await job?.updateProgress(100);
  return scores;
}

/** A CollectionView over per-row token blocks (no concatenated copy): cached texts and collection rows. */
function buildTextView(
  dims: number,
  view: CollectionView | null,
  sources: ({ hash: string } | { row: number })[],
  byHash: Map<string, CachedText>,
  collectionRow: Map<number, number>,
): CollectionView {
  const n = sources.length;
  const blocks: Float32Array[] = new Array(n);
  const docVectors = new Float32Array(n * dims);
  const offsets = new Uint32Array(n + 1);
  const fromCollection = [...collectionRow.keys()];
  const decoded = view && fromCollection.length > 0 ? view.rowVectors(fromCollection) : null;
  const decodedAt = new Map(fromCollection.map((r, i) => [r, i]));
  sources.forEach((s, i) => {
    if ('hash' in s) {
      const e = byHash.get(s.hash)!;
      blocks[i] = e.vectors;
      docVectors.set(e.docVector, i * dims);
    } else {
      const k = decodedAt.get(s.row)!;
      blocks[i] = decoded!.docs.subarray(decoded!.offsets[k] * dims, decoded!.offsets[k + 1] * dims);
      docVectors.set(view!.docVectors.subarray(s.row * dims, (s.row + 1) * dims), i * dims);
    }
    offsets[i + 1] = offsets[i] + blocks[i].length / dims;
  });
  const rowVectors = (rows: number[]) => {
    const out = new Uint32Array(rows.length + 1);
    rows.forEach((r, i) => (out[i + 1] = out[i] + blocks[r].length / dims));
    const docs = new Float32Array(out[rows.length] * dims);
    rows.forEach((r, i) => docs.set(blocks[r], out[i] * dims));
    return { docs, offsets: out };
  };
  return {
    rowBlocks: (rows: number[]) => rows.map((r) => blocks[r]),
    generation: view?.generation ?? 0,
    dims,
    vectors: null,
    rotated: null,
    offsets,
    docVectors,
    rowOf: new Map(),
    docIds: [],
    tokens: offsets[n],
    rowVectors,
  };
}
