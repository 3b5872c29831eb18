#!/usr/bin/python3
"""Build the tiny-GPT-2 reference fixture for tests/test_gpt2_torch.c with PyTorch.

GPT-2 semantics: pre-LayerNorm blocks, tanh GELU, causal attention, final LayerNorm, LM head
tied to the token embedding, vocabulary padded from V to Vp with zero rows that the loss ignores.
The reference runs in float64, so the C side (float32) is compared against an exact answer.

Writes (small, committed; the test does not need torch):
  tests/fixtures/gpt2_tiny.bin     llm.c checkpoint v3 (header 256 x int32, then fp32 params)
  tests/fixtures/gpt2_tiny_ref.bin int32 [magic 0x5846425A 'ZBFX', version 1, B, T, Vp, count]
                                   int32 tokens[B*T], int32 targets[B*T],
                                   float32 loss, float32 logits[B*T*Vp],
                                   float32 grads[count] (llm.c order; WTE = embedding + head parts)
Usage: /usr/bin/python3 scripts/make_torch_fixture.py [out_dir]
"""
import math
import struct
import sys

import torch

L, NH, C, V, VP, MAXT, B, T = 2, 2, 32, 67, 128, 16, 2, 8
SEED = 20240326


def shapes():
    return [("wte", (VP, C)), ("wpe", (MAXT, C)), ("ln1w", (L, C)), ("ln1b", (L, C)),
            ("qkvw", (L, 3 * C, C)), ("qkvb", (L, 3 * C)), ("attprojw", (L, C, C)),
            ("attprojb", (L, C)), ("ln2w", (L, C)), ("ln2b", (L, C)), ("fcw", (L, 4 * C, C)),
            ("fcb", (L, 4 * C)), ("fcprojw", (L, C, 4 * C)), ("fcprojb", (L, C)),
            ("lnfw", (C,)), ("lnfb", (C,))]


def make_params(gen):
    p = {}
    for name, shape in shapes():
        if name in ("ln1w", "ln2w", "lnfw"):
            t = 1.0 + 0.1 * torch.randn(shape, generator=gen, dtype=torch.float64)
        elif name.endswith("b"):
            t = 0.05 * torch.randn(shape, generator=gen, dtype=torch.float64)
        else:  # larger than GPT-2's 0.02 so every path carries a clear gradient
            t = 0.15 * torch.randn(shape, generator=gen, dtype=torch.float64)
        p[name] = t
    p["wte"][V:] = 0.0  # padded vocabulary rows
    # round to float32 so the C side starts from exactly these values
    return {k: v.float().double().requires_grad_(True) for k, v in p.items()}


def layernorm(x, w, b):
    m = x.mean(-1, keepdim=True)
    v = ((x - m) ** 2).mean(-1, keepdim=True)
    return (x - m) / torch.sqrt(v + 1e-5) * w + b


def gelu(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def forward(p, tokens, targets):
    hs = C // NH
    x = p["wte"][tokens] + p["wpe"][:T]
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    for l in range(L):
        h = layernorm(x, p["ln1w"][l], p["ln1b"][l])
        qkv = h @ p["qkvw"][l].T + p["qkvb"][l]
        q, k, v = qkv.split(C, dim=-1)
        q = q.view(B, T, NH, hs).transpose(1, 2)
        k = k.view(B, T, NH, hs).transpose(1, 2)
        v = v.view(B, T, NH, hs).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hs)
        att = att.masked_fill(~mask, float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = x + y @ p["attprojw"][l].T + p["attprojb"][l]
        h = layernorm(x, p["ln2w"][l], p["ln2b"][l])
        h = gelu(h @ p["fcw"][l].T + p["fcb"][l])
        x = x + h @ p["fcprojw"][l].T + p["fcprojb"][l]
    x = layernorm(x, p["lnfw"], p["lnfb"])
    logits = x @ p["wte"].T  # [B, T, Vp]; the loss sees only the real V columns
    loss = torch.nn.functional.cross_entropy(logits[..., :V].reshape(-1, V), targets.reshape(-1))
    return logits, loss


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures"
    gen = torch.Generator().manual_seed(SEED)
    p = make_params(gen)
    tokens = torch.randint(0, V, (B, T), generator=gen)
    targets = torch.randint(0, V, (B, T), generator=gen)
    logits, loss = forward(p, tokens, targets)
    loss.backward()

    header = [20240326, 3, MAXT, V, L, NH, C, VP] + [0] * 248
    with open(f"{out}/gpt2_tiny.bin", "wb") as f:
        f.write(struct.pack("<256i", *header))
        for name, _ in shapes():
            f.write(p[name].detach().float().numpy().astype("<f4").tobytes())
    count = sum(p[name].numel() for name, _ in shapes())
    with open(f"{out}/gpt2_tiny_ref.bin", "wb") as f:
        f.write(struct.pack("<6i", 0x5846425A, 1, B, T, VP, count))
        f.write(tokens.to(torch.int32).numpy().astype("<i4").tobytes())
        f.write(targets.to(torch.int32).numpy().astype("<i4").tobytes())
        f.write(struct.pack("<f", loss.item()))
        f.write(logits.detach().float().numpy().astype("<f4").tobytes())
        for name, _ in shapes():
            f.write(p[name].grad.float().numpy().astype("<f4").tobytes())
    print(f"loss {loss.item():.6f}, {count} parameters, written to {out}/")


if __name__ == "__main__":
    main()
