#!/usr/bin/env python3
"""Times the deterministic backward's `accumulate="tiles"` (dKV summed by kv tiles, no parts) on one GPU.

Usage: python tools/det_tiles.py [--budget 280]

The chapter *Deterministic mode* ("Summed by kv tiles") builds and tests the variant; its default stays
`"segments"` until these timings say otherwise. Within `--budget` seconds (each part skipped when too little is left):

1. the backward alone at 4,096 rows, `bench._bench_problem`'s shape (H 64, D = DV = 512, 640 slots: the 128 window
   slots, then 512 compressed entries of 1,024) with each row's compressed entries distinct, as the layer's
   selection gives them (the tiles' pipelined loop): cuDNN's backward, the default variant, then each of `CONFIGS`
   (median ms of 30 calls, three calls compared bitwise, the similarity of `dq`, `dkv`, `d_sink` to cuDNN's, whether
   `dq` is the default's bits); the kernel tables of the fastest and of the default;
2. the whole ratio-4 training step at 4,096 tokens (`det_sweep`'s helpers): the default step, the deterministic one,
   and the deterministic one with the fastest `CONFIGS` entry (CUDA-graph replays, five eager steps compared bitwise,
   the least similarity to the default step, a kernel table);
3. the backward alone at 8,192 and 16,384 rows (the default and the fastest: where the tiles stop paying, which sets
   `tile_max_ratio`), then at 4,096 rows with the bench's random compressed entries, which repeat kv rows within a
   row (the tiles' `nxt` loop).
"""

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout's package, wherever the script runs from
sys.path.insert(0, str(Path(__file__).resolve().parent))  # det_sweep's step helpers

import torch  # noqa: E402

CONFIGS = [  # `_det_variant`'s keywords
    dict(accumulate="tiles"),  # `_DET_TILES`: 64 kv rows, 128 columns, 256 query rows a program, 8 warps, 2 stages
    dict(accumulate="tiles", tile_BLOCK_J=128),
    dict(accumulate="tiles", tile_BD=256),
    dict(accumulate="tiles", tile_BLOCK_J=128, tile_stages=3),
    dict(accumulate="tiles", tile_RP=512),
    dict(accumulate="tiles", tile_RP=128),
    dict(accumulate="tiles", tile_warps=4),
    dict(accumulate="tiles", tile_BLOCK_J=128, tile_BD=256),
    dict(accumulate="tiles", tile_stages=3),
]


def problem(sq, distinct=True, heads=64, topk=640, seed=0):
    """`bench._bench_problem` at `n_comp = sq // 4`: with `distinct`, each row's compressed entries distinct (as the
    layer's selection gives), else the bench's (random, repeating)."""
    from fused_csa_nb import bench
    from fused_csa_nb.kernels import _run

    n_comp = sq // 4
    args = list(bench._bench_problem(sq, heads, topk, n_comp, seed))
    if distinct:  # the window slots kept; the compressed entries drawn without repeats, out and lse recomputed
        g = torch.Generator(device="cuda").manual_seed(seed + 2)
        comp = sq + torch.rand(sq, n_comp, device="cuda", generator=g).argsort(1)[:, : topk - 128]
        args[6] = torch.cat([args[6][:, :128], comp.to(torch.int32)], 1).contiguous()
        args[2], args[4] = _run("flash_mla_sparse_fwd", args[0], args[1], args[6], args[7], args[5], None, None)
    return tuple(args)


def kernels(fn, rows=12):
    "The CUDA kernels of one call by total time (torch.profiler)."
    fn()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as p:
        fn()
        torch.cuda.synchronize()
    print(p.key_averages().table(sort_by="cuda_time_total", row_limit=rows, max_name_column_width=60))


def alone(sq, configs, left, iters=30, distinct=True):
    """The backward alone at `sq` rows: cuDNN's, the default variant's, each of `configs` (median ms of `iters`, three
    calls bitwise, similarity to cuDNN's, `dq` bitwise the default's) → `([(ms, cfg)] fastest first, args)`."""
    from fused_csa_nb import bench
    from fused_csa_nb.deterministic import _deterministic_sparse_bwd
    from fused_csa_nb.kernels import _sparse_bwd
    from fused_csa_nb.testing import similarity

    args = problem(sq, distinct)
    ref = _sparse_bwd(*args)
    cud = bench.median_time_ms(lambda: _sparse_bwd(*args), iters=iters)
    today = _deterministic_sparse_bwd(*args)
    t_today = bench.median_time_ms(lambda: _deterministic_sparse_bwd(*args), iters=iters)
    print(f"[{sq} rows, distinct {distinct}] cuDNN {cud:.3f} ms; default {t_today:.3f} ms ({t_today / cud:.2f}x)")
    rows = []
    for cfg in configs:
        if left() < 40:
            print("  skipped (budget)", cfg)
            continue
        try:
            runs = [_deterministic_sparse_bwd(*args, **cfg) for _ in range(3)]
            rep = all(torch.equal(a, b) for r in runs[1:] for a, b in zip(runs[0], r))
            sims = " ".join(f"{similarity(a, b):.7f}" for a, b in zip(runs[0], ref))
            same_dq = torch.equal(runs[0][0], today[0])
            del runs
            ms = bench.median_time_ms(lambda: _deterministic_sparse_bwd(*args, **cfg), iters=iters)
        except Exception as e:  # a config that does not compile or run: say so, go on
            print(f"  FAILED {type(e).__name__}: {(str(e).strip().splitlines() or [''])[0][:200]}  {cfg}")
            continue
        rows.append((ms, cfg))
        print(f"  {ms:8.3f} ms ({ms / t_today:.2f}x default) bitwise x3 {rep}, sim dq/dkv/d_sink {sims}, "
              f"dq the default's {same_dq}  {cfg}", flush=True)  # fmt: skip
    return sorted(rows, key=lambda r: r[0]), args


def step(sq, cfg, iters=30):
    """The ratio-4 training step at `sq` tokens: default, deterministic (default variant), deterministic with `cfg`
    (`det_sweep.step_variant`: `_DET_DEFAULT` updated for the steps inside)."""
    import dataclasses

    import det_sweep as dsw

    from fused_csa_nb import bench
    from fused_csa_nb.attention import CompressedSparseAttention
    from fused_csa_nb.testing import similarity

    _, fused, inputs = bench.layer_pair(4, sq)
    detl = CompressedSparseAttention(dataclasses.replace(fused.cfg, deterministic=True), 4)
    detl.load_state_dict(fused.state_dict())
    detl.to(inputs[0].device, inputs[0].dtype)
    base = dsw.time_step(fused, inputs, iters)
    ref = dsw.step_tensors(fused, inputs)
    print(f"\n[step {sq}] default (non-deterministic): graphed {dsw.fmt(base['graphed'])} ms", flush=True)
    for label, attn in (("deterministic, default variant", {}), (f"deterministic, {cfg}", cfg)):
        try:
            with dsw.step_variant(attn, {}):
                t = dsw.time_step(detl, inputs, iters)
                first = dsw.step_tensors(detl, inputs)
                rep = dsw.repeats(detl, inputs, first, 4)
                worst = min(ref, key=lambda n: similarity(first[n], ref[n]))
                print(f"[step {sq}] {label}: graphed {dsw.fmt(t['graphed'])} ms, queued {t['queued']:.3f} ms, "
                      f"x default {t['graphed'] / base['graphed']:.3f}, bitwise x5 {rep}, "
                      f"min sim {similarity(first[worst], ref[worst]):.6f} ({worst})", flush=True)  # fmt: skip
                dsw.kernel_table(detl, inputs)
        except Exception as e:
            print(f"[step {sq}] {label}: FAILED {type(e).__name__}: {(str(e).strip().splitlines() or [''])[0][:300]}")


def gpu(budget: float) -> None:
    "The timings of the docstring, within `budget` seconds (each part skipped when too little is left)."
    from fused_csa_nb.deterministic import _deterministic_sparse_bwd

    t0 = time.time()

    def left():
        return budget - (time.time() - t0)

    import triton

    print(torch.cuda.get_device_name(), torch.__version__, triton.__version__, flush=True)
    rows, args = alone(4096, CONFIGS, left)
    if not rows:
        return
    best = rows[0][1]
    print("fastest", best, flush=True)
    if left() > 60:
        print("kernels, tiles:")
        kernels(lambda: _deterministic_sparse_bwd(*args, **best))
        print("kernels, the default variant:")
        kernels(lambda: _deterministic_sparse_bwd(*args))
    args = None  # the problem's tensors freed before the step's
    torch.cuda.empty_cache()
    if left() > 90:
        step(4096, best)
        torch.cuda.empty_cache()
    for sq in (8192, 16384):  # where the tiles stop paying: `tile_max_ratio` of `accumulate="auto"`
        if left() > 60:
            alone(sq, [best], left, iters=10)
    if left() > 40:
        alone(4096, [best], left, distinct=False)
    print(f"done in {time.time() - t0:.0f} s")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=float, default=280.0, help="seconds for the timings")
    o = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("det_tiles.py: the timings need a CUDA GPU")
    gpu(o.budget)


if __name__ == "__main__":
    main()
