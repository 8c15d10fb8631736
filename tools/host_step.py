#!/usr/bin/env python3
"""The eager decode step's own Python, on a CPU: the fused path's host code with every kernel launch stubbed out.

Usage: python tools/host_step.py [--ratios 4 128 0] [--steps 2000] [--profile]

A decode step with the cache's graphs off is bound by its host work on the H200 (the bench chapter's decode
table): a dozen launches, and the Python around them. This script runs that Python alone, on CPU tensors: the
package's Triton launches, FlashMLA and cuDNN's top-k are replaced by stubs that allocate their outputs and
compute nothing (inside `testing.stand_in_kernels`, so the layer takes CPU tensors), and the step is timed per
call — a median over `--steps` steps after warm-up. `--profile` adds a cProfile table (sorted by cumulative
time). The stubbed outputs are never written, so the figures say nothing about correctness: only about host time,
comparable between two versions of the code on one machine (interleave them: a CPU's speed moves).
"""

import argparse
import cProfile
import io
import pstats
import time

import torch

from fused_csa_nb import attention, backends, cache, compressor, config, decode_kernels, fused_sparse_attention, kernels
from fused_csa_nb import reference
from fused_csa_nb import kernel_support
from fused_csa_nb import launch, rotary, testing


def stub_kernels():
    "Every kernel launch of a fused decode step replaced by a stub that allocates its outputs (CPU tensors)."

    def runs_on(x):
        return x.numel() > 0 and x.dtype != torch.float64

    def flash_mla(q, kv, indices, sm_scale, attn_sink, topk_length=None, *rest):
        return q.new_empty(q.shape[0], q.shape[1], 512), q.new_empty(q.shape[:2], dtype=torch.float32)

    modules = (launch, kernels, decode_kernels, cache, attention, backends, fused_sparse_attention, reference)
    for m in (*modules, compressor, rotary):
        if hasattr(m, "_triton_runs_on"):
            m._triton_runs_on = runs_on
        if hasattr(m, "_launch_triton"):
            m._launch_triton = lambda *a, **k: None
    kernel_support._sm_count = backends._sm_count = lambda device: 132  # the H200's SMs: the attention splits as there
    kernels._flash_mla_raw = flash_mla
    kernels._run = lambda name, *a: flash_mla(*a[:5])  # the only op a step runs through `_run`
    fused_sparse_attention._radix_topk = lambda v, lengths, k, *a, **kw: torch.empty(v.shape[0], k, dtype=torch.int32)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ratios", type=int, nargs="+", default=[4, 128, 0])
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    stub_kernels()
    for ratio in args.ratios:
        with testing.stand_in_kernels(), torch.no_grad():
            torch.manual_seed(0)
            cfg = config.CSAConfig.v4_flash(dsa_kernel_backend="cudnn")
            layer = attention.CompressedSparseAttention(cfg, ratio).bfloat16().eval()
            c = layer.new_cache(1, 4096 + 3 * args.steps + 100)
            c.graphs = False
            c.advance(4096)  # a prompt's worth of tokens held (their contents are never read by the stubs)
            ins = [
                torch.randn(1, 1, *s, dtype=torch.bfloat16)
                for s in ((cfg.num_heads, cfg.head_dim), (1, cfg.head_dim), (cfg.hidden_size,), (cfg.q_lora_rank,))
            ]
            for _ in range(20):
                layer(*ins, cache=c)
            ts = []
            for _ in range(args.steps):
                t = time.perf_counter()
                layer(*ins, cache=c)
                ts.append(time.perf_counter() - t)
            ts.sort()
            print(f"ratio {ratio}: {1e6 * ts[len(ts) // 2]:.1f} µs per step (median of {len(ts)}, launches stubbed)")
            if args.profile:
                pr = cProfile.Profile()
                pr.enable()
                for _ in range(args.steps):
                    layer(*ins, cache=c)
                pr.disable()
                s = io.StringIO()
                pstats.Stats(pr, stream=s).sort_stats("cumulative").print_stats(40)
                print(s.getvalue())


if __name__ == "__main__":
    main()
