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
# Python's float32 copy needs 4 bytes per weight: skipped when that exceeds 90% of the machine's memory
# (an 8B model: 32 GB), and said so.
WEIGHT_BYTES=$(stat -c %s "$MODEL"/model*.safetensors | awk '{s += $1} END {printf "%.0f\n", s}')
MEM_BYTES=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) * 1024 ))
STORED=$($PY -c "import json,sys; print(json.load(open(sys.argv[1])).get('torch_dtype') or 'float32')" "$MODEL/config.json")
FP32_BYTES=$WEIGHT_BYTES; [[ "$STORED" == float32 ]] || FP32_BYTES=$(( WEIGHT_BYTES * 2 ))
FP32=1; (( FP32_BYTES * 10 > MEM_BYTES * 9 )) && FP32=0 && \
  echo "Python's float32 copy ($((FP32_BYTES >> 30)) GiB) does not fit this machine's $((MEM_BYTES >> 30)) GiB: not run" >&2
cpp=() py=() pyfp32=()
for ((r = 1; r <= ROUNDS; r++)); do
  c=$("$BIN" bench --model "$MODEL" --seq "$SEQ" --runs "$RUNS" --warmup 1)
  p=$($PY "$ROOT/bench/decoder_forward_python.py" --model "$MODEL" --seq "$SEQ" --runs "$RUNS" --weights stream)
  f='{"no_capture_ms": {"median": 0}, "capture_layer_ms": {"median": 0}, "peak_rss_over_weights": 0}'
  ((FP32)) && f=$($PY "$ROOT/bench/decoder_forward_python.py" --model "$MODEL" --seq "$SEQ" --runs "$RUNS" --weights fp32)
  printf 'round %d: C++ %.0f ms (capture one layer %.0f ms), peak RSS %.0f MiB = %.2f x weights | ' "$r" \
    "$(echo "$c" | field '["no_capture_ms"]["median"]')" "$(echo "$c" | field '["capture_layer_ms"]["median"]')" \
    "$(echo "$c" | field '["peak_rss_mib"]')" "$(echo "$c" | field '["peak_rss_over_weights"]')"
  printf 'Python stream %.0f ms (%.0f ms), %.2f x | ' \
    "$(echo "$p" | field '["no_capture_ms"]["median"]')" "$(echo "$p" | field '["capture_layer_ms"]["median"]')" \
    "$(echo "$p" | field '["peak_rss_over_weights"]')"
  if ((FP32)); then
    printf 'Python fp32 copy %.0f ms (%.0f ms), %.2f x\n' \
      "$(echo "$f" | field '["no_capture_ms"]["median"]')" "$(echo "$f" | field '["capture_layer_ms"]["median"]')" \
      "$(echo "$f" | field '["peak_rss_over_weights"]')"
  else
    printf 'Python fp32 copy not run\n'
  fi
  cpp+=("$(echo "$c" | field '["capture_layer_ms"]["median"]')")
  py+=("$(echo "$p" | field '["capture_layer_ms"]["median"]')")
  pyfp32+=("$(echo "$f" | field '["capture_layer_ms"]["median"]')")
done
$PY - "${cpp[*]}" "${py[*]}" "${pyfp32[*]}" <<'PYEOF'
import statistics, sys
c, p, f = ([float(x) for x in a.split()] for a in sys.argv[1:4])
mc, mp, mf = statistics.median(c), statistics.median(p), statistics.median(f)
fp32 = f"Python (fp32 copy) {mf:.0f} ms; " if mf > 0 else "Python (fp32 copy) not run; "
ratio = f" and {mc/mf:.3f}" if mf > 0 else ""
print(f"capture-one-layer median over rounds: C++ {mc:.0f} ms, Python (same streaming) {mp:.0f} ms, "
      f"{fp32}C++/Python = {mc/mp:.3f}{ratio}")
PYEOF
