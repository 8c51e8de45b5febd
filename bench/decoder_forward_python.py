#!/usr/bin/env python3
"""Reference timing for `outlierlens bench` on a LLaMA-family decoder folder: the same forward pass
written in Python with Debian's python3-torch (the same LibTorch 1.13 underneath), op for op as
Hugging Face's eager modeling_llama.py (v4.31: RMSNorm in float32, rotate_half rotary, repeat_kv,
softmax in float32, SwiGLU), recording every capture point of one layer by reference.
Developer tool, not part of the app or the tests.

The weights are read from the folder's model.safetensors without the safetensors package (header
JSON, then torch.frombuffer over a private memory map), so nothing is copied at load.

--weights stream (default) keeps them in their storage dtype and converts each one to float32 when
its layer runs, as OutlierLens does. --weights fp32 converts the whole model to float32 first, as
Hugging Face's from_pretrained does without torch_dtype. Peak RSS is reported for both.

    python3 bench/decoder_forward_python.py --model DIR --seq 256 --runs 5

Prints one JSON line with the fields of `outlierlens bench` for decoders.
"""
import argparse
import json
import math
import mmap
import os
import resource
import statistics
import struct
import time

import torch
import torch.nn.functional as F

DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}


def read_safetensors(path):
    with open(path, "rb") as f:
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
    (n,) = struct.unpack("<Q", mm[:8])
    header = json.loads(mm[8:8 + n])
    base = 8 + n
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        dtype = DTYPES[info["dtype"]]
        count = (end - begin) // torch.tensor([], dtype=dtype).element_size()
        t = torch.frombuffer(mm, dtype=dtype, count=count, offset=base + begin) if count else torch.empty(0, dtype=dtype)
        tensors[name] = t.view(info["shape"])
    return tensors


def rms_norm(x, weight, eps):
    h = x.float()
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return weight.float() * h.to(x.dtype)


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


class Llama:
    def __init__(self, folder, convert):
        cfg = json.load(open(os.path.join(folder, "config.json")))
        w = read_safetensors(os.path.join(folder, "model.safetensors"))
        w = {k[len("model."):] if k.startswith("model.") else k: v for k, v in w.items()}
        if convert:
            w = {k: v.float() for k, v in w.items()}
        self.w, self.cfg = w, cfg
        self.L, self.d = cfg["num_hidden_layers"], cfg["hidden_size"]
        self.h = cfg["num_attention_heads"]
        self.kv = cfg.get("num_key_value_heads") or self.h
        self.dh = self.d // self.h
        self.eps = cfg.get("rms_norm_eps", 1e-6)
        base = cfg.get("rope_theta", 10000.0)
        self.inv_freq = 1.0 / (base ** (torch.arange(0, self.dh, 2).float() / self.dh))
        self.weight_bytes = sum(v.numel() * v.element_size() for v in w.values())

    def lin(self, x, name):
        return F.linear(x, self.w[name].float())

    def forward(self, ids, rec=None, capture_layer=-1):
        B, T = ids.shape
        x = F.embedding(ids, self.w["embed_tokens.weight"]).float()
        pos = torch.arange(T)
        freqs = torch.einsum("i,j->ij", pos.float(), self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos()[None, None], emb.sin()[None, None]
        mask = torch.full((T, T), torch.finfo(torch.float32).min).triu(1)[None, None]
        for i in range(self.L):
            p = f"layers.{i}."
            h = rms_norm(x, self.w[p + "input_layernorm.weight"], self.eps)
            q = self.lin(h, p + "self_attn.q_proj.weight").view(B, T, self.h, self.dh).transpose(1, 2)
            k = self.lin(h, p + "self_attn.k_proj.weight").view(B, T, self.kv, self.dh).transpose(1, 2)
            v = self.lin(h, p + "self_attn.v_proj.weight").view(B, T, self.kv, self.dh).transpose(1, 2)
            q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
            rep = self.h // self.kv
            k = k[:, :, None].expand(B, self.kv, rep, T, self.dh).reshape(B, self.h, T, self.dh)
            v = v[:, :, None].expand(B, self.kv, rep, T, self.dh).reshape(B, self.h, T, self.dh)
            scores = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.dh)
            probs = torch.softmax(scores + mask, dim=-1, dtype=torch.float32)
            ctx = torch.matmul(probs, v)
            attn_out = self.lin(ctx.transpose(1, 2).reshape(B, T, self.d), p + "self_attn.o_proj.weight")
            x = x + attn_out
            h = rms_norm(x, self.w[p + "post_attention_layernorm.weight"], self.eps)
            down_in = F.silu(self.lin(h, p + "mlp.gate_proj.weight")) * self.lin(h, p + "mlp.up_proj.weight")
            ffn_out = self.lin(down_in, p + "mlp.down_proj.weight")
            x = x + ffn_out
            if rec is not None and i == capture_layer:
                rec.update({f"layer{i}/attn_scores": scores, f"layer{i}/attn_probs": probs,
                            f"layer{i}/attn_values": v, f"layer{i}/attn_context": ctx,
                            f"layer{i}/attn_out": attn_out, f"layer{i}/down_in": down_in,
                            f"layer{i}/ffn_out": ffn_out, f"layer{i}/residual": x, f"layer{i}/out": x})
        x = rms_norm(x, self.w["norm.weight"], self.eps)
        head = self.w.get("lm_head.weight", self.w["embed_tokens.weight"])
        return F.linear(x, head.float())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--capture-layer", type=int, default=-1)
    ap.add_argument("--weights", choices=["stream", "fp32"], default="stream")
    ap.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    model = Llama(a.model, a.weights == "fp32")
    layer = a.capture_layer if a.capture_layer >= 0 else model.L // 2
    torch.manual_seed(1)
    ids = torch.randint(0, model.cfg["vocab_size"], (a.batch, a.seq))
    rss_loaded = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    def once(capture):
        rec = {} if capture else None
        start = time.perf_counter()
        model.forward(ids, rec, layer)
        return (time.perf_counter() - start) * 1e3

    with torch.inference_mode():
        for _ in range(a.warmup):
            once(False), once(True)
        plain, captured = [], []
        for _ in range(a.runs):
            plain.append(once(False))
            captured.append(once(True))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    weights = model.weight_bytes / 2**20
    summary = lambda ms: {"median": statistics.median(ms), "min": min(ms)}
    print(json.dumps({"model": "python " + a.model, "torch": torch.__version__, "weights": a.weights,
                      "layers": model.L, "hidden": model.d, "seq": a.seq, "batch": a.batch,
                      "threads": torch.get_num_threads(), "runs": a.runs, "capture_layer": layer,
                      "no_capture_ms": summary(plain), "capture_layer_ms": summary(captured),
                      "weights_mib": weights, "rss_after_load_mib": rss_loaded, "peak_rss_mib": peak,
                      "peak_rss_over_weights": peak / weights}))


if __name__ == "__main__":
    main()
