#!/usr/bin/env python3
"""Reference throughput for `outlierlens stats` on MNLI: the same computation in Python with Debian's
python3-torch. Developer tool, not part of the app or the tests.

Reads token ids written by `outlierlens tokenize --data mnli:FILE[:N]` (so both sides see identical
inputs), batches them exactly as the C++ runner does (chunks of 1024 pairs sorted by length, batches
of --batch, padded), runs a bert-base-size BERT (bench/bert_forward_python.py, random weights) and,
per sample and per layer, computes what `stats` computes: sigma-rule outliers per hidden dimension
and per token, max inf norm and kurtosis for attn_out, ffn_out, residual and out; per head the
cumulative attention by key token, attention outliers, and mean |V| of keys with and without an
outlier in the previous layer's output. Prints one JSON line with sequences per second.

    build/app/outlierlens tokenize --model MODEL --data mnli:sample_data/mnli/mnli_dev_matched.jsonl > ids.jsonl
    python3 bench/stats_python.py --ids ids.jsonl
"""
import argparse
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bert_forward_python import PRESETS, Bert  # noqa: E402

VOCAB = 30522


def sigma_mask(x, k):
    x = x.double()
    return (x - x.mean()).abs() > k * x.std()


def kurtosis(x):
    x = x.double().flatten()
    return ((x - x.mean()) ** 4).mean() / (x.std() ** 4 + 1e-6)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ids", required=True)
    ap.add_argument("--config", default="bert-base", choices=sorted(PRESETS))
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--token-budget", type=int, default=2048)
    ap.add_argument("--k", type=float, default=6.0)
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    cfg = PRESETS[a.config]
    model = Bert(**cfg).eval()
    L, H, d = cfg["layers"], cfg["heads"], cfg["hidden"]
    encs = [json.loads(line) for line in open(a.ids)]
    if a.limit:
        encs = encs[: a.limit]

    tensors = ("attn_out", "ffn_out", "residual", "out")
    per_dim = {(l, t): torch.zeros(d, dtype=torch.long) for l in range(L) for t in tensors}
    per_token = {(l, t): torch.zeros(VOCAB, dtype=torch.long) for l in range(L) for t in tensors}
    sums = {(l, t): [0.0, 0.0] for l in range(L) for t in tensors}
    cum_attn = [torch.zeros(H, VOCAB, dtype=torch.double) for _ in range(L)]
    attn_out_keys = [torch.zeros(H, dtype=torch.long) for _ in range(L)]
    v_groups = [[torch.zeros(H, dtype=torch.double), 0, torch.zeros(H, dtype=torch.double), 0] for _ in range(L)]

    start = time.perf_counter()
    done = 0
    with torch.inference_mode():
        for c0 in range(0, len(encs), 1024):
            chunk = sorted(encs[c0:c0 + 1024], key=lambda e: len(e["input_ids"]))
            b0 = 0
            while b0 < len(chunk):
                # Up to --batch inputs, fewer when long (at most --token-budget padded tokens), as the C++ runner.
                b1 = b0 + 1
                while b1 < len(chunk) and b1 - b0 < a.batch and (b1 - b0 + 1) * len(chunk[b1]["input_ids"]) <= a.token_budget:
                    b1 += 1
                batch = chunk[b0:b1]
                b0 = b1
                T = max(len(e["input_ids"]) for e in batch)
                ids = torch.zeros(len(batch), T, dtype=torch.long)
                types = torch.zeros_like(ids)
                mask = torch.zeros_like(ids)
                for r, e in enumerate(batch):
                    n = len(e["input_ids"])
                    ids[r, :n] = torch.tensor(e["input_ids"])
                    types[r, :n] = torch.tensor(e["token_type_ids"])
                    mask[r, :n] = 1
                rec = {}
                model(ids, types, mask, rec)
                for r, e in enumerate(batch):
                    n = len(e["input_ids"])
                    tok = ids[r, :n]
                    prev = rec["embeddings"][r, :n]
                    for l in range(L):
                        for t in tensors:
                            x = rec[f"layer{l}/{t}"][r, :n]
                            m = sigma_mask(x, a.k)
                            per_dim[(l, t)] += m.sum(0)
                            per_token[(l, t)].index_add_(0, tok, m.sum(1))
                            sums[(l, t)][0] += x.abs().max().item()
                            sums[(l, t)][1] += kurtosis(x).item()
                        probs = rec[f"layer{l}/attn_probs"][r, :, :n, :n]
                        cum = probs.sum(1).double()  # [H, T] by key
                        cum_attn[l].index_add_(1, tok, cum)
                        attn_out_keys[l] += (cum >= 0.1 * n).sum(1)
                        v = rec[f"layer{l}/attn_values"][r, :, :n].abs().mean(-1).double()  # [H, T]
                        outl = sigma_mask(prev, a.k).any(1)
                        v_groups[l][0] += v[:, outl].sum(1)
                        v_groups[l][1] += int(outl.sum())
                        v_groups[l][2] += v[:, ~outl].sum(1)
                        v_groups[l][3] += int((~outl).sum())
                        prev = rec[f"layer{l}/out"][r, :n]
                done += len(batch)
    seconds = time.perf_counter() - start
    print(json.dumps({"implementation": "python " + torch.__version__, "config": a.config, "samples": done,
                      "seconds": seconds, "per_second": done / seconds, "threads": torch.get_num_threads()}))


if __name__ == "__main__":
    main()
