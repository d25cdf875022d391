#!/usr/bin/env bash
# One call on the GPU host (through the .gpu recipe): build with CUDA, run the
# whole suite, then the named benches. Logs and bench results land in $OUT.
# Usage: bash .gpu/remote.sh bash scripts/gpu-run.sh [--no-tests] [bench args…]
set -uo pipefail
out=${OUT:-/tmp/cusim-out}
mkdir -p "$out"
tests=1
if [ "${1:-}" = "--no-tests" ]; then tests=0; shift; fi
{ nvidia-smi --query-gpu=index,name,driver_version,memory.total,clocks.sm --format=csv; nproc; } > "$out/host.txt" 2>&1
CUSIM_CUDA=on npx cmake-js compile > "$out/build.log" 2>&1 || { tail -40 "$out/build.log"; exit 1; }
echo "build ok"; ldd build/Release/cusim.node | grep -Ei 'cuda|curand' && echo "WARNING: CUDA libraries linked dynamically"
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
