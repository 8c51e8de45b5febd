#!/usr/bin/env bash
# Training steps per second of the demo ViT and BERT: `outlierlens train` against the same step in
# Python with Debian's python3-torch (bench/train_step_python.py), alternating the two for several
# rounds on the same machine. The C++ figure is taken from the run's own progress lines (elapsed
# seconds between step 5 and step 45: batch assembly included, evaluation and start-up excluded);
# the Python one uses pre-made random batches.
#   bench/compare_train_step.sh [rounds] [threads]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
APP="${OUTLIERLENS_BUILD_DIR:-$ROOT/build}/app/outlierlens"
PY=/usr/bin/python3
$PY -c "import torch" 2>/dev/null || { echo "needs Debian's python3-torch (apt-get install python3-torch)" >&2; exit 1; }
ROUNDS="${1:-3}"
THREADS="${2:-1}"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
cpp_rate() { # preset extra-args...
  local preset=$1; shift
  rm -rf "$TMP/run"
  "$APP" train --from-preset "$preset" --output "$TMP/run" "$@" --steps 50 --warmup-steps 5 \
    --threads "$THREADS" --log-every 5 --eval-every 1000 --checkpoint-every 1000 --eval-batches 1 2>/dev/null |
    $PY -c '
import json, sys
t = {}
for line in sys.stdin:
    d = json.loads(line)
    if d.get("type") == "progress": t[d["step"]] = d["elapsed"]
print(40 / (t[45] - t[5]))'
}
for round in $(seq "$ROUNDS"); do
  for model in vit-fmnist bert-mlm; do
    if [ $model = vit-fmnist ]; then c=$(cpp_rate demo-vit-fmnist); else
      c=$(cpp_rate demo-bert-mlm --preset bert-tiny --num-layers 4 --num-heads 4); fi
    p=$($PY "$ROOT/bench/train_step_python.py" --model $model --steps 40 --threads "$THREADS" |
        $PY -c 'import json,sys; print(json.load(sys.stdin)["steps_per_second"])')
    printf '%s round %d: C++ %.3f steps/s, Python %.3f steps/s, ratio %.3f\n' "$model" "$round" "$c" "$p" \
      "$($PY -c "print($c / $p)")"
  done
done
