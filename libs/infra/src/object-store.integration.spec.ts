import { CompleteMultipartUploadCommand, CopyObjectCommand, CreateMultipartUploadCommand, PutObjectCommand, S3Client, UploadPartCommand } from '@aws-sdk/client-s3';
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import type net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, startEmbeddedS3, type EmbeddedS3 } from './embedded-services';
import { ObjectStore } from './object-store';

/**
 * ObjectStore's conditional writes against a real s3rver over HTTP (its own server on a temp
 * folder, not the run's shared one), with If-None-Match support added by startEmbeddedS3.
 */
const BUCKET = 'cas-test';
const CREDS = { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' };

let dir: string;
let s3: EmbeddedS3;
const stores: ObjectStore[] = [];

function storeAt(endpoint: string): ObjectStore {
  const store = new ObjectStore(BUCKET, { endpoint, region: 'us-east-1', forcePathStyle: true, ...CREDS });
  stores.push(store);
  return store;
}

const text = (bytes: Uint8Array | null) => (bytes === null ? null : Buffer.from(bytes).toString('utf8'));

beforeAll(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'lateral-cas-'));
  s3 = await startEmbeddedS3({ dir, bucket: BUCKET, ...CREDS });
});

afterAll(async () => {
  for (const s of stores) s.destroy();
  await s3?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe('ObjectStore.putIfAbsent on the embedded S3 server', () => {
  it('writes a new key, then refuses the second writer and keeps the first body', async () => {
    const store = storeAt(s3.endpoint);
    expect(await store.exists('cas/one')).toBe(false);
    expect(await store.putIfAbsent('cas/one', 'first', 'text/plain')).toBe(true);
    expect(await store.exists('cas/one')).toBe(true);
    expect(await store.putIfAbsent('cas/one', 'second', 'text/plain')).toBe(false);
    expect(text(await store.get('cas/one'))).toBe('first');
    expect(await store.putJsonIfAbsent('cas/one', { gen: 2 })).toBe(false);
    expect(text(await store.get('cas/one'))).toBe('first');
  });

  it('putJsonIfAbsent writes JSON that getJson reads back', async () => {
    const store = storeAt(s3.endpoint);
    expect(await store.putJsonIfAbsent('cas/manifest-00000001.json', { generation: 1, segments: ['a'] })).toBe(true);
    expect(await store.getJson('cas/manifest-00000001.json')).toEqual({ generation: 1, segments: ['a'] });
  });

  it('10 concurrent writers of one new key: exactly one wins and every reader sees its body', async () => {
    const writers = Array.from({ length: 10 }, () => storeAt(s3.endpoint));
    const bodies = writers.map((_, i) => `writer-${i}-${'x'.repeat(64 * 1024)}`);
    const results = await Promise.all(writers.map((w, i) => w.putIfAbsent('cas/race', bodies[i])));
    expect(results.filter(Boolean)).toHaveLength(1);
    const winner = results.indexOf(true);
    const seen = await Promise.all(writers.map((w) => w.get('cas/race')));
    for (const bytes of seen) expect(text(bytes)).toBe(bodies[winner]);
  });

  it('a plain put still overwrites, and a later putIfAbsent still refuses', async () => {
    const store = storeAt(s3.endpoint);
    expect(await store.putIfAbsent('cas/plain', 'v1')).toBe(true);
    await store.put('cas/plain', 'v2');
    expect(text(await store.get('cas/plain'))).toBe('v2');
    expect(await store.putIfAbsent('cas/plain', 'v3')).toBe(false);
    expect(text(await store.get('cas/plain'))).toBe('v2');
  });

  it('the server answers 412 PreconditionFailed with an S3 error body, and 501 for If-Match', async () => {
    const client = new S3Client({ endpoint: s3.endpoint, region: 'us-east-1', forcePathStyle: true, credentials: CREDS, maxAttempts: 1 });
    try {
      await client.send(new PutObjectCommand({ Bucket: BUCKET, Key: 'cas/raw', Body: 'a', IfNoneMatch: '*' }));
      const refused = await client.send(new PutObjectCommand({ Bucket: BUCKET, Key: 'cas/raw', Body: 'b', IfNoneMatch: '*' })).catch((e: unknown) => e);
      expect(refused).toMatchObject({ name: 'PreconditionFailed', message: 'At least one of the pre-conditions you specified did not hold', $metadata: { httpStatusCode: 412 } });
      const copy = await client
        .send(new CopyObjectCommand({ Bucket: BUCKET, Key: 'cas/raw', CopySource: `${BUCKET}/cas/one`, IfNoneMatch: '*' }))
        .catch((e: unknown) => e);
      expect(copy).toMatchObject({ name: 'PreconditionFailed', $metadata: { httpStatusCode: 412 } });
      await client.send(new CopyObjectCommand({ Bucket: BUCKET, Key: 'cas/raw-copy', CopySource: `${BUCKET}/cas/raw`, IfNoneMatch: '*' }));
      const ifMatch = await client.send(new PutObjectCommand({ Bucket: BUCKET, Key: 'cas/raw', Body: 'c', IfMatch: '"abc"' })).catch((e: unknown) => e);
      expect(ifMatch).toMatchObject({ name: 'NotImplemented', $metadata: { httpStatusCode: 501 } });
      const store = storeAt(s3.endpoint);
      expect(text(await store.get('cas/raw'))).toBe('a');
      expect(text(await store.get('cas/raw-copy'))).toBe('a');
    } finally {
      client.destroy();
    }
  });

  it('CompleteMultipartUpload with If-None-Match: * is refused on an existing key', async () => {
    const client = new S3Client({ endpoint: s3.endpoint, region: 'us-east-1', forcePathStyle: true, credentials: CREDS, maxAttempts: 1 });
    const upload = async (key: string, body: string) => {
      const { UploadId } = await client.send(new CreateMultipartUploadCommand({ Bucket: BUCKET, Key: key }));
      const { ETag } = await client.send(new UploadPartCommand({ Bucket: BUCKET, Key: key, UploadId, PartNumber: 1, Body: body }));
      return client.send(
        new CompleteMultipartUploadCommand({ Bucket: BUCKET, Key: key, UploadId, IfNoneMatch: '*', MultipartUpload: { Parts: [{ ETag, PartNumber: 1 }] } }),
      );
    };
    try {
      await upload('cas/multipart', 'first');
      const refused = await upload('cas/multipart', 'second').catch((e: unknown) => e);
      expect(refused).toMatchObject({ name: 'PreconditionFailed', $metadata: { httpStatusCode: 412 } });
      expect(text(await storeAt(s3.endpoint).get('cas/multipart'))).toBe('first');
    } finally {
      client.destroy();
    }
  });

  it('an attempt that was written but whose answer was lost still counts as written on the retry', async () => {
    // A proxy that forwards everything to s3rver but drops the connection, after s3rver answered,
    // of the first conditional PUT of `cas/lost`: the SDK retries and the retry gets 412.
    const upstream = new URL(s3.endpoint);
    let dropped = 0;
    const proxy = http.createServer((req, res) => {
      const drop = dropped === 0 && req.method === 'PUT' && req.headers['if-none-match'] === '*' && req.url?.startsWith(`/${BUCKET}/cas/lost`);
      if (drop) dropped++;
      const out = http.request({ host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: req.headers }, (up) => {
        if (drop) {
          up.resume();
          up.on('end', () => req.socket.destroy());
          return;
        }
        res.writeHead(up.statusCode ?? 502, up.headers);
        up.pipe(res);
      });
      out.on('error', () => req.socket.destroy());
      req.pipe(out);
    });
    const port = await freePort();
    await new Promise<void>((resolve) => proxy.listen(port, '127.0.0.1', resolve));
    const sockets = new Set<net.Socket>();
    proxy.on('connection', (s) => (sockets.add(s), s.on('close', () => sockets.delete(s))));
    try {
      const viaProxy = storeAt(`http://127.0.0.1:${port}`);
      expect(await viaProxy.putIfAbsent('cas/lost', 'mine')).toBe(true);
      expect(dropped).toBe(1);
      // a different body on the now existing key is refused on its first attempt
      expect(await viaProxy.putIfAbsent('cas/lost', 'theirs')).toBe(false);
      expect(text(await storeAt(s3.endpoint).get('cas/lost'))).toBe('mine');
    } finally {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => proxy.close(() => resolve()));
    }
  });
});

describe('ObjectStore.getRange on the embedded S3 server (Range header)', () => {
  it('answers exactly the bytes asked; null for a missing key; a range past the end is a RangeError naming it', async () => {
    const store = storeAt(s3.endpoint);
    const body = Uint8Array.from({ length: 70_000 }, (_, i) => (i * 13 + 1) & 0xff);
    await store.put('ranges/obj', body);
    expect(await store.getRange('ranges/obj', 0, 64)).toEqual(body.slice(0, 64));
    expect(await store.getRange('ranges/obj', 65_536, 4464)).toEqual(body.slice(65_536));
    expect(await store.getRange('ranges/obj', 12_345, 1)).toEqual(body.slice(12_345, 12_346));
    expect(await store.getRange('ranges/missing', 0, 10)).toBeNull();
    await expect(store.getRange('ranges/obj', 69_990, 20)).rejects.toThrow(/ranges\/obj: range \[69990, 70010\)/);
    await expect(store.getRange('ranges/obj', 80_000, 20)).rejects.toThrow(RangeError);
  });
});

describe('ObjectStore.latestKey', () => {
  it('returns the greatest zero-padded key across several list pages, ignoring other prefixes', async () => {
    const store = storeAt(s3.endpoint);
    const gens = [3, 11, 1, 10, 2, 7];
    for (const g of gens) await store.put(`latest/c1/manifests/${String(g).padStart(8, '0')}.json`, `{"g":${g}}`);
    await store.put('latest/c1/other/99999999.json', '{}');
    await store.put('latest/c2/manifests/99999999.json', '{}');
    expect(await store.latestKey('latest/c1/manifests/', { pageSize: 2 })).toBe('latest/c1/manifests/00000011.json');
    expect(await store.latestKey('latest/c1/manifests/')).toBe('latest/c1/manifests/00000011.json');
    expect(await store.list('latest/c1/manifests/')).toHaveLength(gens.length);
  });

  it('pages past 1000 keys on the embedded server (s3rver\'s own V2 continuation tokens need DES, gone in OpenSSL 3)', async () => {
    const store = storeAt(s3.endpoint);
    const keys = Array.from({ length: 1003 }, (_, i) => `many/${String(i).padStart(8, '0')}`);
    for (let i = 0; i < keys.length; i += 50) await Promise.all(keys.slice(i, i + 50).map((k) => store.put(k, 'x')));
    const listed = await store.list('many/');
    expect(listed.map((o) => o.key)).toEqual(keys);
    expect(await store.latestKey('many/')).toBe(keys.at(-1));
    expect(await store.latestKey('many/', { pageSize: 400 })).toBe(keys.at(-1));
  });

  it('returns null for a prefix with no keys', async () => {
    const store = storeAt(s3.endpoint);
    expect(await store.latestKey('latest/none/')).toBeNull();
    expect(await store.latestKey('latest/none/', { pageSize: 1 })).toBeNull();
  });

  it('commits generations with putIfAbsent on latestKey + 1, one committer per generation', async () => {
    const committers = Array.from({ length: 4 }, () => storeAt(s3.endpoint));
    const prefix = 'commit/c1/manifests/';
    const keyOf = (g: number) => `${prefix}${String(g).padStart(8, '0')}.json`;
    const commit = async (store: ObjectStore, who: number): Promise<number> => {
      for (;;) {
        const latest = await store.latestKey(prefix);
        const next = latest === null ? 1 : Number(path.basename(latest, '.json')) + 1;
        if (await store.putJsonIfAbsent(keyOf(next), { generation: next, who })) return next;
      }
    };
    const won = await Promise.all(committers.flatMap((s, who) => [commit(s, who), commit(s, who)]));
    expect([...won].sort((a, b) => a - b)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
    expect(await committers[0].latestKey(prefix)).toBe(keyOf(8));
  });
});

describe('embedded S3: read-after-write like S3', () => {
  // s3rver 3.x answers a PUT before the object file is written out, and rewrites the file in
  // place, so a GET right after (or during an overwrite) could read a truncated object: seen as
  // "corrupt segment ... past the end of the file" when a retried job rewrote its output.
  it('a GET after a PUT, and during an overwrite, returns one whole version, never a partial one', async () => {
    const store = storeAt(s3.endpoint);
    const size = 6 << 20;
    const versions = [1, 2, 3].map((v) => new Uint8Array(size).fill(v));
    const whole = (b: Uint8Array | null) => b !== null && b.length === size && b.every((x) => x === b[0]) && [1, 2, 3].includes(b[0]!);
    for (let round = 0; round < 6; round++) {
      const key = `atomic/after-put-${round}`;
      await store.put(key, versions[round % 3]!);
      const got = await store.get(key);
      expect(got?.length).toBe(size);
      expect(got![0]).toBe(versions[round % 3]![0]);
    }
    const key = 'atomic/overwritten';
    await store.put(key, versions[0]!);
    const writes = Array.from({ length: 6 }, (_, i) => store.put(key, versions[i % 3]!));
    const reads = Array.from({ length: 12 }, () => store.get(key));
    const got = await Promise.all(reads);
    await Promise.all(writes);
    expect(got.map((b) => (whole(b) ? 'whole' : `partial ${b?.length}`))).toEqual(got.map(() => 'whole'));
  }, 60_000);
});

