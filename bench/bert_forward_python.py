#!/usr/bin/env python3
"""Reference timing for `outlierlens bench`: the same BERT forward pass written in Python with
Debian's python3-torch (the same LibTorch 1.13 underneath), with every capture point of DESIGN.md
recorded by reference, and without capture. Developer tool, not part of the app or the tests.

The model follows Hugging Face's eager modeling_bert.py op for op (Linear projections, matmul,
scale, additive mask, softmax, matmul, output projection, erf GELU, post-LN) so that both sides
do the same arithmetic; weights are random (timing does not depend on their values).

    python3 bench/bert_forward_python.py --config bert-base --seq 128 --runs 20

Prints one JSON line with the same fields as `outlierlens bench`.
"""
import argparse
import json
import math
import os
import statistics
import time

import torch
from torch import nn

PRESETS = {
    "bert-base": dict(hidden=768, layers=12, heads=12, ffn=3072),
    "bert-6l": dict(hidden=768, layers=6, heads=12, ffn=3072),
    "bert-mini": dict(hidden=256, layers=4, heads=4, ffn=1024),
    "bert-tiny": dict(hidden=128, layers=2, heads=2, ffn=512),
}


class Layer(nn.Module):
    def __init__(self, d, heads, ffn):
        super().__init__()
        self.h, self.dh = heads, d // heads
        self.query, self.key, self.value = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
        self.attn_dense, self.attn_ln = nn.Linear(d, d), nn.LayerNorm(d, eps=1e-12)
        self.inter, self.out_dense, self.out_ln = nn.Linear(d, ffn), nn.Linear(ffn, d), nn.LayerNorm(d, eps=1e-12)

    def split(self, x):
        b, t, _ = x.shape
        return x.view(b, t, self.h, self.dh).permute(0, 2, 1, 3)

    def forward(self, x, mask, rec, i):
        q, k, v = self.split(self.query(x)), self.split(self.key(x)), self.split(self.value(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.dh)
        probs = torch.softmax(scores + mask, dim=-1)
        ctx = torch.matmul(probs, v)
        attn_out = self.attn_dense(ctx.permute(0, 2, 1, 3).reshape(x.shape))
        h = self.attn_ln(attn_out + x)
        ffn_out = self.out_dense(nn.functional.gelu(self.inter(h)))
        residual = ffn_out + h
        out = self.out_ln(residual)
        if rec is not None:
            rec.update({f"layer{i}/attn_scores": scores, f"layer{i}/attn_probs": probs,
                        f"layer{i}/attn_values": v, f"layer{i}/attn_context": ctx,
                        f"layer{i}/attn_out": attn_out, f"layer{i}/ffn_out": ffn_out,
                        f"layer{i}/residual": residual, f"layer{i}/out": out})
        return out


class Bert(nn.Module):
    def __init__(self, hidden, layers, heads, ffn, vocab=30522):
        super().__init__()
        self.word, self.pos, self.token_type = nn.Embedding(vocab, hidden), nn.Embedding(512, hidden), nn.Embedding(2, hidden)
        self.ln = nn.LayerNorm(hidden, eps=1e-12)
        self.layers = nn.ModuleList([Layer(hidden, heads, ffn) for _ in range(layers)])

    def forward(self, ids, types, attention_mask, rec=None):
        t = ids.shape[1]
        h = self.ln(self.word(ids) + self.token_type(types) + self.pos(torch.arange(t)).unsqueeze(0))
        if rec is not None:
            rec["embeddings"] = h
        mask = (1.0 - attention_mask[:, None, None, :].float()) * torch.finfo(torch.float32).min
        for i, layer in enumerate(self.layers):
            h = layer(h, mask, rec, i)
        return h


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="bert-base", choices=sorted(PRESETS))
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model = Bert(**PRESETS[a.config]).eval()
    ids = torch.randint(999, 30522, (a.batch, a.seq))
    types = torch.zeros_like(ids)
    mask = torch.ones_like(ids)

    def once(capture):
        rec = {} if capture else None
        start = time.perf_counter()
        model(ids, types, mask, rec)
        return (time.perf_counter() - start) * 1e3

    with torch.inference_mode():
        for _ in range(a.warmup):
            once(False), once(True)
        plain, captured = [], []
        for _ in range(a.runs):
            plain.append(once(False))
            captured.append(once(True))
    summary = lambda ms: {"median": statistics.median(ms), "min": min(ms)}
    print(json.dumps({"model": "python " + a.config, "torch": torch.__version__, "seq": a.seq, "batch": a.batch,
                      "threads": torch.get_num_threads(), "runs": a.runs,
                      "no_capture_ms": summary(plain), "capture_all_ms": summary(captured)}))


if __name__ == "__main__":
    main()
