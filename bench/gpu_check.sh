#!/usr/bin/env bash
# The CUDA backend's GPU check, in one go, for a machine with an NVIDIA GPU (written for
# one H200, sm_90) and nvcc: build gato with the CUDA module required, run the GPU tests
# (test/test_cuda_gpu.py: the kernels against the host run of the same code and against
# the CPU backend) and the host-side ones (test/test_cuda_core.py), then the solve-time
# benchmark CUDA vs CPU (bench/bench_cuda.py: median and spread per B and dtype).
#
#   bench/gpu_check.sh [OUT_DIR]      (default: $OUT, else build/gpu_check)
#
# Needs what scripts/setup.sh needs (PyPI for a fresh .venv, or the checkout's .venv and
# ../shared); the device machines of this workplace reach no registry, so there it needs a
# prepared checkout. Checked here only with bash -n and without a GPU (the build and test
# steps; the GPU tests skip): never run on a GPU yet.
#
# Writes OUT_DIR/{gpu.txt, build.log, build_time_s.txt, tests.log, junit.xml,
# bench_cuda.json, bench.log, summary.txt}; exits non-zero when the build or a test fails
# (the benchmark still runs after a test failure, so one run gives every figure).
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT_DIR="${1:-${OUT:-$ROOT/build/gpu_check}}"
mkdir -p "$OUT_DIR"
cd "$ROOT"
say() { echo "[gpu_check] $*" | tee -a "$OUT_DIR/summary.txt"; }
: > "$OUT_DIR/summary.txt"

{ nvidia-smi || echo "nvidia-smi: not available"; nvcc --version || echo "nvcc: not found"; } > "$OUT_DIR/gpu.txt" 2>&1
say "GPU: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)"

# 1. Build (the CUDA module required; 16 cores here: a parallel build).
t0=$(date +%s)
if GATO_CUDA=ON CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-8}" scripts/setup.sh > "$OUT_DIR/build.log" 2>&1; then
  echo $(( $(date +%s) - t0 )) > "$OUT_DIR/build_time_s.txt"
  say "build: ok in $(cat "$OUT_DIR/build_time_s.txt") s"
else
  say "build: FAILED (build.log)"
  tail -40 "$OUT_DIR/build.log"
  exit 2
fi
# shellcheck disable=SC1091
source scripts/activate.sh
python -c 'import gato; print("cuda_device:", gato.cuda_backend.cuda_device())' | tee -a "$OUT_DIR/summary.txt"

# 2. Tests: the GPU ones must run here (no skips allowed: GATO_REQUIRE_GPU=1).
rc=0
GATO_REQUIRE_GPU=1 timeout 900 python -m pytest test/test_cuda_gpu.py test/test_cuda_core.py -q -rs \
  --junitxml="$OUT_DIR/junit.xml" > "$OUT_DIR/tests.log" 2>&1 || rc=$?
say "tests: rc=$rc ($(tail -1 "$OUT_DIR/tests.log"))"

# 3. Benchmark: CUDA vs CPU solve time.
timeout 900 python bench/bench_cuda.py --B 1 16 128 1024 --N 32 --iters 1 --repeats 20 \
  --out "$OUT_DIR/bench_cuda.json" > "$OUT_DIR/bench.log" 2>&1 || { say "bench: FAILED (bench.log)"; rc=${rc:-3}; }
timeout 900 python bench/bench_cuda.py --B 1 128 --N 64 --iters 5 --repeats 10 \
  --out "$OUT_DIR/bench_cuda_n64.json" >> "$OUT_DIR/bench.log" 2>&1 || say "bench N=64: FAILED (bench.log)"
cat "$OUT_DIR/bench.log" | tee -a "$OUT_DIR/summary.txt"
exit $rc
