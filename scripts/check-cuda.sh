#!/usr/bin/env bash
# Compiles every .cu under cuda/ (or the files given) for sm_90 without linking, to catch
# errors on machines that have nvcc but no GPU; .ci/run runs it where nvcc
# exists. Where nvcc has no cuRAND headers, scripts/cuda-shim stands in for
# them (compile-only). It stops at PTX (C++ front end and NVVM: every compile
# error, a quarter of the time); --full also runs ptxas, as the real build
# does, for register and shared-memory limits.
# Usage: scripts/check-cuda.sh [--full] [file.cu…]
set -euo pipefail
cd "$(dirname "$0")/.."
nvcc=${CUDACXX:-nvcc}
inc=(-Inative -I"$(node -p "require('node-addon-api').include_dir")")
if ! echo '#include <curand_kernel.h>' | "$nvcc" -x cu -E - -o /dev/null 2> /dev/null; then
  inc+=(-Iscripts/cuda-shim)
  echo "check-cuda: no cuRAND headers; compiling against scripts/cuda-shim"
fi
stage=-ptx
if [ "${1:-}" = --full ]; then stage=-c; shift; fi
files=("$@"); [ ${#files[@]} -gt 0 ] || mapfile -t files < <(find cuda -name '*.cu' | sort)
export nvcc stage
# Several files at once: each nvcc run is one core's work for minutes.
printf '%s\n' "${files[@]}" | xargs -P "$(nproc)" -I{} sh -c \
  '"$nvcc" -std=c++17 -arch=sm_90 -O3 --fmad=false --expt-relaxed-constexpr -DCUSIM_CUDA_ARCHITECTURES="\"90\"" "$@" $stage {} -o /dev/null && echo "ok {}"' \
  sh "${inc[@]}"
