#!/usr/bin/env bash
# Training steps per second of the demo ViT, BERT MLM and Bigram-Backcopy decoder: `outlierlens train` against the same step in
# Python with Debian's python3-torch (bench/train_step_python.py), in float32 and in bf16 autocast,
# alternating C++ and Python for several rounds on the same machine. The C++ figure is taken from the
# run's own progress lines (elapsed seconds between step 5 and step 25: batch assembly included,
# evaluation and start-up excluded); the Python one uses pre-made random batches.
#   bench/compare_train_step.sh [rounds] [threads]
#   MODELS=bert-mlm bench/compare_train_step.sh ...   (one model only; default: vit-fmnist bert-mlm backcopy)
# Prints, per model and round, the four rates and the ratios C++ fp32 / Python fp32,
# C++ bf16 / Python fp32 and C++ bf16 / Python bf16, and at the end each ratio's median over the rounds
# (this machine's rates move by 20% or more from minute to minute: run several rounds). Where the app chose other OpenBLAS kernels than
# the library picks by itself (`outlierlens --version`, docs/performance.md), Python's float32 step is
# also timed with the app's kernels (OPENBLAS_CORETYPE), and C++ fp32 / that rate printed.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
APP="${OUTLIERLENS_BUILD_DIR:-$ROOT/build}/app/outlierlens"
PY=/usr/bin/python3
$PY -c "import torch" 2>/dev/null || { echo "needs Debian's python3-torch (apt-get install python3-torch)" >&2; exit 1; }
ROUNDS="${1:-3}"
THREADS="${2:-1}"
MODELS="${MODELS:-vit-fmnist bert-mlm backcopy}"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
cpp_rate() { # precision preset extra-args...
  local precision=$1 preset=$2; shift 2
  rm -rf "$TMP/run"
  "$APP" train --from-preset "$preset" --output "$TMP/run" "$@" --steps 30 --warmup-steps 5 \
    --precision "$precision" --threads "$THREADS" --log-every 5 --eval-every 1000 \
    --checkpoint-every 1000 --eval-batches 1 2>/dev/null |
    $PY -c '
import json, sys
t = {}
for line in sys.stdin:
    d = json.loads(line)
    if d.get("type") == "progress": t[d["step"]] = d["elapsed"]
print(20 / (t[25] - t[5]))'
}
source "$ROOT/bench/blas_kernels.sh"
py_rate() { # precision model
  $PY "$ROOT/bench/train_step_python.py" --model "$2" --steps 20 --threads "$THREADS" --precision "$1" |
    $PY -c 'import json,sys; print(json.load(sys.stdin)["steps_per_second"])'
}
cpp_model() { # precision model
  if [ "$2" = vit-fmnist ]; then cpp_rate "$1" demo-vit-fmnist
  elif [ "$2" = backcopy ]; then cpp_rate "$1" demo-backcopy
  else cpp_rate "$1" demo-bert-mlm --preset bert-tiny --num-layers 4 --num-heads 4; fi
}
for round in $(seq "$ROUNDS"); do
  for model in $MODELS; do
    c32=$(cpp_model fp32 $model)
    # Python on the app's kernels right after the C++ float32 step: the comparison of the two programs.
    k32=
    if [ -n "$APP_BLAS" ] && [ "$APP_BLAS" != "$PY_BLAS" ]; then k32=$(OPENBLAS_CORETYPE="$APP_BLAS" py_rate fp32 $model); fi
    p32=$(py_rate fp32 $model)
    c16=$(cpp_model bf16 $model); p16=$(py_rate bf16 $model)
    printf '%s round %d (steps/s): C++ fp32 %.3f, Python fp32 %.3f, C++ bf16 %.3f, Python bf16 %.3f\n' \
      "$model" "$round" "$c32" "$p32" "$c16" "$p16"
    $PY -c "print('  ratios: C++ fp32 / Python fp32 %.2f, C++ bf16 / Python fp32 %.2f, C++ bf16 / Python bf16 %.2f' % ($c32 / $p32, $c16 / $p32, $c16 / $p16))"
    $PY -c "print('$model|C++ fp32 / Python fp32|%f\n$model|C++ bf16 / Python fp32|%f\n$model|C++ bf16 / Python bf16|%f' % ($c32 / $p32, $c16 / $p32, $c16 / $p16))" >>"$TMP/ratios"
    if [ -n "$k32" ]; then
      $PY -c "print('  Python fp32 with $APP_BLAS kernels %.3f steps/s; C++ fp32 / that %.2f' % ($k32, $c32 / $k32))"
      $PY -c "print('$model|C++ fp32 / Python fp32 with $APP_BLAS kernels|%f' % ($c32 / $k32))" >>"$TMP/ratios"
    fi
  done
done
$PY - "$TMP/ratios" <<'PYEOF'
import statistics, sys
ratios = {}
for line in open(sys.argv[1]):
    model, name, value = line.rstrip("\n").split("|")
    ratios.setdefault((model, name), []).append(float(value))
for (model, name), values in ratios.items():
    print("%s, median of %d rounds: %s %.2f (%s)" % (model, len(values), name, statistics.median(values),
                                                   ", ".join("%.2f" % v for v in values)))
PYEOF
