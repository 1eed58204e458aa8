import { Job, type Queue } from 'bullmq';

/**
 * A job once it is completed or failed, read again after its state is final: the read that sees
 * the state may predate the finishing move's update of the job's fields (`attemptsMade`,
 * `failedReason`, `returnvalue`), so the job returned is a second read. Undefined while the job
 * does not exist yet; throws after `timeoutMs` naming the job and its last state.
 */
export async function settledJob(queue: Queue, id: string, timeoutMs = 60_000, everyMs = 100): Promise<Job> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const job = await Job.fromId(queue, id);
    const state = job ? await job.getState() : 'missing';
    if (state === 'completed' || state === 'failed') return (await Job.fromId(queue, id))!;
    if (Date.now() > deadline) throw new Error(`job ${id} still ${state} after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
