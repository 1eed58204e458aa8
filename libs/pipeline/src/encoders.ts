import { existsSync } from 'node:fs';
import path from 'node:path';
import type { Logger } from '@lateral/infra';
import { getEncoder, type TokenEncoder } from '@lateral/model';

export type EncoderProvider = (model: string) => Promise<TokenEncoder>;

export type EncoderPrecision = 'auto' | 'fp32' | 'fp16' | 'int8';

/**
 * The directory a model is encoded with under ENCODER_PRECISION: `<model>-fp16` / `<model>-int8`
 * when precision asks for it and that directory holds a graph, else the model's own. `auto` is
 * int8 on the CPU provider and fp32 on CUDA (docs/models.md, "Precision").
 */
export function encoderDir(modelsDir: string, model: string, want: EncoderPrecision = 'fp32', executionProvider: 'cpu' | 'cuda' = 'cpu'): string {
  const precision = want === 'auto' ? (executionProvider === 'cpu' ? 'int8' : 'fp32') : want;
  const own = path.resolve(modelsDir, model);
  if (precision === 'fp32' || model.endsWith(`-${precision}`)) return own;
  const variant = `${own}-${precision}`;
  return existsSync(path.join(variant, 'model.onnx')) ? variant : own;
}

/** ENCODER_SESSIONS: 0 (auto) is 2 sessions on CUDA, where two batches run side by side, and 1 on the CPU provider. */
export function encoderSessions(configured: number, provider: 'cpu' | 'cuda'): number {
  return configured > 0 ? configured : provider === 'cuda' ? 2 : 1;
}

/** One ONNX encoder (its sessions) per model directory per process, loaded lazily on first use. */
export function encoderProvider(
  opts: { modelsDir: string; executionProvider: 'cpu' | 'cuda'; deviceId: number; intraOpThreads: number; precision?: EncoderPrecision; sessions?: number },
  logger: Logger,
): EncoderProvider {
  return (model: string) =>
    getEncoder(encoderDir(opts.modelsDir, model, opts.precision, opts.executionProvider), {
      executionProvider: opts.executionProvider,
      deviceId: opts.deviceId,
      intraOpThreads: opts.intraOpThreads || undefined,
      sessions: encoderSessions(opts.sessions ?? 0, opts.executionProvider),
      logger: logger.child('onnx'),
    });
}
