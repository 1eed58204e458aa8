declare module 's3rver' {
  interface S3rverOptions {
    address?: string;
    port?: number;
    silent?: boolean;
    directory?: string;
    resetOnClose?: boolean;
    allowMismatchedSignatures?: boolean;
    configureBuckets?: { name: string; configs: (string | Buffer)[] }[];
  }

  /** The parts of the Koa context the embedded server's own middleware reads. */
  export interface S3rverContext {
    method: string;
    path: string;
    query: Record<string, string | string[] | undefined>;
    get(header: string): string;
  }
  export type S3rverMiddleware = (ctx: S3rverContext, next: () => Promise<unknown>) => Promise<unknown>;

  /** s3rver's FilesystemStore (lib/stores/filesystem.js), the methods lateral wraps. */
  export interface S3rverStore {
    existsObject(bucket: string, key: string): Promise<boolean>;
    putObject(object: { bucket: string; key: string; content: Buffer | NodeJS.ReadableStream; metadata: Record<string, string> }): Promise<{ size: number; md5: string }>;
    getResourcePath(bucket: string, key: string, resource: string): string;
    putMetadata(bucket: string, key: string, metadata: Record<string, string>, md5: string): Promise<void>;
    copyObject(srcBucket: string, srcKey: string, destBucket: string, destKey: string, replacementMetadata: unknown): Promise<unknown>;
  }

  /** S3rver extends Koa: `middleware` is Koa's array, composed when `run()` starts listening. */
  export interface S3rverInstance {
    readonly store: S3rverStore;
    readonly middleware: S3rverMiddleware[];
  }

  export default class S3rver implements S3rverInstance {
    constructor(options?: S3rverOptions);
    readonly store: S3rverStore;
    readonly middleware: S3rverMiddleware[];
    run(): Promise<unknown>;
    close(): Promise<void>;
  }
}

declare module 's3rver/lib/models/error.js' {
  /** s3rver's S3 error: its Koa onerror renders it as `<Error><Code>…</Code><Message>…</Message>…</Error>`. */
  export default class S3Error extends Error {
    constructor(code: string, message?: string, detail?: Record<string, string>);
    readonly code: string;
    readonly status: number;
  }
}

declare module 's3rver/lib/controllers/bucket.js' {
  /** The request context s3rver's bucket controller reads (a Koa context after its router matched). */
  export interface BucketContext {
    params: { bucket: string };
    query: Record<string, string | undefined>;
    body: unknown;
    store: {
      listObjects(bucket: string, options: unknown): Promise<{ objects: { key: string }[]; commonPrefixes: string[]; isTruncated: boolean }>;
    };
  }
  /** s3rver's bucket controller module (lib/controllers/bucket.js); its router calls `getBucket` through these exports. */
  const bucketCtrl: { getBucket(ctx: BucketContext): Promise<void> };
  export default bucketCtrl;
}
