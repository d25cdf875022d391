#!/usr/bin/env bash
# One call on the GPU host (through the .gpu recipe): build with CUDA, run the
# whole suite, then the named benches. Logs and bench results land in $OUT.
# Usage: bash .gpu/remote.sh bash scripts/gpu-run.sh [--packaged] [--no-tests] [bench args…]
#   --packaged: no build; the suite runs on the shipped binary, the
#   cusim-linux-x64-gnu tarball in build-packages/ (npm run build:binaries),
#   unpacked into node_modules/ where npm would install it (build/ is removed,
#   so the loader takes the platform package).
set -uo pipefail
out=${OUT:-/tmp/cusim-out}
mkdir -p "$out"
tests=1
packaged=0
if [ "${1:-}" = "--packaged" ]; then packaged=1; shift; fi
if [ "${1:-}" = "--no-tests" ]; then tests=0; shift; fi
{ nvidia-smi --query-gpu=index,name,driver_version,memory.total,clocks.sm --format=csv; nproc; } > "$out/host.txt" 2>&1
if [ $packaged = 1 ]; then
  tgz=$(ls build-packages/cusim-linux-x64-gnu-*.tgz 2> /dev/null | tail -1)
  [ -n "$tgz" ] || { echo "no build-packages/cusim-linux-x64-gnu-*.tgz: run npm run build:binaries"; exit 1; }
  rm -rf build build-packages/cusim-linux-x64-gnu node_modules/cusim-linux-x64-gnu
  for d in build-packages/cusim-linux-x64-gnu node_modules/cusim-linux-x64-gnu; do
    mkdir -p "$d" && tar -xzf "$tgz" -C "$d" --strip-components=1 || exit 1
  done
  sha256sum "$tgz" node_modules/cusim-linux-x64-gnu/cusim.node | tee -a "$out/host.txt"
  echo "installed $tgz into node_modules/ (no build/)"
else
  CUSIM_CUDA=on npx cmake-js compile > "$out/build.log" 2>&1 || { tail -40 "$out/build.log"; exit 1; }
  echo "build ok"; ldd build/Release/cusim.node | grep -Ei 'cuda|curand' && echo "WARNING: CUDA libraries linked dynamically"
fi
npm run build:ts > /dev/null 2>&1 || { echo "tsc failed"; exit 1; }
if [ $tests = 1 ]; then
  npx vitest run --reporter=verbose > "$out/tests.log" 2>&1; rc=$?
  grep -E '✗|×|FAIL|Error' "$out/tests.log" | head -40
  tail -8 "$out/tests.log"
  echo "vitest rc=$rc"
fi
if [ $# -gt 0 ]; then
  node bench/run.js "$@" --out "$out" > "$out/bench.log" 2>&1; echo "bench rc=$?"
  tail -c 6000 "$out/bench.log"
fi
