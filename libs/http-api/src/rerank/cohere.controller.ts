import { Body, Controller, HttpCode, Inject, Post } from '@nestjs/common';
import { CohereService } from './cohere.service';
import { json } from '../common/json-body';

/**
 * Cohere-compatible re-ranking. Clients that take a base URL (the Cohere SDKs, LangChain's
 * CohereRerank, LlamaIndex's CohereRerank) use `http://<host>/v1/compat/cohere`: the SDKs post to
 * `<base>/v1/rerank` or `<base>/v2/rerank`, both served here, as is `<base>/rerank`.
 */
@Controller('v1/compat/cohere')
export class CohereController {
  constructor(@Inject(CohereService) private readonly svc: CohereService) {}

  @Post(['rerank', 'v1/rerank', 'v2/rerank'])
  @HttpCode(200)
  rerank(@Body() body: unknown) {
    return this.svc.rerankDocuments(json(body), this.svc.waitSeconds);
  }
}
