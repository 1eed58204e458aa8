/**
 * The OS scheduling priority of one thread (issue 29 item 4: the encoder's cores first).
 *
 * On Linux a thread's nice value is its own (`setpriority(PRIO_PROCESS, tid)` changes that thread
 * only) and a thread starts with the nice value of the thread that created it. A compute thread
 * that serves encode jobs lowers its own priority once its encoder's session thread exists
 * (./thread-main.ts): the session thread and ONNX Runtime's intra-op threads, created before,
 * keep the process's priority, while the compute thread's own work (compress, index, commit,
 * merge: their JavaScript, and the intra-op threads of the sessions it creates afterwards, such as
 * the index jobs' nearest-centroid kernel) yields the cores to them. A lowered priority cannot be
 * raised again without CAP_SYS_NICE, so it is done once, at start.
 */
import { readlinkSync } from 'node:fs';
import os from 'node:os';

/** The calling thread's kernel id (Linux: /proc/thread-self), or null where there is none. */
export function currentThreadId(): number | null {
  try {
    const m = /\/task\/(\d+)$/.exec(readlinkSync('/proc/thread-self'));
    return m ? Number(m[1]) : null;
  } catch {
    return null;
  }
}

export type PriorityOutcome = { applied: true; tid: number; nice: number } | { applied: false; reason: string };

/**
 * Raises the calling thread's nice value to `nice` (1-19: lower priority); a thread already at or
 * above it is left as it is. Never throws: says why nothing was done.
 */
export function lowerThreadPriority(nice: number): PriorityOutcome {
  if (!Number.isInteger(nice) || nice < 1 || nice > 19) return { applied: false, reason: `nice ${nice} is not an integer from 1 to 19` };
  const tid = currentThreadId();
  if (tid === null) return { applied: false, reason: 'per-thread priorities need Linux (/proc/thread-self)' };
  try {
    const now = os.getPriority(tid);
    if (now >= nice) return { applied: true, tid, nice: now };
    os.setPriority(tid, nice);
    return { applied: true, tid, nice: os.getPriority(tid) };
  } catch (err) {
    return { applied: false, reason: err instanceof Error ? err.message : String(err) };
  }
}
