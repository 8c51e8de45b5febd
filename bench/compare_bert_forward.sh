#!/usr/bin/env bash
# Alternates `outlierlens bench` and the Python reference (bench/bert_forward_python.py, Debian's
# python3-torch) several rounds on the same machine and prints each round's medians and the ratio
# of the medians over all rounds. Run it on an otherwise idle machine: two busy OpenMP processes
# on two cores slow each other down many times over.
#   bench/compare_bert_forward.sh [config=bert-base] [seq=128] [rounds=6] [runs=20]
#   PRECISION=bf16 bench/compare_bert_forward.sh ...   (the C++ side in its bf16 fast mode; Python stays float32)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CONFIG="${1:-bert-base}" SEQ="${2:-128}" ROUNDS="${3:-6}" RUNS="${4:-20}"
BIN="${OUTLIERLENS_BUILD_DIR:-$ROOT/build}/app/outlierlens"
PY=/usr/bin/python3
$PY -c "import torch" 2>/dev/null || { echo "needs Debian's python3-torch (apt-get install python3-torch)" >&2; exit 1; }
cpp=() py=() cppraw=() pyraw=()
for ((r = 1; r <= ROUNDS; r++)); do
  c=$("$BIN" bench --config "$CONFIG" --seq "$SEQ" --runs "$RUNS" --precision "${PRECISION:-fp32}")
  p=$($PY "$ROOT/bench/bert_forward_python.py" --config "$CONFIG" --seq "$SEQ" --runs "$RUNS")
  cm=$(echo "$c" | $PY -c 'import json,sys; print(json.load(sys.stdin)["capture_all_ms"]["median"])')
  pm=$(echo "$p" | $PY -c 'import json,sys; print(json.load(sys.stdin)["capture_all_ms"]["median"])')
  cn=$(echo "$c" | $PY -c 'import json,sys; print(json.load(sys.stdin)["no_capture_ms"]["median"])')
  pn=$(echo "$p" | $PY -c 'import json,sys; print(json.load(sys.stdin)["no_capture_ms"]["median"])')
  printf 'round %d: C++ capture-all %.1f ms, no capture %.1f ms | Python capture-all %.1f ms, no capture %.1f ms\n' \
    "$r" "$cm" "$cn" "$pm" "$pn"
  cpp+=("$cm") py+=("$pm") cppraw+=("$cn") pyraw+=("$pn")
done
$PY - "${cpp[*]}" "${py[*]}" "${cppraw[*]}" "${pyraw[*]}" <<'PYEOF'
import statistics, sys
c, p, cn, pn = ([float(x) for x in a.split()] for a in sys.argv[1:5])
mc, mp = statistics.median(c), statistics.median(p)
print(f"capture-all median over rounds: C++ {mc:.1f} ms, Python {mp:.1f} ms, C++/Python = {mc/mp:.3f}")
print(f"no-capture median over rounds:  C++ {statistics.median(cn):.1f} ms, Python {statistics.median(pn):.1f} ms, "
      f"C++/Python = {statistics.median(cn)/statistics.median(pn):.3f}")
PYEOF
