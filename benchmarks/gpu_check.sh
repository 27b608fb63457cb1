#!/usr/bin/env bash
# One short check of seqlab on this machine's GPUs, under 8 minutes (--budget, default 450 s): the bf16 matmul
# peak measured beside the card's datasheet dense bf16 peak, which attention kernel PyTorch runs for seqlab's
# transformers, then tokens/s and MFU of short `seqlab train lm` runs (bf16, --compile, --fused-output on) of the
# Shakespeare char transformer, a word LSTM and a GPT-2-small-shaped transformer trained from a prepared corpus,
# and the last again under DDP (torchrun) over every GPU when PyTorch sees more than one. Rows in
# benchmarks/results/gpu.json (or --output); the details in benchmarks/gpu_check.py.
#
# It starts on a bare copy of the repository (no .venv, no ../shared, seqlab not installed):
#   Python   $PYTHON, else .venv/bin/python, else python3: the first that imports torch (a GPU machine usually
#            has it). With none, a venv in $GPU_CHECK_DEPS gets torch from pip.
#   packages seqlab's own (numpy, safetensors, tokenizers, tqdm, matplotlib, pyyaml): only the missing ones are
#            installed, into a venv that sees the interpreter's packages (--system-site-packages), or with
#            `pip install --target` where that cannot be made; $GPU_CHECK_DEPS (default /tmp/seqlab-gpu-check-
#            deps) holds them. Offline, pip reads PIP_NO_INDEX=1 PIP_FIND_LINKS=DIR (a folder of wheels).
#   seqlab   from this copy: PYTHONPATH=src.
#   data     ../shared/data (or --data-dir) when it holds tinyshakespeare/ and wikitext-2/; else the Tiny
#            Shakespeare bundled in src/seqlab/corpora, and a synthetic corpus for the GPT-2-shaped run.
#
#   bash benchmarks/gpu_check.sh                                   # every GPU PyTorch sees
#   bash benchmarks/gpu_check.sh --output $OUT/gpu.json --budget 400
#   bash benchmarks/gpu_check.sh --dry-run --output /tmp/gpu.json  # CPU, a minute: checks the script itself
set -euo pipefail
cd "$(dirname "$0")/.."
DEPS=${GPU_CHECK_DEPS:-${TMPDIR:-/tmp}/seqlab-gpu-check-deps}
say() { echo "gpu_check: $*" >&2; }

has_torch() { [ -n "$1" ] && "$1" -c 'import torch' >/dev/null 2>&1; }

PY=${PYTHON:-}
if [ -n "$PY" ]; then
  has_torch "$PY" || { say "PYTHON=$PY cannot import torch"; exit 1; }
else
  for candidate in .venv/bin/python "$(command -v python3 || true)" "$DEPS/venv/bin/python"; do
    if [ -x "$candidate" ] && has_torch "$candidate"; then PY=$candidate; break; fi
  done
fi
if [ -z "$PY" ]; then                           # no torch anywhere: a venv of our own, torch from pip
  BASE=$(command -v python3 || true)
  [ -n "$BASE" ] || { say "no python3 on this machine"; exit 1; }
  say "no Python here imports torch: installing it into $DEPS/venv (pip; minutes)"
  "$BASE" -m venv "$DEPS/venv" && "$DEPS/venv/bin/python" -m pip install -q torch \
    || { say "could not install torch (no network? set PIP_NO_INDEX=1 PIP_FIND_LINKS=DIR of wheels, or PYTHON)"
         exit 1; }
  PY=$DEPS/venv/bin/python
fi

# seqlab's own dependencies (import name:pip name), those the check's commands import; $GPU_CHECK_EXTRA adds more
MODULES="numpy:numpy safetensors:safetensors tokenizers:tokenizers tqdm:tqdm matplotlib:matplotlib yaml:pyyaml"
MODULES="$MODULES ${GPU_CHECK_EXTRA:-}"
missing() {
  "$1" - $MODULES <<'EOF'
import importlib.util, sys
print(" ".join(pair.split(":")[1] for pair in sys.argv[1:] if importlib.util.find_spec(pair.split(":")[0]) is None))
EOF
}
MISSING=$(missing "$PY")
EXTRA=""
if [ -n "$MISSING" ]; then
  say "$PY lacks $MISSING: installing them"
  in_venv=$("$PY" -c 'import sys; print(int(sys.prefix != sys.base_prefix))')
  if [ "$in_venv" = 0 ] && { [ -x "$DEPS/site-venv/bin/python" ] || "$PY" -m venv --system-site-packages \
       "$DEPS/site-venv" >/dev/null 2>&1; } && "$DEPS/site-venv/bin/python" -m pip install -q $MISSING; then
    PY=$DEPS/site-venv/bin/python               # the interpreter's packages (torch) and the new ones
  elif "$PY" -m pip install -q --target "$DEPS/site" $MISSING; then
    EXTRA=$DEPS/site                            # a venv's own interpreter, or no venv module: beside it
  else
    say "could not install $MISSING (no network? set PIP_NO_INDEX=1 PIP_FIND_LINKS=DIR of wheels)"; exit 1
  fi
fi
export PYTHONPATH="$PWD/src${EXTRA:+:$EXTRA}${PYTHONPATH:+:$PYTHONPATH}"
MISSING=$(missing "$PY")
[ -z "$MISSING" ] || { say "still missing after the install: $MISSING"; exit 1; }

if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi -L || true                         # shown only: it lists MIG instances too; PyTorch counts the GPUs
fi
say "python $PY; seqlab from $("$PY" -c 'import seqlab, os; print(os.path.dirname(seqlab.__file__))')"
exec "$PY" benchmarks/gpu_check.py "$@"
