#!/usr/bin/env python3
"""Profile one fused decode step (CUDA-graph replays) and a prompt through the cache: the kernels and their time.

Usage (on an SM90 GPU): python tools/profile_decode.py [--context 65536] [--ratios 4 128]"""

import argparse

import torch
from torch.profiler import ProfilerActivity, profile

from fused_csa_nb.attention import CompressedSparseAttention
from fused_csa_nb.bench_decode import _filled_cache
from fused_csa_nb.bench_long import long_context_layer
from fused_csa_nb.config import CSAConfig
from fused_csa_nb.graphs import capture_decode

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("--context", type=int, default=65536)
ap.add_argument("--ratios", type=int, nargs="+", default=[4, 128])
ap.add_argument("--prefill", type=int, default=4096, help="prompt length of the prefill profile (0: none)")
args = ap.parse_args()
for ratio in args.ratios:
    layer = CompressedSparseAttention(CSAConfig.v4_flash(dsa_kernel_backend="cudnn"), ratio).cuda().bfloat16().eval()
    cache = _filled_cache(layer, 1, args.context)
    cfg = layer.cfg

    def mk(*s):
        return torch.randn(*s, device="cuda", dtype=torch.bfloat16)

    static = (
        mk(1, 1, cfg.num_heads, cfg.head_dim),
        mk(1, 1, 1, cfg.head_dim),
        mk(1, 1, cfg.hidden_size),
        mk(1, 1, cfg.q_lora_rank),
    )
    with torch.no_grad():
        dg = capture_decode(layer, cache, *static)
        for _ in range(5):
            dg.replay()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(10):
                dg.replay()
            torch.cuda.synchronize()
    print(f"=== ratio {ratio}, context {args.context}: graphed decode step, 10 replays")
    print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=30, max_name_column_width=90))
if args.prefill:
    layer, ins = long_context_layer(4, args.prefill)
    layer.eval()
    cache = layer.new_cache(1, args.prefill)
    with torch.no_grad():
        for _ in range(3):
            layer(*ins[:4], cache=cache.reset())
            layer(*ins[:4])
        torch.cuda.synchronize()
        for tag, fn in (("plain", lambda: layer(*ins[:4])), ("cache", lambda: layer(*ins[:4], cache=cache.reset()))):
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                for _ in range(5):
                    fn()
                torch.cuda.synchronize()
            print(f"=== prefill {args.prefill} ({tag}), 5 calls")
            print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25, max_name_column_width=70))
