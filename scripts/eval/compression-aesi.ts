/**
 * The SDR comparison inside `npm run eval -- compression --dataset DIR --aesi c:bits[,c:bits...]`:
 * at each (code size c, EDEN bits B), the same EDEN cross-layout quantiser over
 *   - PCA to c dims, no side information (`eden-{B}b-c{c}-cross`),
 *   - PCA to c dims of what the ridge predictor from the static embedding leaves (`...-side`),
 *   - SDR's AESI autoencoder with the static embedding as side information, trained with TF.js
 *     (@lateral/training trainAesi) on the same token sample (`aesi-{B}b-c{c}-h{width}`),
 * plus fp32, all written into real segments and scored by the sweep of compression-trec-dl.ts.
 * Flags: --aesi-width N (intermediate width, default 1536 as the paper), --aesi-epochs N (10),
 * --aesi-patience N (2), --aesi-batch N (256 tokens per Adam step). The sample is --sample-tokens
 * (shared with the PCA / ridge fits). Points with the same code size share one training (the bits
 * only change the EDEN stage over the code): `--aesi 8:5,8:4` trains once.
 */
import { aesiArtifact, type CodecArtifact } from '@lateral/codec';
import { CodecSettingsSchema, type CodecSettings } from '@lateral/shared';
import { trainAesi, type AesiTrainResult } from '@lateral/training';
import { CliUsageError, intFlag } from '../lib/cli';
import { compressionFlags } from './compression-flags';

export interface AesiSweepOptions {
  width: number;
  maxEpochs: number;
  patience: number;
  batchTokens: number;
}

/** What the sweep records of one AESI fit (JSON field `aesi` of its row). */
export interface AesiFitSummary {
  width: number;
  code_dims: number;
  sample_tokens: number;
  best_epoch: number;
  epochs: number;
  held_out_mse: number;
  held_out_rel_error: number;
  train_seconds: number;
  curve: { epoch: number; train_mse: number; val_mse: number; val_rel_error: number }[];
}

/** A sweep setting (compression-trec-dl.ts RerankSetting) that is an AESI codec. */
export interface AesiSetting {
  options: AesiSweepOptions;
  /** filled in by fitAesiSetting */
  summary?: AesiFitSummary;
}

interface SweepSetting {
  name: string;
  codec?: CodecSettings;
  aesi?: AesiSetting;
}

/** --aesi and its options, or null when the flag is absent. Points: "c:bits" comma-separated. */
export function parseAesiFlags(args: string[]): { points: { codeDims: number; bits: number }[]; options: AesiSweepOptions } | null {
  const v = compressionFlags(args);
  const spec = v.aesi;
  if (spec === undefined) return null;
  const points = spec.split(',').map((p) => {
    const [c, b] = p.split(':').map(Number);
    if (!Number.isInteger(c) || c < 2 || !Number.isInteger(b) || b < 1 || b > 8) throw new CliUsageError(`--aesi takes code size:bits pairs like 16:6,8:5, got '${p}'`);
    return { codeDims: c, bits: b };
  });
  return {
    points,
    options: { width: intFlag('aesi-width', v['aesi-width']), maxEpochs: intFlag('aesi-epochs', v['aesi-epochs']), patience: intFlag('aesi-patience', v['aesi-patience']), batchTokens: intFlag('aesi-batch', v['aesi-batch']) },
  };
}

/** fp32, then per point: no side information, ridge side information, AESI (same quantiser, same c and B). */
export function aesiComparisonSweep(points: { codeDims: number; bits: number }[], options: AesiSweepOptions): SweepSetting[] {
  const setting = (s: Partial<CodecSettings>, name: string): SweepSetting => ({ name, codec: CodecSettingsSchema.parse(s) });
  const out: SweepSetting[] = [setting({ kind: 'fp32' }, 'fp32')];
  for (const { codeDims: c, bits: b } of points) {
    out.push(setting({ kind: 'eden', bits: b, dims: c, layout: 'cross' }, `eden-${b}b-c${c}-cross`));
    out.push(setting({ kind: 'eden', bits: b, dims: c, layout: 'cross', sideInfo: true }, `eden-${b}b-c${c}-cross-side`));
    out.push({ ...setting({ kind: 'eden', bits: b, dims: c, layout: 'cross', sideInfo: true }, `aesi-${b}b-c${c}-h${options.width}`), aesi: { options } });
  }
  return out;
}

/** Fits of this process, per sample array: the same (code size, options, seed) trains once. */
const fits = new WeakMap<Float32Array, Map<string, AesiTrainResult>>();

/**
 * Trains the setting's AESI on the sweep's token sample (and its static rows) and returns its codec
 * artifact; a second setting with the same code size and options on the same sample reuses the fit.
 */
export async function fitAesiSetting(
  setting: { name: string; codec?: CodecSettings; aesi?: AesiSetting },
  sample: Float32Array,
  sampleStatic: Float32Array | undefined,
  d: number,
  sd: number,
  seed: number,
  log: (line: string) => void,
): Promise<CodecArtifact> {
  const s = setting.codec!;
  if (!setting.aesi || !sampleStatic) throw new Error(`${setting.name}: AESI needs the static embeddings of the sample`);
  const o = setting.aesi.options;
  const key = JSON.stringify({ c: s.dims, o, seed, sd });
  const bySample = fits.get(sample) ?? new Map<string, AesiTrainResult>();
  fits.set(sample, bySample);
  const cached = bySample.get(key);
  const res = cached ?? (await trainAesi(sample, sampleStatic, d, sd, {
      codeDims: s.dims!, width: o.width, seed, maxEpochs: o.maxEpochs, patience: o.patience, batchTokens: o.batchTokens,
      onProgress: (p) => {
        if (p.step === p.stepsPerEpoch) log(`  ${setting.name}: epoch ${p.epoch}/${p.maxEpochs} trained (train MSE ${p.loss.toExponential(3)}), ETA ${(p.etaSeconds / 60).toFixed(0)} min at most`);
      },
    }));
  bySample.set(key, res);
  if (cached) log(`  ${setting.name}: the c = ${s.dims} fit above (same code size, options and sample)`);
  else for (const e of res.curve) log(`  ${setting.name} epoch ${e.epoch}: train MSE ${e.trainMse.toExponential(3)}, held-out MSE ${e.valMse.toExponential(3)} (rel. error ${e.valRelError.toFixed(4)}), ${e.seconds.toFixed(0)} s`);
  setting.aesi.summary = {
    width: o.width,
    code_dims: s.dims!,
    sample_tokens: res.data.tokens,
    best_epoch: res.bestEpoch,
    epochs: res.curve.length,
    held_out_mse: res.heldOut.mse,
    held_out_rel_error: res.heldOut.relError,
    train_seconds: res.seconds,
    curve: res.curve.map((e) => ({ epoch: e.epoch, train_mse: e.trainMse, val_mse: e.valMse, val_rel_error: e.valRelError })),
  };
  return aesiArtifact(s, res.weights, BigInt(seed));
}
