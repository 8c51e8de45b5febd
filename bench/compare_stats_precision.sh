#!/usr/bin/env bash
# What `outlierlens stats --precision bf16` changes: runs `stats` in fp32 and in bf16 on the same data and
# prints, per model, how well the bf16 statistics agree with the fp32 ones:
#   - outlier counts: sum over bins of min(fp32, bf16) / sum of max(fp32, bf16), over every count the
#     file holds (outliers per hidden dimension and per token string, or per patch and CLS, of attn_out,
#     ffn_out, residual and out in every layer); 1.0 = identical. Also the total outlier values of each.
#   - max inf norm: the model's (summary/max_inf_norm) relative difference, and the largest relative
#     difference of any layer's and tensor's mean max inf norm.
# Models: the bundled demo models (sample_data/models: BERT on MNLI pairs, ViT on sample_data/images
# and, where Debian's dataset-fashion-mnist is installed, also on the first [pairs] images of its test
# set, the ViTs' own data; decoders on chunks of sample_data/text/wiki_en_valid.txt) and
# a bert-base-sized BERT with random weights (made once by `outlierlens create-model`, cached).
# Needs Debian's python3-h5py. On a CPU without bf16 instructions stats falls back to fp32 (and says so).
#   bench/compare_stats_precision.sh [pairs=256] [models...]
# Environment: OUTLIERLENS_BIN (default build/app/outlierlens), OUTLIERLENS_BENCH_CACHE (default
# /tmp/outlierlens-bench), THREADS (default: all cores), K (the sigma rule's k, default 6).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PAIRS="${1:-256}"
shift || true
BIN="${OUTLIERLENS_BIN:-${OUTLIERLENS_BUILD_DIR:-$ROOT/build}/app/outlierlens}"
CACHE="${OUTLIERLENS_BENCH_CACHE:-/tmp/outlierlens-bench}"
THREADS="${THREADS:-$(nproc)}"
K="${K:-6}" # the sigma rule's k (a random bert-base has no outliers at 6: try K=4)
PY=/usr/bin/python3
$PY -c "import h5py" 2>/dev/null || { echo "needs Debian's python3-h5py (apt-get install python3-h5py)" >&2; exit 1; }
DATA="$ROOT/sample_data/mnli/mnli_dev_matched.jsonl"
if [ $# -gt 0 ]; then
  MODELS=("$@")
else
  MODELS=("$ROOT"/sample_data/models/* bert-base)
fi
FMNIST=/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz
RUNS=()
mkdir -p "$CACHE"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
for model in "${MODELS[@]}"; do
  name=$(basename "$model")
  if [ "$model" = bert-base ]; then
    model="$CACHE/bert-base"
    name="bert-base (random weights)"
    if [ ! -f "$model/model.safetensors" ]; then
      rm -rf "$model"
      "$BIN" create-model --preset bert-base --vocab "$ROOT/sample_data/bert/vocab.txt" --out "$model" >/dev/null
    fi
  fi
  if grep -q '"model_type": *"\(gpt2\|opt\|llama\)"' "$model/config.json" 2>/dev/null; then
    data="text:$ROOT/sample_data/text/wiki_en_valid.txt:$PAIRS" # decoders: chunks of the sample text
  elif grep -q '"model_type": *"vit"\|"architecture"' "$model/config.json" 2>/dev/null || [ ! -f "$model/vocab.txt" ]; then
    data="images:$ROOT/sample_data/images"
    if [ -f "$FMNIST" ]; then
      fmnist="$CACHE/fmnist-test-$PAIRS"
      if [ ! -d "$fmnist" ]; then # the first PAIRS test images as 28 x 28 BMP files (stats reads BMP)
        $PY - "$FMNIST" "$fmnist.tmp" "$PAIRS" <<'PYEOF'
import gzip, os, struct, sys
import numpy as np
src, out, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
raw = gzip.open(src).read()
count, rows, cols = struct.unpack(">III", raw[4:16])
images = np.frombuffer(raw, np.uint8, offset=16).reshape(count, rows, cols)[:n]
os.makedirs(out, exist_ok=True)
for i, im in enumerate(images):
    rgb = np.repeat(im[::-1, :, None], 3, axis=2)  # BMP rows go bottom-up, pixels as B, G, R
    pad = (-cols * 3) % 4
    body = b"".join(r.tobytes() + b"\0" * pad for r in rgb)
    header = b"BM" + struct.pack("<IHHI", 54 + len(body), 0, 0, 54)
    info = struct.pack("<IiiHHIIiiII", 40, cols, rows, 1, 24, 0, len(body), 2835, 2835, 0, 0)
    open(os.path.join(out, f"{i:05d}.bmp"), "wb").write(header + info + body)
PYEOF
        mv "$fmnist.tmp" "$fmnist"
      fi
      RUNS+=("$model|$name|images:$fmnist")
    fi
  else
    data="mnli:$DATA:$PAIRS"
  fi
  RUNS+=("$model|$name|$data")
done
for run in "${RUNS[@]}"; do
  IFS='|' read -r model name data <<<"$run"
  for precision in fp32 bf16; do
    "$BIN" stats --model "$model" --data "$data" --threads "$THREADS" --precision "$precision" --k "$K" \
      --out "$TMP/$precision.h5" 2>"$TMP/err" >"$TMP/out" || { cat "$TMP/err" >&2; exit 1; }
    grep -v '^stats: \|libpng warning' "$TMP/err" | sed 's/^/  /' >&2 || true
    sed -n 's/.*; \([0-9.]*\) per second in the forward passes.*/\1/p' "$TMP/out" >"$TMP/$precision.rate"
  done
  $PY - "$name" "$data" "$TMP" <<'PYEOF'
import os, sys, h5py, numpy as np
name, data, tmp = sys.argv[1:4]
a, b = h5py.File(f"{tmp}/fp32.h5", "r"), h5py.File(f"{tmp}/bf16.h5", "r")
rate = {p: float(open(f"{tmp}/{p}.rate").read() or "nan") for p in ("fp32", "bf16")}
assert a.attrs["samples"] == b.attrs["samples"]
if "tokens" in a:
    assert list(a["tokens"][()]) == list(b["tokens"][()]), "the two runs saw different tokens"
lo = hi = total_a = total_b = 0
worst_inf = (0.0, "")
for layer in a.attrs["layers"]:
    for t in ("attn_out", "ffn_out", "residual", "out"):
        g = f"layer{layer}/{t}"
        for key in ("outliers_per_dim", "token_outliers", "patch_outliers", "cls_outliers"):
            if f"{g}/{key}" not in a:
                continue
            x, y = np.asarray(a[f"{g}/{key}"][()]), np.asarray(b[f"{g}/{key}"][()])
            lo += np.minimum(x, y).sum()
            hi += np.maximum(x, y).sum()
            if os.environ.get("DETAIL") and key == "outliers_per_dim" and np.maximum(x, y).sum():
                print(f"    {g}: {np.minimum(x, y).sum() / np.maximum(x, y).sum():.4f} of {np.maximum(x, y).sum()}")
            if key in ("outliers_per_dim",):
                total_a += x.sum(); total_b += y.sum()
        ia, ib = a[f"{g}/mean_max_inf_norm"][()], b[f"{g}/mean_max_inf_norm"][()]
        rel = abs(ib - ia) / abs(ia) if ia else 0.0
        if rel > worst_inf[0]:
            worst_inf = (rel, g)
ma, mb = a["summary/max_inf_norm"][()], b["summary/max_inf_norm"][()]
agreement = lo / hi if hi else 1.0
print(f"{name} on {data.split(':')[0]} {data.split(':')[1].split('/')[-1]} ({a.attrs['samples']} inputs, k = {a.attrs['k']:g}), recorded precision "
      f"{a.attrs.get('precision', '?')} / {b.attrs.get('precision', '?')}:")
print(f"  outlier counts agree on {100 * agreement:.2f}% (outlier values: fp32 {total_a}, bf16 {total_b})")
print(f"  max inf norm: fp32 {ma:.4f}, bf16 {mb:.4f}, differ by {100 * abs(mb - ma) / ma:.3f}%; "
      f"largest per-layer difference {100 * worst_inf[0]:.3f}% ({worst_inf[1] or '-'})")
print(f"  throughput of the passes: fp32 {rate['fp32']:.2f}/s, bf16 {rate['bf16']:.2f}/s, bf16/fp32 = {rate['bf16'] / rate['fp32']:.2f}")
PYEOF
done
