/**
 * The deployment files agree with the configuration schema: docker-compose.yml (and the CPU
 * override), the Kubernetes ConfigMap and Deployments set only environment variables that
 * ConfigSchema knows, the values each process gets parse, and the few infrastructure settings
 * the service depends on (GPU reservation, Redis noeviction + AOF, KEDA list names) are there.
 */
import { HANDLED_QUEUES } from '@lateral/workers';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';
import { CONFIG_KEYS, ConfigSchema, scorerShards, shardQueueName } from '@lateral/shared';
import { openApiDocument } from '@lateral/http-api';

const ROOT = resolve(__dirname, '..');
const read = (p: string) => readFileSync(join(ROOT, p), 'utf8');
const KNOWN = new Set<string>(CONFIG_KEYS);

type Env = Record<string, string>;
type Service = {
  image?: string;
  build?: unknown;
  command?: string | string[];
  entrypoint?: string | string[];
  environment?: Record<string, unknown> | string[];
  volumes?: (string | { source?: string; target?: string })[];
  depends_on?: Record<string, { condition?: string }> | string[];
  healthcheck?: { test?: unknown };
  deploy?: {
    resources?: {
      reservations?: { devices?: { driver?: string; count?: number | string; device_ids?: string[]; capabilities?: string[] }[] };
    };
  };
};

/**
 * Compose interpolation as `docker compose` does it with an empty shell environment:
 * `${VAR:-default}` and `${VAR-default}` give the default, `${VAR}` and `$VAR` give '',
 * `$$` is a literal `$`. `${VAR:?err}` (required) is reported.
 */
function interpolate(value: string, where: string): string {
  const out = value.replace(/\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?+])([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)/g, (m, name, op, arg) => {
    if (m === '$$') return '$';
    if (op === ':-' || op === '-') return arg ?? '';
    if (op === ':?' || op === '?') throw new Error(`${where}: ${m} requires ${name} to be set in the shell`);
    return '';
  });
  return out;
}

/** A service's environment as strings, interpolated; list form (`- K=V`) or mapping form. */
function serviceEnv(svc: Service, where: string): Env {
  const env: Env = {};
  const raw = svc.environment ?? {};
  const entries: [string, unknown][] = Array.isArray(raw)
    ? raw.map((line) => {
        const i = line.indexOf('=');
        return i < 0 ? [line, ''] : [line.slice(0, i), line.slice(i + 1)];
      })
    : Object.entries(raw);
  for (const [k, v] of entries) env[k] = interpolate(v === null || v === undefined ? '' : String(v), `${where}.${k}`);
  return env;
}

/** The same reading of the environment as loadConfig(): known keys only, '' means unset. */
function parseConfig(env: Env) {
  const known = Object.fromEntries(CONFIG_KEYS.map((k) => [k, env[k] === '' ? undefined : env[k]]));
  return ConfigSchema.safeParse(known);
}

function expectValidConfig(env: Env, where: string) {
  const unknown = Object.keys(env).filter((k) => !KNOWN.has(k));
  expect(unknown, `${where} sets variables ConfigSchema does not know`).toEqual([]);
  const parsed = parseConfig(env);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ');
    expect.fail(`${where}: configuration does not parse: ${issues}`);
  }
  return parsed.data;
}

const commandOf = (svc: Service) => (Array.isArray(svc.command) ? svc.command.join(' ') : (svc.command ?? ''));

// ---------------------------------------------------------------------------------------------
// docker-compose.yml

const compose = parse(read('docker-compose.yml'), { merge: true }) as { services: Record<string, Service>; volumes?: Record<string, unknown> };
const services = compose.services;
const LATERAL_APPS: Record<string, string> = { api: 'api', 'encoder-worker': 'encoder-worker', 'scorer-worker': 'scorer-worker', 'scorer-shard-0': 'scorer-worker', 'scorer-shard-1': 'scorer-worker' };
const lateralServices = Object.keys(services).filter((name) => /apps\/[\w-]+\/src\/main\.ts/.test(commandOf(services[name]!)));

describe('docker-compose.yml', () => {
  it('has redis, minio, minio-init, api, encoder-worker, scorer-worker and the sharded scorer pool', () => {
    for (const name of ['redis', 'minio', 'minio-init', 'api', 'encoder-worker', 'scorer-worker', 'scorer-shard-0', 'scorer-shard-1']) {
      expect(services[name], `service ${name}`).toBeDefined();
    }
    expect(lateralServices.sort()).toEqual(Object.keys(LATERAL_APPS).sort());
  });

  it.each(Object.entries(LATERAL_APPS))('%s starts apps/%s through tsx', (name, app) => {
    const svc = services[name]!;
    expect(commandOf(svc)).toBe(`npx tsx apps/${app}/src/main.ts`);
    expect(existsSync(join(ROOT, 'apps', app)), `apps/${app} exists`).toBe(true);
    expect(svc.build ?? svc.image, `${name} has an image or a build`).toBeTruthy();
  });

  it.each(Object.keys(LATERAL_APPS))('%s sets only ConfigSchema variables, and they parse', (name) => {
    expectValidConfig(serviceEnv(services[name]!, name), `docker-compose.yml services.${name}.environment`);
  });

  it('gives each process the right role', () => {
    const cfg = (name: string) => expectValidConfig(serviceEnv(services[name]!, name), name);
    const api = cfg('api');
    expect(api.HOST).toBe('0.0.0.0');
    expect(api.WORKER_QUEUES).toEqual([]);
    const enc = cfg('encoder-worker');
    expect(enc.WORKER_QUEUES).toEqual(['encode', 'compress', 'encode-texts']);
    expect(enc.ORT_EXECUTION_PROVIDER).toBe('cuda');
    const sc = cfg('scorer-worker');
    expect(sc.WORKER_QUEUES).toEqual(['index', 'commit', 'merge', 'refit', 'rerank', 'search', 'batch', 'train', 'webhook']);
    expect(sc.ORT_EXECUTION_PROVIDER).toBe('cpu');
    // The sharded pool: the main scorer holds no shard, each shard service holds its own.
    expect(sc.SCORER_SHARDS).toBe('none');
    for (const i of [0, 1]) {
      const sh = cfg(`scorer-shard-${i}`);
      expect(sh.SCORER_SHARDS).toBe(String(i));
      expect(scorerShards(sh.SCORER_SHARDS, sh.COLLECTION_MAX_SHARDS, sh.SCORER_SHARD_FROM_HOSTNAME)).toEqual([i]);
      expect(sh.WORKER_QUEUES).toEqual(['search']); // a scorer serves shard queues when it works on rerank or search
    }
    // Every shard a collection may have (COLLECTION_MAX_SHARDS) has a service holding it.
    expect(sc.COLLECTION_MAX_SHARDS).toBe(2);
    // Every queue this build has a processor for is worked by some pool, and no pool asks for a
    // queue without one (WorkerHost would refuse to start).
    expect([...enc.WORKER_QUEUES, ...sc.WORKER_QUEUES].sort()).toEqual([...HANDLED_QUEUES].sort());
  });

  it('points every lateral process at the compose redis and minio, with minio\'s credentials and bucket', () => {
    const minio = serviceEnv(services.minio!, 'minio');
    const init = serviceEnv(services['minio-init']!, 'minio-init');
    for (const name of lateralServices) {
      const c = expectValidConfig(serviceEnv(services[name]!, name), name);
      expect(new URL(c.REDIS_URL!).hostname, `${name} REDIS_URL`).toBe('redis');
      expect(new URL(c.S3_ENDPOINT!).hostname, `${name} S3_ENDPOINT`).toBe('minio');
      expect(c.S3_FORCE_PATH_STYLE, `${name} S3_FORCE_PATH_STYLE`).toBe(true);
      expect(c.S3_ACCESS_KEY_ID).toBe(minio.MINIO_ROOT_USER);
      expect(c.S3_SECRET_ACCESS_KEY).toBe(minio.MINIO_ROOT_PASSWORD);
      expect(c.S3_BUCKET).toBe(init.BUCKET);
      expect(c.MODELS_DIR).toBe('/app/.cache/models');
      const deps = services[name]!.depends_on as Record<string, { condition?: string }>;
      expect(deps.redis?.condition).toBe('service_healthy');
      expect(deps['minio-init']?.condition).toBe('service_completed_successfully');
    }
    // MinIO rejects root passwords shorter than 8 characters.
    expect(minio.MINIO_ROOT_PASSWORD!.length).toBeGreaterThanOrEqual(8);
  });

  it('reserves an NVIDIA GPU for encoder-worker', () => {
    const devices = services['encoder-worker']!.deploy?.resources?.reservations?.devices ?? [];
    const gpu = devices.find((d) => d.driver === 'nvidia' && (d.capabilities ?? []).includes('gpu'));
    expect(gpu, 'deploy.resources.reservations.devices with driver nvidia, capabilities [gpu]').toBeDefined();
    expect(gpu!.count === 'all' || (typeof gpu!.count === 'number' && gpu!.count >= 1) || (gpu!.device_ids ?? []).length > 0).toBe(true);
    const build = services['encoder-worker']!.build as { dockerfile?: string };
    expect(build.dockerfile).toBe('infra/Dockerfile.cuda');
  });

  it('runs redis 7 with noeviction and AOF, from the mounted infra/redis.conf, with a volume and a healthcheck', () => {
    const redis = services.redis!;
    expect(redis.image).toMatch(/^redis:7/);
    const cmd = Array.isArray(redis.command) ? redis.command : String(redis.command ?? '').split(/\s+/);
    const arg = (flag: string) => cmd[cmd.indexOf(flag) + 1];
    expect(arg('--maxmemory-policy')).toBe('noeviction');
    expect(arg('--appendonly')).toBe('yes');

    const conf = read('infra/redis.conf')
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l && !l.startsWith('#'))
      .map((l) => l.split(/\s+/));
    const setting = (k: string) => conf.filter(([key]) => key === k).at(-1)?.[1];
    expect(setting('maxmemory-policy')).toBe('noeviction');
    expect(setting('appendonly')).toBe('yes');

    const confPath = cmd[1];
    const volumes = (redis.volumes ?? []).map((v) => (typeof v === 'string' ? v : `${v.source}:${v.target}`));
    expect(volumes.some((v) => v.startsWith('./infra/redis.conf:') && v.split(':')[1] === confPath), 'redis.conf mounted where redis-server reads it').toBe(true);
    expect(volumes.some((v) => v.split(':')[1] === '/data' && !v.startsWith('.')), 'named volume on /data').toBe(true);
    expect(redis.healthcheck?.test).toBeDefined();
  });

  it('creates the bucket with a one-shot mc container', () => {
    const init = services['minio-init']!;
    expect(init.image).toMatch(/^minio\/mc/);
    expect((init.depends_on as Record<string, { condition?: string }>).minio?.condition).toBe('service_healthy');
    const script = [init.entrypoint, init.command].flat().join(' ');
    expect(script).toMatch(/mc mb --ignore-existing/);
    expect(services.minio!.healthcheck?.test).toBeDefined();
  });

  it('infra/compose.cpu.yml only overrides with known variables, and the merged encoder config parses', () => {
    const override = parse(read('infra/compose.cpu.yml'), { merge: true, customTags: [{ tag: '!reset', resolve: () => null }] }) as {
      services: Record<string, Service>;
    };
    for (const [name, svc] of Object.entries(override.services)) {
      const merged = { ...serviceEnv(services[name]!, name), ...serviceEnv(svc, `override ${name}`) };
      const c = expectValidConfig(merged, `infra/compose.cpu.yml services.${name}`);
      expect(c.ORT_EXECUTION_PROVIDER).toBe('cpu');
    }
  });
});

// ---------------------------------------------------------------------------------------------
// Dockerfiles (text checks; there is no Docker engine to build them here)

describe('images', () => {
  it('CPU image: node:20-bookworm-slim, npm install honouring .npmrc (skip), models built at build time', () => {
    const df = read('infra/Dockerfile');
    expect(df).toMatch(/node:20-bookworm-slim/);
    expect(df).toMatch(/npm install --include=dev/);
    expect(df).not.toMatch(/ONNXRUNTIME_NODE_INSTALL|onnxruntime-node-install=(true|cuda)/);
    expect(df).toMatch(/\.npmrc/);
    expect(df).toMatch(/tsx scripts\/build-model\.ts --all/);
    expect(read('.npmrc')).toMatch(/^onnxruntime-node-install=skip$/m);
  });

  it('GPU image: CUDA runtime with cuDNN, Node copied from node:20, opts in to the CUDA binaries', () => {
    const df = read('infra/Dockerfile.cuda');
    expect(df).toMatch(/nvidia\/cuda:[\w.]+-cudnn-runtime/);
    expect(df).toMatch(/COPY --from=node \/usr\/local\/bin\/node/);
    expect(df).toMatch(/ONNXRUNTIME_NODE_INSTALL=true npm install/);
    expect(df).toMatch(/libonnxruntime_providers_cuda\.so/);
    expect(df).toMatch(/tsx scripts\/build-model\.ts --all/);
  });

  it('both images set the allocator pair the 1,000,000-document bench measured within the scorer\'s memory target', () => {
    for (const f of ['infra/Dockerfile', 'infra/Dockerfile.cuda']) expect(read(f), f).toMatch(/^ENV MALLOC_ARENA_MAX=2 \\\n\s+MALLOC_MMAP_THRESHOLD_=1048576$/m);
  });

  it('.dockerignore keeps node_modules, caches and .git out of the build context', () => {
    const lines = read('.dockerignore').split('\n').map((l) => l.trim());
    for (const p of ['**/node_modules', '.cache', '.data', '.git']) expect(lines).toContain(p);
  });
});

// ---------------------------------------------------------------------------------------------
// infra/k8s

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- free-form manifest trees, checked field by field below
type Manifest = any;
type K8sDoc = { apiVersion: string; kind: string; metadata: { name: string; namespace?: string }; data?: Record<string, unknown>; spec?: Manifest };
const K8S_DIR = join(ROOT, 'infra/k8s');
const k8sDocs: K8sDoc[] = readdirSync(K8S_DIR)
  .filter((f) => /\.ya?ml$/.test(f))
  .flatMap((f) =>
    parseAllDocuments(readFileSync(join(K8S_DIR, f), 'utf8')).map((d) => {
      if (d.errors.length) throw new Error(`${f}: ${d.errors.map(String).join('; ')}`);
      return d.toJS() as K8sDoc;
    }),
  )
  .filter(Boolean);
const byKind = (kind: string) => k8sDocs.filter((d) => d.kind === kind);

describe('infra/k8s', () => {
  const configMap = byKind('ConfigMap').find((d) => d.metadata.name === 'lateral-config');
  const cmEnv: Env = Object.fromEntries(Object.entries(configMap?.data ?? {}).map(([k, v]) => [k, v as string]));
  const deployments = byKind('Deployment');
  const containerEnv = (dep: K8sDoc): Env => {
    const c = dep.spec.template.spec.containers[0];
    return Object.fromEntries((c.env ?? []).map((e: { name: string; value?: string }) => [e.name, e.value ?? '']));
  };
  const deploymentConfig = (dep: K8sDoc) => expectValidConfig({ ...cmEnv, ...containerEnv(dep) }, `Deployment ${dep.metadata.name}`);

  it('is namespace-less', () => {
    expect(k8sDocs.length).toBeGreaterThan(0);
    for (const d of k8sDocs) expect(d.metadata.namespace, `${d.kind}/${d.metadata.name}`).toBeUndefined();
  });

  it('ConfigMap lateral-config sets only ConfigSchema variables, as strings, and they parse', () => {
    expect(configMap).toBeDefined();
    for (const [k, v] of Object.entries(configMap!.data ?? {})) expect(typeof v, `ConfigMap data.${k} must be a string`).toBe('string');
    expectValidConfig(cmEnv, 'ConfigMap lateral-config');
  });

  it('has the api Deployment + Service and both worker Deployments, each reading the ConfigMap', () => {
    const names = deployments.map((d) => d.metadata.name).sort();
    expect(names).toEqual(['lateral-api', 'lateral-encoder-worker', 'lateral-scorer-shard-0', 'lateral-scorer-shard-1', 'lateral-scorer-worker']);
    const svc = byKind('Service').find((s) => s.metadata.name === 'lateral-api');
    // The Service selects the API pods (its selector is a subset of their labels).
    expect(deployments.find((d) => d.metadata.name === 'lateral-api')!.spec.template.metadata.labels).toMatchObject(svc!.spec.selector);
    for (const dep of deployments) {
      const c = dep.spec.template.spec.containers[0];
      expect(c.envFrom.some((e: { configMapRef?: { name: string } }) => e.configMapRef?.name === 'lateral-config')).toBe(true);
      expect(c.command.join(' ')).toMatch(/npx tsx apps\/[\w-]+\/src\/main\.ts$/);
    }
  });

  it.each(['lateral-api', 'lateral-encoder-worker', 'lateral-scorer-worker', 'lateral-scorer-shard-0', 'lateral-scorer-shard-1'])('%s: env + ConfigMap are ConfigSchema variables and parse', (name) => {
    deploymentConfig(deployments.find((d) => d.metadata.name === name)!);
  });

  it('encoder-worker asks for one GPU, on GPU nodes, with the CUDA provider', () => {
    const dep = deployments.find((d) => d.metadata.name === 'lateral-encoder-worker')!;
    const pod = dep.spec.template.spec;
    expect(String(pod.containers[0].resources.limits['nvidia.com/gpu'])).toBe('1');
    expect(Object.keys(pod.nodeSelector ?? {}).length).toBeGreaterThan(0);
    const c = deploymentConfig(dep);
    expect(c.ORT_EXECUTION_PROVIDER).toBe('cuda');
    expect(c.WORKER_QUEUES).toEqual(['encode', 'compress', 'encode-texts']);
    expect(deploymentConfig(deployments.find((d) => d.metadata.name === 'lateral-scorer-worker')!).WORKER_QUEUES).toEqual(['index', 'commit', 'merge', 'refit', 'rerank', 'search', 'batch', 'train', 'webhook']);
  });

  it('has a scorer pool holding each shard a collection may have (COLLECTION_MAX_SHARDS)', () => {
    const max = parseConfig(cmEnv).data!.COLLECTION_MAX_SHARDS;
    const held = new Set<number>();
    for (const dep of deployments) {
      const c = deploymentConfig(dep);
      if (c.WORKER_QUEUES.some((q) => q === 'rerank' || q === 'search')) for (const i of scorerShards(c.SCORER_SHARDS, c.COLLECTION_MAX_SHARDS, c.SCORER_SHARD_FROM_HOSTNAME, 'pod-0')) held.add(i);
    }
    expect([...held].sort()).toEqual(Array.from({ length: max }, (_, i) => i));
  });

  it('probes: liveness on /v1/health/live everywhere (API port, workers on their metrics port), readiness on /v1/health/ready for the API only, routes the service serves', () => {
    const served = Object.keys(openApiDocument('k8s').paths);
    const port = (c: Manifest, name: string) => c.ports.find((p: { name: string }) => p.name === name);
    for (const dep of deployments) {
      const c = dep.spec.template.spec.containers[0];
      const api = dep.metadata.name === 'lateral-api';
      const live = c.livenessProbe?.httpGet;
      expect(live, `${dep.metadata.name} livenessProbe`).toMatchObject({ path: '/v1/health/live', port: api ? 'http' : 'metrics' });
      expect(port(c, live.port), `${dep.metadata.name} port ${live.port}`).toBeDefined();
      // a busy process is not restarted at once: a minute or more of unanswered probes
      expect(c.livenessProbe.periodSeconds * c.livenessProbe.failureThreshold, dep.metadata.name).toBeGreaterThanOrEqual(60);
      if (!api) {
        expect(containerEnv(dep).METRICS_PORT).toBe(String(port(c, 'metrics').containerPort));
        expect(c.readinessProbe, dep.metadata.name).toBeUndefined();
        continue;
      }
      expect(c.readinessProbe.httpGet).toMatchObject({ path: '/v1/health/ready', port: 'http' });
      expect(served).toEqual(expect.arrayContaining(['/v1/health/live', '/v1/health/ready']));
      // the probe waits longer than readiness's own checks take (twice HEALTH_CHECK_TIMEOUT_MS: the checks, then the queue counts)
      expect(c.readinessProbe.timeoutSeconds * 1000).toBeGreaterThan(2 * deploymentConfig(dep).HEALTH_CHECK_TIMEOUT_MS);
    }
  });

  it('KEDA ScaledObjects scale each worker pool on <REDIS_PREFIX>:<queue>:wait of every queue it works', () => {
    const prefix = parseConfig(cmEnv).data!.REDIS_PREFIX;
    const redisHost = new URL(cmEnv.REDIS_URL!).hostname;
    const scaled = byKind('ScaledObject');
    for (const dep of deployments.filter((d) => d.metadata.name !== 'lateral-api')) {
      const so = scaled.find((s) => s.spec.scaleTargetRef.name === dep.metadata.name);
      expect(so, `ScaledObject for ${dep.metadata.name}`).toBeDefined();
      expect(so!.apiVersion).toBe('keda.sh/v1alpha1');
      const cfg = deploymentConfig(dep);
      // A scorer (rerank or search) also works the shard queues of the shards it holds: each shard's pool scales on its own.
      const held = cfg.WORKER_QUEUES.some((q) => q === 'rerank' || q === 'search') ? scorerShards(cfg.SCORER_SHARDS, cfg.COLLECTION_MAX_SHARDS, cfg.SCORER_SHARD_FROM_HOSTNAME, 'pod-0') : [];
      const queues: string[] = [...cfg.WORKER_QUEUES, ...held.map(shardQueueName)];
      const lists: string[] = so!.spec.triggers.map((t: { type: string; metadata: { listName: string } }) => {
        expect(t.type).toBe('redis');
        return t.metadata.listName;
      });
      for (const q of queues) expect(lists, `${dep.metadata.name} scales on ${q}`).toContain(`${prefix}:${q}:wait`);
      for (const l of lists) {
        const m = /^(.+):([a-z0-9-]+):(wait|active)$/.exec(l);
        expect(m, `list name ${l}`).not.toBeNull();
        expect(m![1]).toBe(prefix);
        expect(queues).toContain(m![2]);
      }
      for (const t of so!.spec.triggers) {
        expect(t.metadata.address).toMatch(/^[\w.-]+:\d+$/);
        expect(t.metadata.address.split(':')[0]).toBe(redisHost);
        expect(Number(t.metadata.listLength)).toBeGreaterThan(0);
      }
    }
  });
});
