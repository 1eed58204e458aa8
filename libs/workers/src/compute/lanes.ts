/**
 * Maintenance off the ingest path (issue 32): merge and refit jobs run in compute threads of their
 * own (MAINTENANCE_THREADS), never in the COMPUTE_THREADS pool that runs encode, compress, index,
 * commit, search and re-rank. A WARP refit's k-means and layout rebuild (minutes of ONNX Runtime
 * GEMMs and JavaScript, each call synchronous) used to hold the one compute thread of the ingest
 * worker and of the all-in-one service: during a K = 16,384 rebuild ingest fell from 95 to 13
 * docs/s (docs/scaling.md). In threads of their own the OS shares the cores between them and the
 * ingest thread instead; the refit's thread also lowers its priority as it starts (REFIT_NICE), so
 * its ONNX Runtime threads, created by it, yield the cores to ingest, merges and searches.
 *
 * Lanes: with 2 threads merges run in one and refits in the other (a refit never holds a merge,
 * which the ingest back-pressure waits on); with 1 both share one thread. Each lane's thread is
 * started on its first job (a service that never merges pays nothing), or with the process
 * (`startFor`, startWorkers: a process that commits ingested batches with MERGE_AFTER_COMMIT asks
 * for a merge at every commit, so its lanes were started by its first ingestion anyway, and their
 * ~3-5 s of module loading ran beside that ingestion's last index jobs); it keeps its caches across
 * jobs like any compute thread, and is started again if it dies (pool.ts). Leases, epochs and job
 * ids are unchanged: they are in Redis and S3, as for maintenance in a process of its own.
 */
import { QueueName } from '@lateral/shared';
import type { Job } from 'bullmq';
import { ComputePool, maintenanceThreadConfig, type ComputePoolOptions } from './pool';

/** The queues that run in maintenance threads. */
export const MAINTENANCE_QUEUES: ReadonlySet<string> = new Set<string>([QueueName.merge, QueueName.refit]);

/** The lane (0 or 1) a queue's jobs run in with `threads` maintenance threads; null: not a maintenance queue, or no lanes. */
export function laneOf(queue: string, threads: number): number | null {
  if (threads <= 0) return null;
  if (queue === QueueName.merge) return 0;
  if (queue === QueueName.refit) return threads >= 2 ? 1 : 0;
  return null;
}

export interface MaintenanceLanesOptions extends Omit<ComputePoolOptions, 'threads' | 'firstIndex' | 'configFor' | 'nice' | 'niceAtStart'> {
  /** MAINTENANCE_THREADS (1 or 2). */
  threads: number;
  /** The first lane's thread index (after the COMPUTE_THREADS pool's). */
  firstIndex: number;
  /** REFIT_NICE: the nice value of the thread that runs refits. */
  refitNice: number;
}

/** The maintenance threads of one process: one single-thread pool per lane, started on its first job. */
export class MaintenanceLanes {
  private readonly pools: (ComputePool | undefined)[] = [];
  private closed = false;

  constructor(private readonly opts: MaintenanceLanesOptions) {
    if (opts.threads < 1 || opts.threads > 2) throw new Error(`maintenance threads: 1 or 2, not ${opts.threads}`);
  }

  /** Whether `queue`'s jobs run here. */
  handles(queue: string): boolean {
    return laneOf(queue, this.opts.threads) !== null;
  }

  /** Runs a merge or refit job in its lane's thread (started now if this is its first job). */
  run(queue: string, payload: unknown, job: Job): Promise<unknown> {
    return this.pool(queue).run(queue, payload, job, queue);
  }

  /** The pool of `queue`'s lane (made on first use). */
  pool(queue: string): ComputePool {
    const lane = laneOf(queue, this.opts.threads);
    if (lane === null) throw new Error(`queue ${queue} does not run in a maintenance thread`);
    if (this.closed) throw new Error(`maintenance threads are closed; the ${queue} job is retried`);
    const refits = laneOf(QueueName.refit, this.opts.threads) === lane;
    return (this.pools[lane] ??= new ComputePool({
      ...this.opts,
      threads: 1,
      firstIndex: this.opts.firstIndex + lane,
      configFor: (config) => maintenanceThreadConfig(config, lane),
      niceAtStart: refits ? this.opts.refitNice : 0,
    }));
  }

  /** Starts the threads of the lanes of `queues` (those of merge and refit it holds) now rather than on their first jobs (see the module comment). */
  startFor(queues: readonly string[]): void {
    for (const q of [QueueName.merge, QueueName.refit]) if (queues.includes(q)) this.pool(q);
  }

  /** Resolves once the lanes started so far have loaded (a lane not started is not waited for). */
  async ready(): Promise<void> {
    await Promise.all(this.pools.map((p) => p?.ready()));
  }

  /** The lanes started so far (tests, logs). */
  started(): number {
    return this.pools.filter(Boolean).length;
  }

  async close(): Promise<void> {
    this.closed = true;
    await Promise.all(this.pools.map((p) => p?.close()));
  }
}
