#!/usr/bin/env bash
# Compiles src/main/cuda/*.cu into one fatbin (sm_80..sm_120, sm_90a for Hopper's wgmma, + compute_90 PTX) at OUT, and the
# portable kernels (--cuda-kernels portable: sm_80 PTX only, compiled by the driver for whatever GPU runs it) beside it as
# spindle-portable.fatbin.
# Usage: build-cuda.sh SRC_DIR OUT_FATBIN STAMP_FILE (rebuilds only when the sources changed)
# Skips with a message when nvcc is absent: the CUDA backend then reports itself unavailable.
set -euo pipefail
src="$1"; out="$2"; stamp="$3"
if ! command -v nvcc >/dev/null; then
  echo "spindle: nvcc not found: building without CUDA kernels (the CPU backend is unaffected)"; exit 0
fi
mkdir -p "$(dirname "$out")"
inputs=$(cat "$src"/*.cu "$src"/*.cuh | sha256sum | cut -c1-64)
if [ -f "$out" ] && [ -f "$(dirname "$out")/spindle-portable.fatbin" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$inputs" ]; then exit 0; fi
all="$(mktemp -d)/all.cu"
for f in "$src"/*.cu; do echo "#include \"$(readlink -f "$f")\""; done > "$all"
nvcc -fatbin -O3 -std=c++17 --compress-mode=size -I"$src" \
  -gencode arch=compute_80,code=sm_80 -gencode arch=compute_86,code=sm_86 -gencode arch=compute_89,code=sm_89 \
  -gencode arch=compute_90a,code=sm_90a -gencode arch=compute_100,code=sm_100 -gencode arch=compute_120,code=sm_120 \
  -gencode arch=compute_90,code=compute_90 -o "$out" "$all"
nvcc -fatbin -O3 -std=c++17 --compress-mode=size -I"$src" -gencode arch=compute_80,code=compute_80 \
  -o "$(dirname "$out")/spindle-portable.fatbin" "$all"
echo "$inputs" > "$stamp"
echo "spindle: CUDA kernels compiled into $out"
