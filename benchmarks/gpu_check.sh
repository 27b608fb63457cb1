#!/usr/bin/env bash
# One short check of seqlab on this machine's GPUs (under 8 minutes on one H100): the bf16 matmul peak, then
# tokens/s and MFU of short `seqlab train lm` runs (bf16, --compile, --fused-output on) of the Shakespeare
# char transformer, the wikitext-2 word LSTM and a GPT-2-small-shaped transformer trained from a prepared
# corpus, and the last again under DDP (torchrun) over every GPU when there are several. Rows in
# benchmarks/results/gpu.json; the details in benchmarks/gpu_check.py.
#
#   bash benchmarks/gpu_check.sh                          # data from ../shared/data
#   bash benchmarks/gpu_check.sh --data-dir DIR --steps 200
#   bash benchmarks/gpu_check.sh --dry-run --output /tmp/gpu.json   # CPU, seconds: checks the script itself
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-}
if [ -z "$PYTHON" ]; then
  if [ -x .venv/bin/python ]; then PYTHON=.venv/bin/python; else PYTHON=python3; fi
fi
GPUS=0
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi -L || true
  GPUS=$(nvidia-smi -L 2>/dev/null | wc -l)
fi
ARGS=()
if [ "$GPUS" -gt 0 ]; then ARGS=(--gpus "$GPUS"); fi   # DDP over all of them when more than one
exec "$PYTHON" benchmarks/gpu_check.py ${ARGS[@]+"${ARGS[@]}"} "$@"
