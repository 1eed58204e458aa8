import { Controller, Get, Header, Inject } from '@nestjs/common';
import type { Config } from '@lateral/shared';
import { RequiresRole } from '../auth/api-keys.guard';
import { CONFIG } from '../common/tokens';

/**
 * GET /: where a person who opens the service's address in a browser lands: what this is and
 * where to go (the dashboard, the API reference, health, models). Public; it shows no data.
 */
@Controller()
export class LandingController {
  constructor(@Inject(CONFIG) private readonly config: Config) {}

  @Get()
  @RequiresRole('public')
  @Header('Content-Type', 'text/html; charset=utf-8')
  @Header('Cache-Control', 'no-store')
  landing(): string {
    const operator = this.config.ADMIN_TOKEN
      ? 'sign in with the operator token (ADMIN_TOKEN; <code>npm start</code> prints one when none is set)'
      : 'disabled: set ADMIN_TOKEN to enable it';
    return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1"><title>lateral</title><link rel="icon" href="data:,">
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:44rem;margin:3rem auto;padding:0 1rem;color:#1f2328}a{color:#0969da}code{background:#f6f8fa;padding:1px 4px;border-radius:4px}li{margin:.4rem 0}</style></head>
<body><h1>lateral</h1><p>Late-interaction retrieval and re-ranking: collections of documents kept as compressed token vectors in S3, token-level search, and re-ranking through job queues.</p>
<ul>
<li><a href="/dashboard">Dashboard</a>: queues, workers, ingestions and storage (${operator})</li>
<li><a href="/docs">API reference</a> (Swagger UI) and the <a href="/openapi.json">OpenAPI document</a></li>
<li><a href="/v1/models">Models</a> this service encodes with</li>
<li><a href="/v1/health">Health</a></li>
</ul></body></html>`;
  }
}
