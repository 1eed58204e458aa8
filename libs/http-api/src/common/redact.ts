import path from 'node:path';

/**
 * What an error message may not show a caller: stack frames, absolute file paths (MODELS_DIR,
 * SCORERS_DIR, DATA_DIR, the working directory), S3 buckets, keys and endpoints, Redis URLs and
 * addresses. Each is replaced by the name of its setting, or by a neutral word.
 */
export interface RedactContext {
  dirs: Record<string, string>;
  bucket?: string;
  endpoints?: Record<string, string | undefined>;
}

const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

export function redact(message: string, ctx: RedactContext): string {
  let m = message;
  // stack frames ("    at fn (/abs/file.ts:1:2)") and everything after the first one
  m = m.replace(/\n\s*at [\s\S]*$/, '');
  // s3://bucket/key -> the object store
  m = m.replace(/s3:\/\/[^\s'"`),;]*/g, 'the object store');
  for (const [name, url] of Object.entries(ctx.endpoints ?? {})) {
    if (url) m = m.split(url).join(name);
  }
  // any other URL with a scheme (endpoints, Redis URLs); the API's own routes have none
  m = m.replace(/\b(?:https?|rediss?|tcp):\/\/[^\s'"`),;]+/gi, 'the service endpoint');
  // host:port of a peer (ioredis: "connect ECONNREFUSED 127.0.0.1:6379")
  m = m.replace(/\b(?:\d{1,3}\.){3}\d{1,3}:\d{1,5}\b/g, 'its address').replace(/\[[0-9a-f:]+\]:\d{1,5}/gi, 'its address');
  // configured folders, longest first, as their setting's name
  const dirs = Object.entries(ctx.dirs)
    .map(([name, dir]) => [name, path.resolve(dir)] as const)
    .sort((a, b) => b[1].length - a[1].length);
  for (const [name, dir] of dirs) {
    if (dir.length > 1) m = m.replace(new RegExp(`${escape(dir)}(/[^\\s'"\`),;]*)?`, 'g'), (_all, rest: string | undefined) => `${name}${rest ?? ''}`);
  }
  // any other absolute path (two segments or more), not the API's own routes
  m = m.replace(/(^|[\s'"`(=:])(\/(?!v1\/|openapi|docs)[A-Za-z0-9_.@~+-]+(?:\/[A-Za-z0-9_.@~+-]*)+)/g, '$1<path>');
  // "under MODELS_DIR (/abs/models)" has become "under MODELS_DIR (MODELS_DIR)"
  m = m.replace(/\b([A-Z][A-Z0-9_]+) \(\1\)/g, '$1');
  if (ctx.bucket && ctx.bucket.length >= 3) m = m.replace(new RegExp(`\\bbucket\\s+['"]?${escape(ctx.bucket)}['"]?`, 'gi'), 'the bucket');
  return m;
}

/** The redaction context of a process's configuration (its folders, bucket and endpoints). */
export function redactContext(config: { MODELS_DIR: string; SCORERS_DIR: string; DATA_DIR: string; S3_BUCKET?: string; S3_ENDPOINT?: string; REDIS_URL?: string }): RedactContext {
  return {
    dirs: { MODELS_DIR: config.MODELS_DIR, SCORERS_DIR: config.SCORERS_DIR, DATA_DIR: config.DATA_DIR, '.': process.cwd() },
    bucket: config.S3_BUCKET,
    endpoints: { S3_ENDPOINT: config.S3_ENDPOINT, REDIS_URL: config.REDIS_URL },
  };
}
