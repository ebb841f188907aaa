#!/usr/bin/env bash
# vLLM's `"method": "suffix"` (SuffixDecoding, a baseline of `bench --engine vllm`) needs the
# `arctic_inference.suffix_decoding` package: SuffixDecodingCache and its nanobind C++ module.
# PyPI has arctic-inference only as a source archive, whose build wants CUDA and a torch of its
# own. This builds just its suffix tree (plain C++ under csrc/suffix_decoding) for the CPU.
#
# usage: VENV=.venv-vllm bash scripts/build_arctic.sh [lean|pip]     (default: lean; `make serve-env` runs it)
#   lean : download the arctic-inference sdist, build ONLY csrc/suffix_decoding (cmake + nanobind
#          2.9.2, no torch, no CUDA), and pip-install a small package holding
#          arctic_inference/{__init__.py, suffix_decoding/{__init__,cache}.py, _C*.so}. No vLLM
#          plugin entry point. About a minute and 35 MB of downloads here (cmake: the system's).
#   pip  : plain `pip install arctic-inference==$ARCTIC_VERSION` (what vLLM's error message says;
#          the way on a GPU machine). On a CPU-only machine its isolated build pulls a CUDA torch
#          and nvidia-* wheels (about 3 GB) only to read torch's cmake path.
# env: VENV (default .venv-vllm), ARCTIC_VERSION (default 0.1.1, what vLLM 0.32 asks for),
#      WORK (default a fresh temporary folder, removed afterwards)
set -euo pipefail
MODE=${1:-lean}
VENV=${VENV:-.venv-vllm}
[ -x "$VENV/bin/python" ] || { echo "no python at $VENV/bin/python (set VENV)"; exit 1; }
PY=$(cd "$VENV" && pwd)/bin/python
VER=${ARCTIC_VERSION:-0.1.1}
WORK=${WORK:-$(mktemp -d /tmp/arctic-build.XXXXXX)}
pip() { "$PY" -m pip --disable-pip-version-check "$@"; }

check() {
  (cd /tmp && "$PY" - <<'PYEOF'
import numpy as np
from arctic_inference.suffix_decoding import SuffixDecodingCache
c = SuffixDecodingCache(max_tree_depth=24, max_cached_requests=100)
c.start_request("r", np.array([1, 2, 3, 4, 5, 1, 2, 3, 4, 6], dtype=np.int32))
c.add_active_response("r", [1, 2, 3])
d = c.speculate("r", np.array([1, 2, 3], dtype=np.int32), max_spec_tokens=8, max_spec_factor=1.0, min_token_prob=0.1)
assert list(d.token_ids)[:1] == [4], d.token_ids
print("arctic-inference suffix tree OK:", list(d.token_ids))
PYEOF
  )
}

case "$MODE" in
lean)
  command -v cmake >/dev/null || { echo "needs cmake >= 3.18 (apt-get install cmake, or pip install cmake)"; exit 1; }
  mkdir -p "$WORK"; cd "$WORK"
  pip download -q --no-binary :all: --no-deps --no-build-isolation "arctic-inference==$VER" -d .
  tar xzf "arctic_inference-$VER.tar.gz"
  SRC="$WORK/arctic_inference-$VER"
  # nanobind for the build only (its CMakeLists asks `python -m nanobind --cmake_dir`), not into the venv
  pip install -q --target "$WORK/pydeps" "nanobind==2.9.2"
  PYTHONPATH="$WORK/pydeps" cmake -S "$SRC/csrc/suffix_decoding" -B "$WORK/build" \
      -DPython_EXECUTABLE="$PY" -DCMAKE_BUILD_TYPE=Release >"$WORK/cmake-configure.log"
  nice -n 5 cmake --build "$WORK/build" -j "$(nproc)" >"$WORK/cmake-build.log"
  PKG="$WORK/pkg"; mkdir -p "$PKG/arctic_inference/suffix_decoding"
  cp "$SRC/arctic_inference/__init__.py" "$PKG/arctic_inference/"
  cp "$SRC/arctic_inference/suffix_decoding/__init__.py" "$SRC/arctic_inference/suffix_decoding/cache.py" \
     "$PKG/arctic_inference/suffix_decoding/"
  cp "$WORK"/build/_C*.so "$PKG/arctic_inference/suffix_decoding/"
  cp "$SRC/LICENSE" "$PKG/"
  cat >"$PKG/pyproject.toml" <<TOML
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"
[project]
name = "arctic-inference"
version = "$VER+suffixonly"
description = "Only the SuffixDecoding tree of Snowflake ArcticInference $VER (Apache-2.0), built for CPU"
dependencies = ["numpy"]
[tool.setuptools]
packages = ["arctic_inference", "arctic_inference.suffix_decoding"]
[tool.setuptools.package-data]
"arctic_inference.suffix_decoding" = ["*.so"]
TOML
  pip uninstall -y -q arctic-inference 2>/dev/null || true
  # the venv has setuptools (vLLM pulls it), so no isolated build environment is needed
  pip install -q --no-build-isolation --no-deps "$PKG"
  rm -rf "$WORK"
  ;;
pip)
  pip install -q "arctic-inference==$VER"
  ;;
*) echo "unknown mode $MODE (lean or pip)"; exit 2;;
esac
check
