/**
 * What the in-process WARP probes (warp-engine-ab.ts, warp-quality-probe.ts) share: an all-in-one
 * server started on the data directory a `npm run bench -- peers --data DATA_DIR` run kept (no
 * queues, so no workers run), the `peers-vaswani` collection's current manifest, the WARP epoch
 * holding most documents with its centroids and residual codec, the segments at that epoch, and
 * the collection's encoder.
 */
import path from 'node:path';
import { loadConfig, type CollectionManifest, type SegmentRef } from '@lateral/shared';
import { getEncoder, type TokenEncoder } from '@lateral/model';
import { startServer, type Server } from '../../apps/all-in-one/src/server';

export interface WarpProbeBed {
  server: Server;
  rt: Server['runtime'];
  tenant: string;
  collection: string;
  manifest: CollectionManifest;
  /** The epoch holding most documents, and its segments in manifest order. */
  epoch: number;
  refs: SegmentRef[];
  /** Documents per epoch, as [epoch, documents]. */
  docsAt: [number, number][];
  ivf: NonNullable<Awaited<ReturnType<Server['runtime']['ivf']['get']>>>;
  codec: NonNullable<Awaited<ReturnType<Server['runtime']['warpCodecs']['get']>>>;
  encoder: () => Promise<TokenEncoder>;
}

export async function openWarpProbeBed(dataDir: string): Promise<WarpProbeBed> {
  const config = loadConfig({ ...process.env, PORT: '0', LOG_LEVEL: 'warn', DATA_DIR: dataDir, ORT_INTRA_OP_THREADS: '1' });
  const server = await startServer(config, { quiet: true, queues: [] });
  const rt = server.runtime;
  const tenant = rt.config.DEFAULT_TENANT;
  const collection = 'peers-vaswani';
  const manifest = (await rt.generations.manifest(tenant, collection))!;
  const docsAt = new Map<number, number>();
  for (const ref of manifest.segments) docsAt.set(ref.warpEpoch ?? 0, (docsAt.get(ref.warpEpoch ?? 0) ?? 0) + ref.documents);
  const epoch = [...docsAt].sort((a, b) => b[1] - a[1])[0][0];
  const ivf = (await rt.ivf.get(tenant, collection, manifest.codecVersion, epoch))!;
  const codec = (await rt.warpCodecs.get(tenant, collection, manifest.codecVersion, epoch))!;
  const refs = manifest.segments.filter((ref) => (ref.warpEpoch ?? 0) === epoch);
  const encoder = async () => getEncoder(path.resolve(config.MODELS_DIR, (await rt.collections.get(tenant, collection))!.model), { executionProvider: 'cpu' });
  return { server, rt, tenant, collection, manifest, epoch, refs, docsAt: [...docsAt], ivf, codec, encoder };
}
