#!/usr/bin/env python3
"""Reference speed for `outlierlens train`: the same training step (forward, loss, backward, gradient
clipping, AdamW) of the demo models, written in Python with Debian's python3-torch (the same LibTorch
1.13 underneath). Developer tool; the data are random tensors of the right shapes, since only the
step's speed is compared (data loading is timed separately on the C++ side).

    python3 bench/train_step_python.py --model vit-fmnist --steps 40 --threads 1
    python3 bench/train_step_python.py --model bert-mlm --steps 40 --threads 1 --precision bf16
    python3 bench/train_step_python.py --model backcopy --steps 40 --threads 1 --precision bf16

Prints one JSON line: steps per second after --warmup steps.
"""
import argparse
import json
import math
import os
import time

import torch
from torch import nn


class Block(nn.Module):
    """One encoder block; pre_ln=True for ViT (timm), False for BERT (post-LN)."""

    def __init__(self, d, heads, ffn, pre_ln, dropout):
        super().__init__()
        self.h, self.dh, self.pre_ln = heads, d // heads, pre_ln
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, ffn), nn.Linear(ffn, d)
        self.ln1, self.ln2 = nn.LayerNorm(d, eps=1e-6 if pre_ln else 1e-12), nn.LayerNorm(d, eps=1e-6 if pre_ln else 1e-12)
        self.drop = nn.Dropout(dropout)

    def attend(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.h, self.dh).permute(2, 0, 3, 1, 4)
        p = torch.softmax((q @ k.transpose(-1, -2) / math.sqrt(self.dh)).float(), dim=-1)  # float32 softmax
        return self.proj((self.drop(p) @ v).transpose(1, 2).reshape(b, t, d))

    def forward(self, x):
        if self.pre_ln:
            x = x + self.attend(self.ln1(x))
            return x + self.fc2(nn.functional.gelu(self.fc1(self.ln2(x))))
        x = self.ln1(x + self.drop(self.attend(x)))
        return self.ln2(x + self.drop(self.fc2(nn.functional.gelu(self.fc1(x)))))


class Vit(nn.Module):
    def __init__(self, size=28, patch=4, d=128, layers=6, heads=4, ffn=512, classes=10):
        super().__init__()
        n = (size // patch) ** 2
        self.patch = nn.Conv2d(3, d, patch, patch)
        self.cls = nn.Parameter(torch.zeros(1, 1, d))
        self.pos = nn.Parameter(torch.zeros(1, n + 1, d))
        self.blocks = nn.ModuleList([Block(d, heads, ffn, True, 0.0) for _ in range(layers)])
        self.norm, self.head = nn.LayerNorm(d, eps=1e-6), nn.Linear(d, classes)

    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], 1) + self.pos
        for b in self.blocks:
            x = b(x)
        return self.head(self.norm(x)[:, 0])


class BertMlm(nn.Module):
    def __init__(self, vocab=30522, d=128, layers=4, heads=4, ffn=512, positions=512):
        super().__init__()
        self.word, self.pos, self.types = nn.Embedding(vocab, d), nn.Embedding(positions, d), nn.Embedding(2, d)
        self.ln = nn.LayerNorm(d, eps=1e-12)
        self.blocks = nn.ModuleList([Block(d, heads, ffn, False, 0.1) for _ in range(layers)])
        self.transform, self.tln = nn.Linear(d, d), nn.LayerNorm(d, eps=1e-12)
        self.bias = nn.Parameter(torch.zeros(vocab))

    def forward(self, ids, labels):
        t = ids.shape[1]
        x = self.ln(self.word(ids) + self.types(torch.zeros_like(ids)) + self.pos(torch.arange(t))[None])
        for b in self.blocks:
            x = b(x)
        picked = (labels.view(-1) != -100).nonzero().squeeze(1)  # the vocabulary projection only where predicted
        h = self.tln(nn.functional.gelu(self.transform(x.reshape(-1, x.shape[-1])[picked])).float())  # float32 LayerNorm
        logits = h @ self.word.weight.t() + self.bias
        return nn.functional.cross_entropy(logits, labels.view(-1)[picked])


class OptDecoder(nn.Module):
    """demo-backcopy's decoder, op for op as Hugging Face's OPTForCausalLM (pre-LN, ReLU FFN, learned
    positions with OPT's offset of 2, the LM head not tied), with a float32 softmax."""

    def __init__(self, vocab=260, d=128, layers=3, heads=2, ffn=512, t=64):
        super().__init__()
        self.h, self.dh = heads, d // heads
        self.embed, self.pos = nn.Embedding(vocab, d), nn.Embedding(t + 2, d)
        self.layers = nn.ModuleList([nn.ModuleDict({
            "q": nn.Linear(d, d), "k": nn.Linear(d, d), "v": nn.Linear(d, d), "o": nn.Linear(d, d),
            "ln1": nn.LayerNorm(d), "ln2": nn.LayerNorm(d), "fc1": nn.Linear(d, ffn), "fc2": nn.Linear(ffn, d)})
            for _ in range(layers)])
        self.norm, self.head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)

    def forward(self, ids):
        b, t = ids.shape
        x = self.embed(ids) + self.pos(torch.arange(t) + 2)[None]
        causal = torch.full((t, t), torch.finfo(torch.float32).min).triu(1)
        for l in self.layers:
            h = l["ln1"](x)
            split = lambda y: y.view(b, t, self.h, self.dh).transpose(1, 2)
            q, k, v = split(l["q"](h) * self.dh ** -0.5), split(l["k"](h)), split(l["v"](h))
            p = torch.softmax((q @ k.transpose(-1, -2)).float() + causal, dim=-1).to(v.dtype)
            x = x + l["o"]((p @ v).transpose(1, 2).reshape(b, t, -1))
            x = x + l["fc2"](torch.relu(l["fc1"](l["ln2"](x))))
        logits = self.head(self.norm(x)).float()
        return nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", choices=["vit-fmnist", "bert-mlm", "backcopy"], required=True)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32",
                    help="bf16: torch.autocast('cpu', torch.bfloat16) around forward and loss")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    if a.model == "vit-fmnist":
        model, batch = Vit(), 128
        make = lambda: (torch.randn(batch, 3, 28, 28), torch.randint(0, 10, (batch,)))
        loss_of = lambda x, y: nn.functional.cross_entropy(model(x), y)
    elif a.model == "backcopy":
        model, batch = OptDecoder(), 32
        make = lambda: (torch.randint(0, 260, (batch, 64)),)
        loss_of = lambda ids: model(ids)
    else:
        model, batch = BertMlm(), 32
        def make():
            ids = torch.randint(999, 30522, (batch, 128))
            labels = torch.where(torch.rand(batch, 128) < 0.15, ids, torch.full_like(ids, -100))
            return ids, labels
        loss_of = lambda ids, labels: model(ids, labels)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}], lr=1e-3)
    model.train()
    batches = [make() for _ in range(4)]
    for step in range(a.warmup + a.steps):
        if step == a.warmup:
            start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.precision == "bf16"):
            loss = loss_of(*batches[step % 4])
        loss.backward()
        if a.model != "backcopy":  # demo-backcopy trains without clipping
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    seconds = time.perf_counter() - start
    print(json.dumps({"implementation": "python " + torch.__version__, "model": a.model, "threads": a.threads,
                      "precision": a.precision,
                      "steps": a.steps, "seconds": seconds, "steps_per_second": a.steps / seconds}))


if __name__ == "__main__":
    main()
