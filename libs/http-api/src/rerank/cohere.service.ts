import { GatewayTimeoutException, ServiceUnavailableException } from '@nestjs/common';
import { z } from 'zod';
import { MAX_CANDIDATES_PER_QUERY, MAX_CANDIDATE_TEXT_CHARS, MAX_QUERY_CHARS, ValidationError, modelId, type FieldIssue } from '@lateral/shared';
import { RerankService } from './rerank.service';
import { zodIssues } from '../common/zod-issues';

/** Cohere's rerank request (v1 and v2 share these fields; `rank_fields` / `max_chunks_per_doc` are accepted and ignored). */
export const CohereRerankSchema = z
  .object({
    model: modelId('model'),
    query: z.string({ error: 'query must be a string' }).trim().min(1, 'query must not be empty').max(MAX_QUERY_CHARS),
    documents: z
      .array(
        z.union([
          z.string().min(1, 'a document must not be empty').max(MAX_CANDIDATE_TEXT_CHARS),
          z.looseObject({ text: z.string().min(1, 'a document text must not be empty').max(MAX_CANDIDATE_TEXT_CHARS) }),
        ]),
      )
      .min(1, 'documents must not be empty')
      .max(MAX_CANDIDATES_PER_QUERY, `at most ${MAX_CANDIDATES_PER_QUERY} documents`),
    top_n: z.number().int().positive().optional(),
    return_documents: z.boolean().default(false),
    rank_fields: z.array(z.string()).optional(),
    max_chunks_per_doc: z.number().int().positive().optional(),
    max_tokens_per_doc: z.number().int().positive().optional(),
  })
  .strict();

export interface CohereRerankResponse {
  id: string;
  results: { index: number; relevance_score: number; document?: { text: string } }[];
  meta: { api_version: { version: string }; billed_units: { search_units: number }; model: string };
}

/** Cohere's own rerank model names (rerank-english-v3.0, rerank-multilingual-v3.0, rerank-v3.5, rerank-english-v2.0, ...). */
export const COHERE_MODEL_NAME = /^rerank-/;

/**
 * POST /v1/compat/cohere/rerank: Cohere's request and response shape over the re-rank job (the
 * documents are text candidates, encoded by the encoder pool), answered synchronously within
 * RERANK_MAX_WAIT_SECONDS (504 with the job id when it takes longer). relevance_score is the
 * scorer's raw score (MaxSim by default), not a probability in [0, 1].
 */
export class CohereService {
  constructor(
    private readonly rerank: RerankService,
    /** The bounded wait (RERANK_MAX_WAIT_SECONDS). */
    readonly waitSeconds: number,
    /** The local model for Cohere's model names (COHERE_MODEL, else DEFAULT_MODEL). */
    private readonly cohereModel: string,
  ) {}

  /** A local model directory is used as named; a Cohere model name maps to the configured local model. */
  localModel(requested: string): string {
    return COHERE_MODEL_NAME.test(requested) ? this.cohereModel : requested;
  }

  async rerankDocuments(body: unknown, waitSeconds: number): Promise<CohereRerankResponse> {
    const parsed = CohereRerankSchema.safeParse(body);
    if (!parsed.success) throw new ValidationError('invalid rerank request', zodIssues(parsed.error));
    const req = parsed.data;
    const texts = req.documents.map((d) => (typeof d === 'string' ? d : d.text));
    let out;
    try {
      out = await this.rerank.submit(
        {
          model: this.localModel(req.model),
          topK: Math.min(req.top_n ?? texts.length, texts.length),
          queries: [{ id: 'query', text: req.query, candidates: texts.map((text, i) => ({ id: String(i), text })) }],
        },
        waitSeconds,
      );
    } catch (err) {
      // Name Cohere's fields, not the re-rank request's.
      if (err instanceof ValidationError) throw new ValidationError(err.message, err.issues.map(cohereField));
      throw err;
    }
    const st = out.body;
    if (st.status === 'failed') throw new ServiceUnavailableException(`re-rank job ${st.id} failed: ${st.error ?? 'unknown error'}`);
    if (st.status !== 'completed' || !st.result) {
      throw new GatewayTimeoutException(`re-rank job ${st.id} did not finish within ${waitSeconds} s (RERANK_MAX_WAIT_SECONDS); its result will be at GET /v1/rerank/${st.id}`);
    }
    const hits = st.result.results[0]?.hits ?? [];
    return {
      id: st.id,
      results: hits.map((h) => {
        const index = Number(h.id);
        return { index, relevance_score: h.score ?? Number.NEGATIVE_INFINITY, ...(req.return_documents ? { document: { text: texts[index] } } : {}) };
      }),
      meta: { api_version: { version: '2' }, billed_units: { search_units: 1 }, model: this.localModel(req.model) },
    };
  }
}

function cohereField(i: FieldIssue): FieldIssue {
  const field = i.field.replace(/^queries\.0\.candidates\.(\d+)(\.text)?/, 'documents.$1').replace(/^queries\.0\.text/, 'query').replace(/^topK/, 'top_n');
  return { ...i, field };
}
