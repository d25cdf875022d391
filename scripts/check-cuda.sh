#!/usr/bin/env bash
# Developer aid: compile every cuda/*.cu for sm_90 without linking, to catch
# errors on machines that have nvcc but no GPU. Usage: scripts/check-cuda.sh [file.cu…]
set -euo pipefail
cd "$(dirname "$0")/.."
nvcc=${CUDACXX:-nvcc}
inc=(-Inative -I"$(node -p "require('node-addon-api').include_dir")")
[ -d .cuda-shim ] && inc+=(-I.cuda-shim)
files=("$@"); [ ${#files[@]} -gt 0 ] || files=(cuda/*.cu)
for f in "${files[@]}"; do
  "$nvcc" -std=c++17 -arch=sm_90 -O3 --fmad=false --expt-relaxed-constexpr -DCUSIM_WITH_CUDA=1 -DCUSIM_CUDA_ARCHITECTURES='"90"' "${inc[@]}" -c "$f" -o /dev/null
  echo "ok $f"
done
