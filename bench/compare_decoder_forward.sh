#!/usr/bin/env bash
# Alternates `outlierlens bench` on a LLaMA-family decoder folder and the Python reference
# (bench/decoder_forward_python.py, Debian's python3-torch) several rounds on the same machine, and
# prints each round's medians, peak RSS against the weights' size, and the ratio of the medians over
# all rounds. Each run is its own process, so peak RSS is that forward's own. Run it on an otherwise
# idle machine.
#   bench/compare_decoder_forward.sh MODEL_DIR [seq=256] [rounds=3] [runs=5]
# A TinyLlama-1.1B-shaped random model for it:
#   outlierlens create-model --preset tinyllama-1.1b --dtype bf16 --out /tmp/tinyllama-bf16
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MODEL="${1:?model folder}" SEQ="${2:-256}" ROUNDS="${3:-3}" RUNS="${4:-5}"
BIN="${OUTLIERLENS_BUILD_DIR:-$ROOT/build}/app/outlierlens"
PY=/usr/bin/python3
$PY -c "import torch" 2>/dev/null || { echo "needs Debian's python3-torch (apt-get install python3-torch)" >&2; exit 1; }
field() { $PY -c "import json,sys; d=json.load(sys.stdin); print(eval('d' + sys.argv[1]))" "$1"; }
cpp=() py=() pyfp32=()
for ((r = 1; r <= ROUNDS; r++)); do
  c=$("$BIN" bench --model "$MODEL" --seq "$SEQ" --runs "$RUNS" --warmup 1)
  p=$($PY "$ROOT/bench/decoder_forward_python.py" --model "$MODEL" --seq "$SEQ" --runs "$RUNS" --weights stream)
  f=$($PY "$ROOT/bench/decoder_forward_python.py" --model "$MODEL" --seq "$SEQ" --runs "$RUNS" --weights fp32)
  printf 'round %d: C++ %.0f ms (capture one layer %.0f ms), peak RSS %.0f MiB = %.2f x weights | ' "$r" \
    "$(echo "$c" | field '["no_capture_ms"]["median"]')" "$(echo "$c" | field '["capture_layer_ms"]["median"]')" \
    "$(echo "$c" | field '["peak_rss_mib"]')" "$(echo "$c" | field '["peak_rss_over_weights"]')"
  printf 'Python stream %.0f ms (%.0f ms), %.2f x | Python fp32 copy %.0f ms (%.0f ms), %.2f x\n' \
    "$(echo "$p" | field '["no_capture_ms"]["median"]')" "$(echo "$p" | field '["capture_layer_ms"]["median"]')" \
    "$(echo "$p" | field '["peak_rss_over_weights"]')" \
    "$(echo "$f" | field '["no_capture_ms"]["median"]')" "$(echo "$f" | field '["capture_layer_ms"]["median"]')" \
    "$(echo "$f" | field '["peak_rss_over_weights"]')"
  cpp+=("$(echo "$c" | field '["capture_layer_ms"]["median"]')")
  py+=("$(echo "$p" | field '["capture_layer_ms"]["median"]')")
  pyfp32+=("$(echo "$f" | field '["capture_layer_ms"]["median"]')")
done
$PY - "${cpp[*]}" "${py[*]}" "${pyfp32[*]}" <<'PYEOF'
import statistics, sys
c, p, f = ([float(x) for x in a.split()] for a in sys.argv[1:4])
mc, mp, mf = statistics.median(c), statistics.median(p), statistics.median(f)
print(f"capture-one-layer median over rounds: C++ {mc:.0f} ms, Python (same streaming) {mp:.0f} ms, "
      f"Python (fp32 copy) {mf:.0f} ms; C++/Python = {mc/mp:.3f} and {mc/mf:.3f}")
PYEOF
