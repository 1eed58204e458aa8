import { EventEmitter } from 'node:events';

/**
 * Completions of jobs worked on in this process, announced to waiters in this process (issue 31
 * item 2): when the API and the workers share a process (the all-in-one default), a request that
 * waits for its re-rank or search learns of the completion from the worker's own 'completed'
 * event (after BullMQ recorded the job completed in Redis) instead of a second trip through Redis
 * (the events stream read by QueueEvents), which stays the path across processes.
 */
export class LocalCompletions {
  private readonly emitter = new EventEmitter().setMaxListeners(0);

  /** Called by the worker once BullMQ has recorded the job completed. */
  complete(queue: string, jobId: string, returnvalue: unknown): void {
    this.emitter.emit(`${queue}\u0000${jobId}`, returnvalue);
  }

  /** The job's return value when a worker in this process completes it; `cancel` stops listening. */
  wait(queue: string, jobId: string): { done: Promise<unknown>; cancel(): void } {
    const event = `${queue}\u0000${jobId}`;
    let listener!: (rv: unknown) => void;
    const done = new Promise<unknown>((resolve) => {
      listener = resolve;
      this.emitter.once(event, listener);
    });
    return { done, cancel: () => this.emitter.removeListener(event, listener) };
  }
}

/** The process's one registry (the API and the workers of an all-in-one process share it). */
export const localCompletions = new LocalCompletions();
