import path from 'node:path';
import type { Logger } from '@lateral/infra';
import { getEncoder, type TokenEncoder } from '@lateral/model';

export type EncoderProvider = (model: string) => Promise<TokenEncoder>;

/** One ONNX session per model directory per process, loaded lazily on first use. */
export function encoderProvider(opts: { modelsDir: string; executionProvider: 'cpu' | 'cuda'; deviceId: number; intraOpThreads: number }, logger: Logger): EncoderProvider {
  return (model: string) =>
    getEncoder(path.resolve(opts.modelsDir, model), {
      executionProvider: opts.executionProvider,
      deviceId: opts.deviceId,
      intraOpThreads: opts.intraOpThreads || undefined,
      logger: logger.child('onnx'),
    });
}
