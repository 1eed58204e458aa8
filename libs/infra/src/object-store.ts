import {
  CreateBucketCommand,
  DeleteObjectsCommand,
  GetObjectCommand,
  HeadBucketCommand,
  ListObjectsV2Command,
  NoSuchKey,
  PutObjectCommand,
  S3Client,
} from '@aws-sdk/client-s3';
import { UnavailableError, wrapError, type Config } from '@lateral/shared';

/**
 * The one class that talks to S3. Everything lateral stores (accepted documents, raw vectors,
 * segments, manifests, codec artifacts, re-rank requests and results) goes through it.
 */
export class ObjectStore {
  private readonly client: S3Client;

  constructor(readonly bucket: string, opts: { endpoint?: string; region: string; accessKeyId: string; secretAccessKey: string; forcePathStyle: boolean }) {
    this.client = new S3Client({
      endpoint: opts.endpoint,
      region: opts.region,
      forcePathStyle: opts.forcePathStyle,
      credentials: { accessKeyId: opts.accessKeyId, secretAccessKey: opts.secretAccessKey },
      maxAttempts: 3,
      // s3rver and MinIO ignore these checksums; real S3 verifies them.
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
    });
  }

  static fromConfig(config: Config, endpoint = config.S3_ENDPOINT): ObjectStore {
    return new ObjectStore(config.S3_BUCKET, {
      endpoint,
      region: config.S3_REGION,
      accessKeyId: config.S3_ACCESS_KEY_ID,
      secretAccessKey: config.S3_SECRET_ACCESS_KEY,
      forcePathStyle: config.S3_FORCE_PATH_STYLE,
    });
  }

  async ensureBucket(): Promise<void> {
    try {
      await this.client.send(new HeadBucketCommand({ Bucket: this.bucket }));
    } catch {
      try {
        await this.client.send(new CreateBucketCommand({ Bucket: this.bucket }));
      } catch (err) {
        throw wrapError(`creating bucket ${this.bucket}`, err);
      }
    }
  }

  async ping(): Promise<void> {
    try {
      await this.client.send(new HeadBucketCommand({ Bucket: this.bucket }));
    } catch (err) {
      throw new UnavailableError(`object store unavailable: ${(err as Error).name ?? ''} ${(err as Error).message}`.trim());
    }
  }

  async put(key: string, body: Uint8Array | string, contentType = 'application/octet-stream'): Promise<void> {
    try {
      await this.client.send(new PutObjectCommand({ Bucket: this.bucket, Key: key, Body: body, ContentType: contentType }));
    } catch (err) {
      throw wrapError(`writing s3://${this.bucket}/${key}`, err);
    }
  }

  async putJson(key: string, value: unknown): Promise<void> {
    await this.put(key, JSON.stringify(value), 'application/json');
  }

  /** Returns the object's bytes, or null when it does not exist. */
  async get(key: string): Promise<Uint8Array | null> {
    try {
      const out = await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: key }));
      return out.Body ? await out.Body.transformToByteArray() : new Uint8Array();
    } catch (err) {
      if (err instanceof NoSuchKey || (err as Error).name === 'NoSuchKey' || (err as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode === 404) return null;
      throw wrapError(`reading s3://${this.bucket}/${key}`, err);
    }
  }

  async getJson<T>(key: string): Promise<T | null> {
    const bytes = await this.get(key);
    return bytes ? (JSON.parse(Buffer.from(bytes).toString('utf8')) as T) : null;
  }

  async list(prefix: string): Promise<{ key: string; size: number }[]> {
    const out: { key: string; size: number }[] = [];
    let token: string | undefined;
    do {
      const page = await this.client.send(new ListObjectsV2Command({ Bucket: this.bucket, Prefix: prefix, ContinuationToken: token }));
      for (const o of page.Contents ?? []) if (o.Key) out.push({ key: o.Key, size: o.Size ?? 0 });
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
    return out;
  }

  async deletePrefix(prefix: string): Promise<number> {
    const objects = await this.list(prefix);
    for (let i = 0; i < objects.length; i += 1000) {
      const chunk = objects.slice(i, i + 1000);
      await this.client.send(new DeleteObjectsCommand({ Bucket: this.bucket, Delete: { Objects: chunk.map((o) => ({ Key: o.key })), Quiet: true } }));
    }
    return objects.length;
  }

  destroy(): void {
    this.client.destroy();
  }
}
