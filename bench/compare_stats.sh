#!/usr/bin/env bash
# Data-set statistics throughput: `outlierlens stats` against the same computation in Python with
# Debian's python3-torch (bench/stats_python.py), alternating C++ and Python for several rounds on the
# same machine, on the same MNLI pairs (the Python side reads the ids `outlierlens tokenize` writes)
# with the same batching (chunks of 1024 pairs sorted by length, batches of --batch, at most 2048
# padded tokens). The model is bert-base-sized with random weights on both sides (C++: a folder made
# once by `outlierlens create-model --preset bert-base`, cached; Python: bench/bert_forward_python.py).
#
# Both sides time the same thing: the forward passes and statistics over the batches (the C++ command
# prints it next to its whole run's rate, which also covers loading and hashing the model, tokenizing
# and writing the file: shown in parentheses); Python's model is made in memory and not timed. Run it on an
# otherwise idle machine: two busy OpenMP processes on two cores slow each other down many times over.
#   bench/compare_stats.sh [pairs=256] [rounds=3] [precision=fp32] [batch=16]
# Where the app chose other OpenBLAS kernels than Python's (bench/blas_kernels.sh), each round also times
# Python with the app's kernels.
# Environment: OUTLIERLENS_BIN (default build/app/outlierlens), OUTLIERLENS_BENCH_CACHE (default
# /tmp/outlierlens-bench: the bert-base folder and the ids), THREADS (default: all cores), STATS_ARGS
# (more options for `outlierlens stats`, e.g. "--workers 1").
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PAIRS="${1:-256}" ROUNDS="${2:-3}" PRECISION="${3:-fp32}" BATCH="${4:-16}"
BIN="${OUTLIERLENS_BIN:-${OUTLIERLENS_BUILD_DIR:-$ROOT/build}/app/outlierlens}"
CACHE="${OUTLIERLENS_BENCH_CACHE:-/tmp/outlierlens-bench}"
THREADS="${THREADS:-$(nproc)}"
STATS_ARGS="${STATS_ARGS:-}" # more `stats` options, e.g. "--workers 1" (one pass at a time, as Python)
PY=/usr/bin/python3
$PY -c "import torch" 2>/dev/null || { echo "needs Debian's python3-torch (apt-get install python3-torch)" >&2; exit 1; }
DATA="$ROOT/sample_data/mnli/mnli_dev_matched.jsonl"
MODEL="$CACHE/bert-base"
mkdir -p "$CACHE"
if [ ! -f "$MODEL/model.safetensors" ]; then
  rm -rf "$MODEL"
  "$BIN" create-model --preset bert-base --vocab "$ROOT/sample_data/bert/vocab.txt" --out "$MODEL" >/dev/null
fi
IDS="$CACHE/ids-$PAIRS.jsonl"
[ -s "$IDS" ] || "$BIN" tokenize --model "$MODEL" --data "mnli:$DATA:$PAIRS" >"$IDS"
APP="$BIN"
source "$ROOT/bench/blas_kernels.sh"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
echo "bert-base (random weights), $PAIRS MNLI pairs, batch $BATCH, $THREADS threads, C++ --precision $PRECISION, Python float32"
cpp=() loop=() py=() precision_args=()
[ "$PRECISION" = fp32 ] || precision_args=(--precision "$PRECISION") # fp32 is the default
for ((r = 1; r <= ROUNDS; r++)); do
  load=$(cut -d' ' -f1 /proc/loadavg)
  out=$("$BIN" stats --model "$MODEL" --data "mnli:$DATA:$PAIRS" --batch "$BATCH" --threads "$THREADS" \
    ${precision_args[@]+"${precision_args[@]}"} $STATS_ARGS --out "$TMP/stats.h5" 2>/dev/null)
  c=$(echo "$out" | sed -n 's/.*inputs in [0-9.]* s (\([0-9.]*\) per second.*/\1/p')
  l=$(echo "$out" | sed -n 's/.*; \([0-9.]*\) per second in the forward passes.*/\1/p')
  l=${l:-$c} # an older build prints only the whole command's rate
  p=$($PY "$ROOT/bench/stats_python.py" --ids "$IDS" --batch "$BATCH" --threads "$THREADS" |
    $PY -c 'import json,sys; print(json.load(sys.stdin)["per_second"])')
  $PY -c "print('round $r (load $load): C++ %.2f pairs/s in its passes (%.2f with loading and writing), Python %.2f pairs/s; C++/Python = %.2f (%.2f)' % ($l, $c, $p, $l / $p, $c / $p))"
  if [ -n "$APP_BLAS" ] && [ "$APP_BLAS" != "$PY_BLAS" ]; then
    k=$(OPENBLAS_CORETYPE="$APP_BLAS" $PY "$ROOT/bench/stats_python.py" --ids "$IDS" --batch "$BATCH" --threads "$THREADS" |
      $PY -c 'import json,sys; print(json.load(sys.stdin)["per_second"])')
    $PY -c "print('  Python with $APP_BLAS kernels %.2f pairs/s; C++/that = %.2f (%.2f)' % ($k, $l / $k, $c / $k))"
  fi
  cpp+=("$c") loop+=("$l") py+=("$p")
done
$PY - "${cpp[*]}" "${loop[*]}" "${py[*]}" <<'PYEOF'
import statistics, sys
c, l, p = ([float(x) for x in a.split()] for a in sys.argv[1:4])
ratios = [x / y for x, y in zip(l, p)]
print(f"median over rounds: C++ {statistics.median(l):.2f} pairs/s in its passes ({statistics.median(c):.2f} whole command), "
      f"Python {statistics.median(p):.2f} pairs/s; median of the rounds' C++/Python = {statistics.median(ratios):.2f}")
PYEOF
