/**
 * Runs in the training worker thread (started by ./thread.ts through ./train-thread.cjs): takes the
 * packed inputs from workerData, calls the trainers unchanged (trainHead, trainAesi) and posts
 * their progress and their result (weights transferred, not copied) to the parent, or the error
 * (name, message, and for a diverged run its epoch and last finite loss).
 */
import { parentPort, workerData } from 'node:worker_threads';
import { trainAesi } from './aesi';
import { transferablesOf, unpackHeadInput, type ThreadInput, type ThreadMessage } from './thread';
import { TrainingDivergedError, trainHead } from './trainer';

async function main(input: ThreadInput) {
  const post = (m: ThreadMessage, transfer: ArrayBuffer[] = []) => parentPort!.postMessage(m, transfer);
  try {
    if (input.kind === 'head') {
      const { src, queries } = unpackHeadInput(input);
      const result = await trainHead(src, queries, { ...input.options, onProgress: (progress) => post({ type: 'progress', progress }) });
      post({ type: 'result', result }, transferablesOf(result.weights));
    } else {
      const result = await trainAesi(input.vectors, input.side, input.dims, input.sideDims, { ...input.options, onProgress: (progress) => post({ type: 'progress', progress }) });
      post({ type: 'result', result }, transferablesOf(result.weights));
    }
  } catch (err) {
    const e = err instanceof Error ? err : new Error(String(err));
    post({
      type: 'error', name: e.name, message: e.message, stack: e.stack,
      ...(e instanceof TrainingDivergedError ? { epoch: e.epoch, lastFiniteLoss: e.lastFiniteLoss } : {}),
    });
  }
}

void main(workerData as ThreadInput);
