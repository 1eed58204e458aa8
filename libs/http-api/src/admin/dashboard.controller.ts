import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { Controller, Get, NotFoundException, Param, Res } from '@nestjs/common';
import type { Response } from 'express';
import { RequiresRole } from '../auth/api-keys.guard';

/** The dashboard's own files (HTML, JS, CSS), next to this library's sources. */
export const DASHBOARD_ASSETS = path.resolve(__dirname, '..', '..', 'assets', 'dashboard');

const TYPES: Record<string, string> = { '.html': 'text/html; charset=utf-8', '.js': 'text/javascript; charset=utf-8', '.css': 'text/css; charset=utf-8' };

/** Chart.js's browser build, served from node_modules by the API itself (no CDN: the dashboard works offline). */
function chartJsFile(): string {
  const main = createRequire(__filename).resolve('chart.js');
  return path.join(path.dirname(main), 'chart.umd.min.js');
}

/**
 * GET /dashboard: the operations page (assets/dashboard/index.html), which polls
 * /v1/admin/overview every 2 s. Behind adminAuth (app.ts): without the operator credential the
 * browser gets the login form and nothing of this page.
 */
// Operator auth is adminAuth's (in front of these paths); with AUTH=keys the API-key guard lets them through.
@RequiresRole('public')
@Controller('dashboard')
export class DashboardController {
  private readonly files = new Map<string, { body: Buffer; type: string }>();

  constructor() {
    for (const name of ['index.html', 'dashboard.js', 'dashboard.css']) {
      this.files.set(name, { body: readFileSync(path.join(DASHBOARD_ASSETS, name)), type: TYPES[path.extname(name)] });
    }
    const chart = chartJsFile();
    if (existsSync(chart)) this.files.set('chart.umd.min.js', { body: readFileSync(chart), type: TYPES['.js'] });
  }

  @Get()
  index(@Res() res: Response) {
    this.send(res, 'index.html');
  }

  @Get('assets/:name')
  asset(@Param('name') name: string, @Res() res: Response) {
    this.send(res, name);
  }

  private send(res: Response, name: string) {
    const f = this.files.get(name);
    if (!f) throw new NotFoundException(`no dashboard asset ${name.slice(0, 64)}`);
    res.setHeader('Content-Type', f.type);
    res.setHeader('Cache-Control', 'no-store');
    res.setHeader('X-Content-Type-Options', 'nosniff');
    res.setHeader('X-Frame-Options', 'DENY');
    res.setHeader('Content-Security-Policy', "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'");
    res.send(f.body);
  }
}
