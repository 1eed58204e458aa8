import { CreateApiKeySchema, ROLES, TenantQuotaUpdateSchema, resourceId, type ApiKeyInfo, type TenantQuotaRecord } from '@lateral/shared';
import type { ApiKeyRepository, TenantQuotaRepository } from '@lateral/infra';
import { CliUsageError, parseCli } from './cli';

export const KEYS_USAGE = `usage: npm run keys -- <command> [options]
  create --tenant <t> --role <${ROLES.join('|')}> [--name <text>] [--rate <per second> --burst <n>]
                      prints the new key once (lat_<id>_<secret>): store it, it cannot be shown again
  list [--tenant <t>]  every key (id, tenant, role, created, rotated, revoked), no secrets
  show <id>            one key
  rotate <id>          a new secret for the key (same id, tenant, role); the old secret stops working
  revoke <id>          the key stops working (the record stays, marked revoked)
  quota <tenant> [--documents <n>] [--bytes <n>] [--jobs <n>]
                      shows the tenant's quota overrides; with options, replaces them (0 = unlimited;
                      a quota not given = the configured TENANT_MAX_DOCUMENTS / _BYTES / _CONCURRENT_JOBS)
  --json               one JSON object per answer instead of text
Keys live in S3 (S3_ENDPOINT, S3_BUCKET; without S3_ENDPOINT the embedded S3 folder DATA_DIR/s3).
A running API trusts what it read for API_KEY_CACHE_SECONDS: a key revoked or rotated here stops
working there within that delay.`;

export { CliUsageError };

/** The options of every command (a command ignores those it does not take; an unknown one is refused). */
const OPTIONS = {
  tenant: { type: 'string' },
  role: { type: 'string' },
  name: { type: 'string' },
  rate: { type: 'string' },
  burst: { type: 'string' },
  documents: { type: 'string' },
  bytes: { type: 'string' },
  jobs: { type: 'string' },
  json: { type: 'boolean' },
} as const;

function describe(k: ApiKeyInfo): string {
  const parts = [`${k.id}  tenant ${k.tenantId}  role ${k.role}  created ${k.createdAt}`];
  if (k.name) parts.push(`name ${JSON.stringify(k.name)}`);
  if (k.rateLimit) parts.push(`rate ${k.rateLimit.perSecond}/s burst ${k.rateLimit.burst}`);
  if (k.rotatedAt) parts.push(`rotated ${k.rotatedAt}`);
  parts.push(k.revokedAt ? `REVOKED ${k.revokedAt}` : 'active');
  return parts.join('  ');
}

/**
 * The `npm run keys` commands over a key repository; `print` receives each output line.
 * Throws CliUsageError for a bad command line (the caller prints the usage and exits 2).
 */
export async function runKeysCli(argv: string[], repo: ApiKeyRepository, print: (line: string) => void, quotas?: TenantQuotaRepository): Promise<void> {
  const { values, positionals } = parseCli(argv, OPTIONS, { positionals: true });
  const json = values.json === true;
  const [command, id] = positionals;
  const str = (name: Exclude<keyof typeof OPTIONS, 'json'>) => values[name];
  const needId = () => {
    if (!id) throw new CliUsageError(`${command} needs a key id (the <id> of lat_<id>_<secret>; see \`list\`)`);
    return id;
  };
  const secretOnce = (key: string, info: ApiKeyInfo, what: string) => {
    if (json) return print(JSON.stringify({ ...info, key }));
    print(`${what} ${describe(info)}`);
    print(key);
    print('this is the only time the key is shown: store it now');
  };
  switch (command) {
    case 'create': {
      const rate = str('rate');
      const burst = str('burst');
      if ((rate === undefined) !== (burst === undefined)) throw new CliUsageError('--rate and --burst go together');
      const parsed = CreateApiKeySchema.safeParse({
        tenant: str('tenant'),
        role: str('role'),
        ...(str('name') !== undefined ? { name: str('name') } : {}),
        ...(rate !== undefined ? { rateLimit: { perSecond: Number(rate), burst: Number(burst) } } : {}),
      });
      if (!parsed.success) throw new CliUsageError(parsed.error.issues.map((i) => `--${String(i.path[0] ?? '?')}: ${i.message}`).join('; '));
      const { key, info } = await repo.create(parsed.data);
      return secretOnce(key, info, 'created');
    }
    case 'list': {
      const keys = await repo.list(str('tenant'));
      if (json) return print(JSON.stringify({ keys }));
      if (keys.length === 0) print('no API keys');
      for (const k of keys) print(describe(k));
      return;
    }
    case 'show': {
      const info = await repo.get(needId());
      if (!info) throw new Error(`no API key '${id}'`);
      return print(json ? JSON.stringify(info) : describe(info));
    }
    case 'rotate': {
      if (!(await repo.get(needId()))) throw new Error(`no API key '${id}'`);
      const { key, info } = await repo.rotate(id!);
      return secretOnce(key, info, 'rotated');
    }
    case 'revoke': {
      if (!(await repo.get(needId()))) throw new Error(`no API key '${id}'`);
      const info = await repo.revoke(id!);
      return print(json ? JSON.stringify(info) : `revoked ${describe(info)}`);
    }
    case 'quota': {
      if (!quotas) throw new Error('quota: no quota repository');
      const tenant = resourceId('tenant').safeParse(id);
      if (!tenant.success) throw new CliUsageError(`quota needs a tenant id: ${tenant.error.issues[0]?.message}`);
      const given = { maxDocuments: str('documents'), maxBytes: str('bytes'), maxConcurrentJobs: str('jobs') };
      const show = (r: TenantQuotaRecord | null) => {
        if (json) return print(JSON.stringify(r ?? { tenantId: tenant.data }));
        const parts = (['maxDocuments', 'maxBytes', 'maxConcurrentJobs'] as const).map((k) => `${k} ${r?.[k] ?? 'default'}`);
        print(`tenant ${tenant.data}  ${parts.join('  ')}${r ? `  updated ${r.updatedAt}` : ''}`);
      };
      if (Object.values(given).every((v) => v === undefined)) return show(await quotas.get(tenant.data));
      const parsed = TenantQuotaUpdateSchema.safeParse(Object.fromEntries(Object.entries(given).filter(([, v]) => v !== undefined).map(([k, v]) => [k, Number(v)])));
      if (!parsed.success) throw new CliUsageError(parsed.error.issues.map((i) => `${i.message} (--documents, --bytes, --jobs: whole numbers >= 0)`).join('; '));
      return show(await quotas.put(tenant.data, parsed.data));
    }
    default:
      throw new CliUsageError(command ? `unknown command '${command}'` : 'a command is required');
  }
}
