"""PyTorch reference for bench/bench_cuda.sh: GPT-2 124M training steps on the same GPU, same
shapes and the same step as bench_cuda_step (M microbatches of B x T tokens, grad clip 1.0,
AdamW), in eager mode and under torch.compile, fp32 (TF32 off), tf32 and bf16 (autocast: bf16
compute, fp32 master weights and gradients). Attention is PyTorch's scaled_dot_product_attention.

Usage: python3 bench/torch_gpt2.py [--precision fp32,tf32,bf16] [--mode eager,compile]
                                   [--B 0] [--T 1024] [--M 2] [--steps 10] [--layers 12]
                                   [--device cuda|cpu] [--threads N]
B = 0 takes, per precision, the largest B of a fixed ladder that runs eagerly, and times both
modes at that B. Prints one line per (precision, mode).
--device cpu (bench/bench_cpu_vs_torch.sh): the same step on the CPU with N threads (set
OPENBLAS_NUM_THREADS and OMP_NUM_THREADS to N too: the BLAS reads them when it loads); it also
prints the BLAS library and kernel torch runs, and per-step times with --times. Works with
Debian's torch 1.13, which has no scaled_dot_product_attention (a masked softmax instead)."""
import argparse
import gc
import math
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

PEAK_BF16 = 989e12  # H100 SXM dense bf16


def attention(q, k, v):
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    T = q.shape[-2]
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))
    mask = torch.ones(T, T, dtype=torch.bool, device=q.device).triu(1)
    return att.masked_fill(mask, float("-inf")).softmax(dim=-1) @ v


def sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


class Block(nn.Module):
    def __init__(self, C, NH):
        super().__init__()
        self.nh = NH
        self.ln1 = nn.LayerNorm(C)
        self.qkv = nn.Linear(C, 3 * C)
        self.proj = nn.Linear(C, C)
        self.ln2 = nn.LayerNorm(C)
        self.fc = nn.Linear(C, 4 * C)
        self.fcproj = nn.Linear(4 * C, C)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        shape = (B, T, self.nh, C // self.nh)
        q, k, v = (t.view(shape).transpose(1, 2) for t in (q, k, v))
        y = attention(q, k, v)
        x = x + self.proj(y.transpose(1, 2).reshape(B, T, C))
        return x + self.fcproj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT2(nn.Module):
    def __init__(self, L=12, C=768, NH=12, V=50257, Vp=50304, maxT=1024):
        super().__init__()
        self.V = V
        self.wte = nn.Embedding(Vp, C)
        self.wpe = nn.Embedding(maxT, C)
        self.blocks = nn.ModuleList(Block(C, NH) for _ in range(L))
        self.lnf = nn.LayerNorm(C)
        for n, p in self.named_parameters():
            if p.dim() >= 2:
                std = 0.02 / math.sqrt(2 * L) if n.endswith(("proj.weight",)) else 0.02
                nn.init.normal_(p, std=std)
            elif n.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, idx, targets):
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
        for b in self.blocks:
            x = b(x)
        logits = self.lnf(x) @ self.wte.weight.t()  # tied head over the padded vocabulary
        logits = logits[..., : self.V].float()
        return F.cross_entropy(logits.reshape(-1, self.V), targets.reshape(-1))


def run(prec, mode, B, T, M, steps, L, probe=False, device="cuda", times_out=False,
        kernels=False):
    torch.backends.cuda.matmul.allow_tf32 = prec == "tf32"
    torch.backends.cudnn.allow_tf32 = prec == "tf32"
    torch.manual_seed(0)
    model = GPT2(L=L).to(device)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}]
    adam = dict(lr=3e-4, betas=(0.9, 0.95), eps=1e-8)
    opt = torch.optim.AdamW(groups, fused=True, **adam) if device == "cuda" else \
        torch.optim.AdamW(groups, **adam)
    fwd = torch.compile(model) if mode == "compile" else model
    idx = torch.randint(0, 50257, (M, B, T), device=device)
    tgt = torch.randint(0, 50257, (M, B, T), device=device)

    def step():
        opt.zero_grad(set_to_none=True)
        for m in range(M):
            with torch.autocast(device, dtype=torch.bfloat16, enabled=prec == "bf16"):
                loss = fwd(idx[m], tgt[m]) / M
            loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss.item() * M

    for _ in range(1 if probe or device == "cpu" else 3):
        step()
    sync(device)
    if probe:
        return
    times, cpu = [], []
    for _ in range(steps):
        t0, c0 = time.perf_counter(), time.process_time()
        loss = step()
        sync(device)
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    if times_out:  # wall and process CPU time (all threads) of each step
        print("step_ms " + " ".join(f"{t * 1e3:.1f}" for t in times), flush=True)
        print("cpu_ms " + " ".join(f"{t * 1e3:.1f}" for t in cpu), flush=True)
    med = statistics.median(times)
    nparams = sum(p.numel() for p in model.parameters()) - (50304 - 50257) * 768
    tok = M * B * T
    flops = (6 * nparams + 12 * L * T * 768) * tok
    mfu = f"MFU {100 * flops / med / PEAK_BF16:5.1f}%  " if device == "cuda" else ""
    print(f"torch {mode:7s} {prec}: B={B} T={T} M={M} {med * 1e3:8.2f} ms/step "
          f"{tok / med:9.0f} tokens/s  {mfu}loss {loss:.4f}", flush=True)
    if kernels and device == "cuda":
        kernel_classes(step)


# zbpp's kernel classes (bench_cuda_step's breakdown), from a kernel's name: first match wins
KERNEL_CLASSES = [
    ("attention", ("fmha", "attention", "flash", "efficient")),
    ("classifier", ("softmax", "nll", "cross_entropy", "log_softmax")),
    ("optimizer", ("adam", "multi_tensor", "foreach")),
    ("norm", ("layer_norm", "layernorm")),
    ("gemm", ("gemm", "xmma", "cutlass", "sm90", "sm80", "cublas", "splitk", "gemv")),
]


def kernel_classes(step):
    """One more step under torch.profiler: its GPU kernels' time by zbpp's kernel classes (a
    kernel's class from its name; the rest is elementwise) and the ten longest kernels."""
    from torch.profiler import profile, ProfilerActivity
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    by_class, by_name = {}, {}
    for ev in prof.key_averages():  # only CUDA activity: the entries are the kernels
        dt = getattr(ev, "self_device_time_total", None)
        if dt is None:  # torch before 2.4
            dt = getattr(ev, "self_cuda_time_total", 0)
        if not dt:
            continue
        name = ev.key.lower()
        cls = next((c for c, keys in KERNEL_CLASSES if any(k in name for k in keys)),
                   "elementwise")
        by_class[cls] = by_class.get(cls, 0.0) + dt / 1e3
        by_name[ev.key] = by_name.get(ev.key, 0.0) + dt / 1e3
    total = sum(by_class.values())
    print("  by kernel class (ms per step, share): " + ", ".join(
        f"{c} {t:.2f} ({100 * t / total:.0f}%)"
        for c, t in sorted(by_class.items(), key=lambda kv: -kv[1])) + f"; total {total:.2f}",
        flush=True)
    for name, t in sorted(by_name.items(), key=lambda kv: -kv[1])[:10]:
        print(f"    {t:9.2f} ms  {name[:110]}", flush=True)


def cpu_blas():
    """The BLAS library torch loaded (from this process's mappings) and, for OpenBLAS, the
    kernel it runs."""
    import ctypes
    libs = set()
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1]
            if "blas" in path.rsplit("/", 1)[-1] and path.startswith("/"):
                libs.add(path)
    for path in sorted(libs):
        try:
            core = ctypes.CDLL(path).openblas_get_corename
        except (OSError, AttributeError):
            continue
        core.restype = ctypes.c_char_p
        return f"OpenBLAS {core().decode()} ({path})"
    return "BLAS: " + (", ".join(sorted(libs)) or "none found")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--precision", default="fp32,tf32,bf16")
    ap.add_argument("--mode", default="eager,compile")
    ap.add_argument("--B", type=int, default=0)
    ap.add_argument("--T", type=int, default=1024)
    ap.add_argument("--M", type=int, default=2)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--threads", type=int, default=0, help="CPU threads (0: torch's default)")
    ap.add_argument("--times", action="store_true", help="also print every timed step")
    ap.add_argument("--kernels", action="store_true",
                    help="GPU: one more step under torch.profiler, its kernel time by class")
    a = ap.parse_args()
    if a.device == "cpu":
        if a.threads:
            torch.set_num_threads(a.threads)
        print(f"device: cpu, {torch.get_num_threads()} threads, torch {torch.__version__}, "
              f"{cpu_blas()}", flush=True)
        for prec in a.precision.split(","):
            for mode in a.mode.split(","):
                run(prec, mode, a.B or 8, a.T, a.M, a.steps, a.layers, device="cpu",
                    times_out=a.times)
        return
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}", flush=True)
    for prec in a.precision.split(","):
        # one B per precision for both modes: the largest of a fixed ladder that runs eagerly
        # (one untimed step each; torch.compile needs no more memory than eager)
        B = a.B
        for cand in ([] if a.B else [64, 48, 40, 32, 24, 20, 16, 12, 8, 6, 4, 2, 1]):
            try:
                run(prec, "eager", cand, a.T, a.M, 0, a.layers, probe=True)
                B = cand
                break
            except torch.cuda.OutOfMemoryError:
                pass
            finally:
                gc.collect()
                torch.cuda.empty_cache()
        if not B:
            raise SystemExit(f"torch_gpt2: no batch size fits for {prec}")
        for mode in a.mode.split(","):
            run(prec, mode, B, a.T, a.M, a.steps, a.layers, kernels=a.kernels)
            torch._dynamo.reset()
            gc.collect()
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
