#!/usr/bin/env bash
# The CUDA backend's GPU check, in one go, for a machine with an NVIDIA GPU (written for
# one H200, sm_90). Three stages, each one running even when a later one cannot:
#   0. standalone (needs only the GPU driver, plus nvcc when no prebuilt binary is there):
#      build/gato_core/gato_cuda_check (built by scripts/setup.sh where nvcc is found; else
#      compiled here with nvcc from the two sources) on bench/cuda_models/iiwa14.devmodel:
#      the kernels against the host run of the same code (double and float32, bdsv / pcg /
#      bdsv_first, B = 64, 5 SQP iterations), the feedback gains' one-thread launch against
#      the host run, the plans with the EE orientation term on (orientation_gpu_vs_host), and
#      the GPU solve time per B (median / spread).
#      No Python, no pinocchio: this stage works on a bare device machine.
#   1. build gato with the CUDA module required (GATO_CUDA=ON scripts/setup.sh: needs what
#      setup.sh needs, PyPI for a fresh .venv or the checkout's .venv and ../shared);
#   2. the GPU tests (test/test_cuda_gpu.py: the kernels through gato.BSQP against the host
#      run and the CPU backend; GATO_REQUIRE_GPU=1 turns a missing device into a failure)
#      and the host-side ones (test/test_cuda_core.py);
#   3. the solve-time benchmark CUDA vs CPU through gato.BSQP (bench/bench_cuda.py).
# Checked here without a GPU only (stage 0 reports "no device" and exits 2; the GPU tests
# skip): never run on a GPU yet.
#
#   bench/gpu_check.sh [OUT_DIR] [--standalone-only]    (OUT_DIR default: $OUT, else build/gpu_check)
#
# Writes OUT_DIR/{gpu.txt, standalone.jsonl, build.log, build_time_s.txt, tests.log,
# junit.xml, bench_cuda.json, bench.log, summary.txt}. Exit status: 0 all passed, 1 a GPU
# check failed, 2 stage 0 could not run, 3 the build failed.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT_DIR="${OUT:-$ROOT/build/gpu_check}"
ONLY0=0
for a in "$@"; do
  case "$a" in --standalone-only) ONLY0=1 ;; *) OUT_DIR="$a" ;; esac
done
mkdir -p "$OUT_DIR"
cd "$ROOT"
: > "$OUT_DIR/summary.txt"
say() { echo "[gpu_check] $*" | tee -a "$OUT_DIR/summary.txt"; }

{ nvidia-smi || echo "nvidia-smi: not available"; nvcc --version || echo "nvcc: not found"; } > "$OUT_DIR/gpu.txt" 2>&1
say "GPU: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)"
rc=0

# 0. Standalone.
BIN="$ROOT/build/gato_core/gato_cuda_check"
if [[ ! -x "$BIN" ]] && command -v nvcc > /dev/null; then
  BIN="$OUT_DIR/gato_cuda_check"
  say "compiling gato_cuda_check with nvcc (sm_90)"
  nvcc -O3 -std=c++17 -gencode arch=compute_90,code=sm_90 -Isrc/gato_core/cuda/include -Isrc/gato_core/cuda/src \
    src/gato_core/cuda/src/kernels.cu src/gato_core/cuda/tools/gato_cuda_check.cpp -o "$BIN" >> "$OUT_DIR/gpu.txt" 2>&1 \
    || say "nvcc: FAILED (gpu.txt)"
fi
if [[ -x "$BIN" ]]; then
  timeout 900 "$BIN" bench/cuda_models/iiwa14.devmodel --iters 5 --N 32 --repeats 10 --B 1,16,128,1024 \
    > "$OUT_DIR/standalone.jsonl" 2>&1
  s0=$?
  cat "$OUT_DIR/standalone.jsonl" >> "$OUT_DIR/summary.txt"
  say "standalone: rc=$s0 (0 ok, 1 GPU differs from host, 2 no device / CUDA error)"
  [[ $s0 -ne 0 ]] && rc=$(( s0 == 1 ? 1 : 2 ))
else
  say "standalone: no gato_cuda_check and no nvcc to build it"
  rc=2
fi
[[ $ONLY0 == 1 ]] && exit $rc

# 1. Build (the CUDA module required; 16 cores on the H200 machine: a parallel build).
t0=$(date +%s)
if GATO_CUDA=ON CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-8}" scripts/setup.sh > "$OUT_DIR/build.log" 2>&1; then
  echo $(( $(date +%s) - t0 )) > "$OUT_DIR/build_time_s.txt"
  say "build: ok in $(cat "$OUT_DIR/build_time_s.txt") s"
else
  say "build: FAILED (build.log)"
  tail -40 "$OUT_DIR/build.log"
  exit 3
fi
# shellcheck disable=SC1091
source scripts/activate.sh
python -c 'import gato; print("cuda_device:", gato.cuda_backend.cuda_device())' | tee -a "$OUT_DIR/summary.txt"

# 2. Tests: the GPU ones must run here (no skips: GATO_REQUIRE_GPU=1).
t=0
GATO_REQUIRE_GPU=1 timeout 900 python -m pytest test/test_cuda_gpu.py test/test_cuda_core.py -q -rs \
  --junitxml="$OUT_DIR/junit.xml" > "$OUT_DIR/tests.log" 2>&1 || t=$?
say "tests: rc=$t ($(tail -1 "$OUT_DIR/tests.log"))"
[[ $t -ne 0 ]] && rc=1

# 3. Benchmark: CUDA vs CPU solve time through gato.BSQP.
timeout 900 python bench/bench_cuda.py --B 1 16 128 1024 --N 32 --iters 1 --repeats 20 \
  --out "$OUT_DIR/bench_cuda.json" > "$OUT_DIR/bench.log" 2>&1 || say "bench: FAILED (bench.log)"
cat "$OUT_DIR/bench.log" >> "$OUT_DIR/summary.txt"
exit $rc
