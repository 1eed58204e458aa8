/**
 * The session thread's batch slots of one encoder, shared by its concurrent document encodings
 * and granted oldest call first (issue 29: the encoder stays busy across encode jobs).
 *
 * One `encodeDocuments` call keeps at most `depth` batches in the session thread (one running, the
 * next waiting there ready) while its own thread packs the one after and copies out the one
 * before. When two calls run at once (two encode jobs, `ENCODE_CONCURRENCY=2`), they share the
 * same `depth` slots, and a free slot goes to the **oldest** call that still has batches to post:
 * the younger call's batches are posted only once the older one has posted all of its own. So the
 * older job finishes as early as if it ran alone, and the younger one's first batches are already
 * in the session thread when the older one's last batch ends: its tokenizing, its segment writing,
 * its S3 writes and the queue's hand-over to the next job no longer leave the session idle.
 *
 * A slot freed while the oldest call is between two batches (copying out, on the same thread) is
 * kept for it rather than given to a younger call that happens to be waiting. Query encodings do
 * not take slots (they post at once, as before): a query never waits behind a document job.
 */
export class BatchSlots {
  private free: number;
  private seq = 0;
  /** Calls with batches left to post, oldest first, each with its waiter when it is waiting for a slot. */
  private readonly open: { id: number; waiter: (() => void) | null }[] = [];

  constructor(depth: number) {
    if (!(depth >= 1)) throw new RangeError(`batch slots: depth must be >= 1, got ${depth}`);
    this.free = depth;
  }

  /** Registers a call (its place in line is its start); pass the result to acquire and close. */
  enter(): number {
    const id = ++this.seq;
    this.open.push({ id, waiter: null });
    return id;
  }

  /** Resolves when `call` may post its next batch (a slot is free and no older open call is owed one). */
  acquire(call: number): Promise<void> {
    const entry = this.open.find((c) => c.id === call);
    if (!entry) return Promise.reject(new Error(`batch slots: call ${call} is not open`));
    return new Promise<void>((resolve) => {
      entry.waiter = resolve;
      this.grant();
    });
  }

  /** A batch of any call came back from the session thread (or failed): its slot is free again. */
  release(): void {
    this.free++;
    this.grant();
  }

  /** `call` has posted its last batch (or gave up): younger calls may now have the slots. */
  close(call: number): void {
    const i = this.open.findIndex((c) => c.id === call);
    if (i < 0) return;
    this.open.splice(i, 1);
    this.grant();
  }

  /** Batches that may be posted right now without waiting (tests). */
  get available(): number {
    return this.free;
  }

  private grant(): void {
    const head = this.open[0];
    // the oldest open call gets the slot; while it is busy between batches the slot waits for it
    if (!head || this.free <= 0 || !head.waiter) return;
    const go = head.waiter;
    head.waiter = null;
    this.free--;
    go();
  }
}
