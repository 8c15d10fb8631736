#!/usr/bin/env python3
"""Sweep of the deterministic sparse-attention backward's and indexer d_k's variants (accumulation, tiles) on one GPU.

Usage:

    python tools/det_sweep.py [--sq 4096] [--long 16384] [--iters 20] [--budget 70] [--no-profile]
                              [--index-rows 16384] [--index-only]
    python tools/det_sweep.py --step [--step-sq 4096,65536] [--step-iters 30] [--step-iters-long 20]
                              [--step-variants today,sorted,...] [--step-budget SECONDS] [--warm N]
    python tools/det_sweep.py --segments [--iters 20]

`--segments` (alone; about a minute): the segment sum kernel by itself (`segment_section`), the dKV parts of the
4,096-row step (long segments: ~2,000 parts for each compressed row) and of one chunk of the 65K step (short
segments), and the indexer d_k parts: fp32 and bf16, in pair order and sorted, tiles, grid, warps and whole
segments or pieces (`seg_split`) → ms and GB/s. `--step --seg BLOCK_P,BLOCK_D,warps,split` then runs the step's
variants with the segment sum so set.
In the 4,096-token step's profile its two calls take 2.20 ms for about 6.4 GB of fp32 parts in pair order and 3.43 ms
for half the bytes as sorted bf16 parts: something other than the bytes (its loop's latency?) bounds it.

`--step` (alone; minutes on the H200, most of them compiling — `--warm N` compiles the variants' kernels first, N
processes at once, each running one step of its variant): the whole ratio-4 training step of
`bench.deterministic_step` (V4-Flash layer, H 64, top-512, sparse indexer loss, batch 1) at each `--step-sq`, the
default (non-deterministic) step first, then `deterministic=True` with each of `STEP_VARIANTS` (today's defaults, then
the variants of the chapter's "Fewer bytes": `_DET_DEFAULT`, `_DET_INDEX_PARTS` and `_DET_INDEX_DQ` set for the step,
through `_set_det_index_dq` for the last). Each is
timed GPU-bound: CUDA-graph replays (median of `--step-iters` at 4,096 tokens, `--step-iters-long` above: a 65K step
is ~0.1-0.2 s and replays vary little), and steps queued back to back without a sync (mean); then five eager steps
compared bitwise (output, loss, every gradient), and with the step of today's kernels ("today", which runs first),
the least similarity of those tensors to the default step's, and the per-kernel CUDA time of one eager step
(torch.profiler). A summary table gives each variant's ratio to the default step against the goal (1.3x at 4,096
tokens, 1.5x at 65,536) and the `_DET_DEFAULT` / `_DET_INDEX_PARTS` / `_DET_INDEX_DQ` lines that make the fastest
repeating one the default. Both sizes from a cold Triton cache may pass 10 minutes: `--step-sq 4096` first, then
`--step-sq 65536`.

First the indexer section (`--index-rows 0`: none; `--index-only`: it alone): `_deterministic_index_dk` at one block of
a long sequence (B 1, `--index-rows` rows and as many keys, H 64, D 128, 512 distinct random entries per row, random
`target`/`predict` softmaxes), each of `INDEX_CONFIGS` (segments, fixed point, …) timed the same way, with whether 3
runs are bitwise equal and the similarity of its `d_k` to the segment sum's (the first config); it stops starting
configs after a fifth of `--budget`; then cuDNN's indexer backward (non-deterministic; its time, which includes `d_q`,
for reference) and the similarity of each config's `d_k`, `d_w` (and with `with_dq` its `d_q`) to cuDNN's; a `with_dq`
config's time against cuDNN's backward plus the fastest `d_k`, which it would replace in the layer. Then the
sparse-attention backward: builds the problem of `bench.bench_deterministic` (s_q rows, H 64, D = DV 512, 640 slots per
row: the 128 window slots, then 512 random compressed entries of s_q // 4; FlashMLA's forward for `out` and `lse`),
times cuDNN's non-deterministic backward and every variant of `CONFIGS` (CUDA events: 3 warm-up calls, median of
`--iters`), then the dq kernel's tiles of `DQ_CONFIGS` on top of the fastest. For each: whether 3 runs are bitwise equal
and how `dq`, `dkv`, `d_sink` agree with cuDNN's (`2Σab / Σ(a²+b²)`; the parity bar is 1 − 2e-3); one line per variant,
then the fastest that repeats and agrees, the `_DET_DEFAULT` line that makes it the default
(nbs/04_deterministic.ipynb), a kernel breakdown of it (torch.profiler), and the best two again at `--long` rows. A
variant that fails (compile error, out of memory) prints its error's first line; the sweep goes on. Variants not yet run
when their share of `--budget` seconds has passed are skipped (said so); Triton's cache makes a second run quicker
(`--budget 200` then runs them all).
"""

import argparse
import contextlib
import itertools
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the package of this checkout

import torch  # noqa: E402

from fused_csa_nb import bench  # noqa: E402
from fused_csa_nb import deterministic as det  # noqa: E402
from fused_csa_nb.testing import similarity  # noqa: E402
from fused_csa_nb.kernels import _sparse_bwd  # noqa: E402

# the tiles of the first default (`_det_blocks` at H 64): a variant's keys not given come from `_DET_DEFAULT`
OLD = dict(BLOCK_K=64, num_warps=4, num_stages=None, dq_BLOCK_D=128, dq_num_warps=4)
BIG = dict(BLOCK_K=128, num_warps=8, num_stages=3, dq_BLOCK_D=256, dq_num_warps=8)  # `_DET_DEFAULT`'s tiles
CONFIGS = [  # `_deterministic_sparse_bwd`'s variant keywords, most promising first (the budget may cut the tail);
    # "no spills": ptxas -v (sm_90a, Triton 3.9) reports none for the ds kernel; the old tiles spill ~70-200 bytes
    # the segment sum at the big tiles first: the default (6.96 ms in one chunk, 7.65 in 1 GiB chunks; fixed point 8.44)
    BIG | dict(accumulate="segments"),
    BIG | dict(accumulate="segments", row_order=False),  # the earlier launch order: a 2-D grid
    # the chapter's "Fewer bytes" variants: sorted parts (bitwise the first), bf16 parts, dq fused into the ds program
    BIG | dict(accumulate="segments", sorted_parts=True),
    BIG | dict(accumulate="segments", sorted_parts=True, part_dtype=torch.bfloat16),
    BIG | dict(accumulate="segments", sorted_parts=True, part_dtype=torch.bfloat16, fuse_dq=True),
    BIG | dict(accumulate="segments", sorted_parts=True, part_dtype=torch.bfloat16, seg_BLOCK_P=32, seg_BLOCK_D=128),
    BIG | dict(accumulate="segments", fuse_dq=True),
    BIG | dict(accumulate="fixed_point", fuse_dq=True),
    BIG | dict(accumulate="segments", num_stages=2),
    BIG | dict(accumulate="segments", BLOCK_K=64),
    BIG | dict(accumulate="fixed_point"),  # the default until the segment sum in one chunk (8.44 ms)
    BIG | dict(accumulate="segments", BLOCK_K=64, num_stages=2),
    BIG | dict(accumulate="fixed_point", num_stages=2),  # no spills
    BIG | dict(accumulate="fixed_point", BLOCK_K=64, num_stages=2),  # no spills, 187 registers
    BIG | dict(accumulate="fixed_point", BLOCK_K=32, num_warps=4, num_stages=2),  # no spills
    OLD | dict(accumulate="segments"),  # the chapter's first default (10.25 ms)
    OLD | dict(accumulate="fixed_point"),
    BIG | dict(accumulate="fixed_point", BLOCK_K=64, BLOCK_D=128, num_stages=2),
]
DQ_CONFIGS = [  # the dq kernel's tiles, tried on top of the fastest of CONFIGS (most have dq_BLOCK_D 256, 8 warps)
    dict(dq_BLOCK_D=128, dq_num_warps=8),
    dict(dq_BLOCK_K=128, dq_num_warps=8),
    dict(dq_BLOCK_D=256, dq_num_warps=4),
    dict(dq_BLOCK_K=32, dq_BLOCK_D=256, dq_num_warps=8),
]
INDEX_CONFIGS = [  # `_deterministic_index_dk`'s keywords: the first is the reference of `sim seg`
    dict(accumulate="segments"),  # `_DET_INDEX_DEFAULT` now: one chunk (8 GiB `part_bytes`; 4.3 GB used here)
    dict(accumulate="segments", sorted_parts=True),  # the same bits as the first
    dict(accumulate="segments", sorted_parts=True, part_dtype=torch.bfloat16),
    dict(accumulate="segments", sorted_parts=True, part_dtype=torch.bfloat16, with_dq=True),  # cuDNN's call not needed
    dict(accumulate="segments", with_dq=True),  # d_k, d_w: the first's bits; + d_q (vs cuDNN's whole backward)
    dict(accumulate="fixed_point"),
    dict(accumulate="fixed_point", num_warps=8),
    dict(accumulate="segments", num_warps=8),
    dict(accumulate="segments", part_bytes=1 << 30),  # 1 GiB chunks (the first default)
]


def problem(sq: int, heads: int = 64, topk: int = 640, seed: int = 0):
    "`bench_deterministic`'s inputs at `sq` rows (`n_comp = sq // 4` compressed entries): the backward's arguments."
    return bench._bench_problem(sq, heads, topk, sq // 4, seed)


def name(cfg: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in cfg.items())


def kwargs(cfg: dict) -> str:
    "`cfg` as the keyword arguments of a `dict(...)` call."
    return ", ".join(f"{k}={v!r}" for k, v in cfg.items())


def measure(cfg, args, ref, iters):
    "`(ms, repeat, sim_dq, sim_dkv, sim_dsink)` of one variant."

    def fn():
        return det._deterministic_sparse_bwd(*args, **cfg)

    runs = [fn() for _ in range(3)]
    repeat = all(torch.equal(a, b) for r in runs[1:] for a, b in zip(runs[0], r))
    sims = [similarity(a, b) for a, b in zip(runs[0], ref)]
    del runs
    return (bench.median_time_ms(fn, iters=iters), repeat, *sims)


def sweep(args, configs, iters, t0, budget, label):
    ref = _sparse_bwd(*args)
    cudnn = bench.median_time_ms(lambda: _sparse_bwd(*args), iters=iters)
    print(f"[{label}] cuDNN (non-deterministic) {cudnn:8.3f} ms")
    print(f"{'ms':>8} {'x cuDNN':>8} {'repeat':>6} {'sim dq':>10} {'sim dkv':>10} {'sim dsink':>10}  variant")
    rows = []
    for cfg in configs:
        if time.time() - t0 > budget:
            print(f"{'':>8} skipped (past the {budget:.0f} s budget)  {name(cfg)}")
            continue
        try:
            ms, rep, *sims = measure(cfg, args, ref, iters)
        except Exception as e:  # a config that does not compile or run: say so, go on
            print(f"{'':>8} FAILED {type(e).__name__}: {(str(e).strip().splitlines() or [''])[0][:150]}  {name(cfg)}")
            continue
        ok = rep and min(sims) > 1 - 2e-3
        rows.append((ms, ok, cfg))
        print(f"{ms:8.3f} {ms / cudnn:8.2f} {str(rep):>6} {sims[0]:10.7f} {sims[1]:10.7f} {sims[2]:10.7f}  {name(cfg)}")
    return sorted(rows, key=lambda r: r[0]), cudnn


def profile(cfg, args):
    "Per-kernel CUDA time of one call of `cfg` (torch.profiler)."

    def fn():
        return det._deterministic_sparse_bwd(*args, **cfg)

    fn()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as p:
        fn()
        torch.cuda.synchronize()
    print(p.key_averages().table(sort_by="cuda_time_total", row_limit=12, max_name_column_width=60))


def index_problem(s: int, sk: int, kk: int = 512, heads: int = 64, d: int = 128, seed: int = 0):
    """The indexer backward's arguments of one block of a long sequence on the GPU: random bf16 `q [1, s, heads, d]`,
    `w [1, s, heads]`, `k [1, sk, d]`, `kk` distinct random local entries per row, random `target`/`predict`
    softmaxes over them, `grad_loss` ones(1), `sm_scale` d^-1/2, `loss_coeff` 1."""
    gen = torch.Generator(device="cuda").manual_seed(seed)

    def rnd(*shape):
        return torch.randn(*shape, device="cuda", generator=gen)

    q, w, k = rnd(1, s, heads, d).bfloat16(), rnd(1, s, heads).bfloat16(), rnd(1, sk, d).bfloat16()
    idx = [torch.rand(min(4096, s - r), sk, device="cuda", generator=gen).topk(kk).indices for r in range(0, s, 4096)]
    target, predict = (torch.softmax(rnd(1, s, kk), -1) for _ in range(2))
    return q, w, k, target, predict, torch.cat(idx).int().view(1, s, kk), torch.ones(1, device="cuda"), d**-0.5, 1.0


def first_line(e: Exception) -> str:
    return f"{type(e).__name__}: {(str(e).strip().splitlines() or [''])[0][:150]}"


def index_cudnn(args, iters, label):
    "`((d_k, d_w fp32, d_q), ms)` of cuDNN's indexer backward (non-deterministic d_k, d_w), or `(None, None)`."
    from fused_csa_nb.kernels import indexer_bwd

    try:
        dk = torch.zeros(args[2].shape, dtype=torch.float32, device="cuda")
        dq, dw, _ = indexer_bwd(*args, d_index_k=dk)
        ref = (dk.clone(), dw.float(), dq)
        ms = bench.median_time_ms(lambda: indexer_bwd(*args, d_index_k=dk), iters=iters)
    except Exception as e:
        print(f"{label} FAILED {first_line(e)}")
        return None, None
    print(f"{label} (d_q, d_w, d_k; non-deterministic): {ms:.3f} ms")
    return ref, ms


def index_sweep(o, t0, budget):
    """`_deterministic_index_dk`'s `INDEX_CONFIGS` at `o.index_rows` rows and keys, 512 slots (no config started after
    `budget` seconds); then cuDNN's indexer backward for reference (its JIT last: it does not eat our configs' time)."""
    args = index_problem(o.index_rows, o.index_rows)
    print(f"[indexer: s = s_k = {o.index_rows}, H 64, K 512]")
    print(f"{'ms':>8} {'repeat':>6} {'sim seg':>10}  variant")
    done, seg = [], None
    for cfg in INDEX_CONFIGS:
        if time.time() - t0 > budget:
            print(f"{'':>8} skipped (past the {budget:.0f} s budget)  {name(cfg)}")
            continue

        def fn():
            return det._deterministic_index_dk(*args, **cfg)

        try:
            runs = [fn() for _ in range(3)]
            repeat = all(torch.equal(a, b) for r in runs[1:] for a, b in zip(runs[0], r))
            seg = runs[0] if seg is None else seg
            sim, out = similarity(runs[0][0], seg[0]), runs[0]
            del runs
            ms = bench.median_time_ms(fn, iters=o.iters)
        except Exception as e:  # a config that does not compile or run: say so, go on
            print(f"{'':>8} FAILED {first_line(e)}  {name(cfg)}")
            continue
        done.append((ms, cfg, out))
        print(f"{ms:8.3f} {str(repeat):>6} {sim:10.7f}  {name(cfg)}")
    ref, cudnn = index_cudnn(args, o.iters, "cuDNN's indexer backward")
    if ref is not None:
        print(f"{'ms':>8} {'x cuDNN':>8} {'sim dk':>10} {'sim dw':>10} {'sim dq':>10}  (vs cuDNN)  variant")
        for ms, cfg, out in done:
            sims = [f"{similarity(a, b):10.7f}" for a, b in zip(out, ref)] + [f"{'-':>10}"]  # d_q: with_dq only
            print(f"{ms:8.3f} {ms / cudnn:8.2f} {sims[0]} {sims[1]} {sims[2]}  {name(cfg)}")
    plain = [r for r in done if not r[1].get("with_dq")]  # d_k, d_w only: the layer's call today
    if plain:
        best_ms, best, _ = min(plain, key=lambda r: r[0])
        parts = {k: best.get(k, v) for k, v in det._DET_INDEX_PARTS.items()}
        print(
            f"the fastest; to make it the default (nbs/04_deterministic.ipynb, then export): "
            f'_DET_INDEX_DEFAULT = "{best["accumulate"]}", _DET_INDEX_PARTS = dict({kwargs(parts)})'
        )
        for ms, cfg, _ in done:  # with d_q: what the layer would run instead of cuDNN's backward + the fastest
            if cfg.get("with_dq") and cudnn:
                print(
                    f"{name(cfg)}: {ms:.3f} ms instead of cuDNN's {cudnn:.3f} + {best_ms:.3f} ({best_ms + cudnn:.3f})"
                )


BF16 = dict(sorted_parts=True, part_dtype=torch.bfloat16)  # the parts of "Fewer bytes": sorted, bf16
# the earlier defaults (before det_sweep --segments): fp32 parts in pair order, a 16 x 64 segment-sum tile
FP32 = dict(part_dtype=torch.float32, sorted_parts=False, seg_BLOCK_P=16, seg_BLOCK_D=64)
STEP_VARIANTS = {  # label → (`_DET_DEFAULT` updates, `_DET_INDEX_PARTS` updates): the step's deterministic kernels
    "today": ({}, {}),  # the defaults, `_DET_INDEX_DQ`'s indexer d_q included
    "fp32-parts": (FP32, FP32),  # the earlier parts and tile (the same d_q)
    "sorted": (dict(sorted_parts=True), dict(sorted_parts=True)),  # bitwise today's (same sums, same order)
    "fused-dq": (dict(fuse_dq=True), {}),  # bitwise today's
    "rows-grid": (dict(row_order=False), {}),  # the earlier launch order (2-D grid); bitwise today's
    "sorted-bf16": (BF16, BF16),
    "sorted-bf16-fused-dq": (BF16 | dict(fuse_dq=True), BF16),
    "sorted-bf16-fused-dq-seg32x128": (BF16 | dict(fuse_dq=True, seg_BLOCK_P=32, seg_BLOCK_D=128), BF16),
    "fixed-point-fused-dq": (dict(accumulate="fixed_point", fuse_dq=True), dict(accumulate="fixed_point")),
    # the indexer's d_q from cuDNN's indexer backward (`with_dq=False`: `_DET_INDEX_DQ = "cudnn"`) or from the
    # deterministic kernel (`with_dq=True`: "deterministic", cuDNN's indexer backward not called; the default)
    # ("bitwise today's" False where d_q changes: the indexer `wq`'s gradient differs; d_k, d_w the same bits)
    "sorted-bf16-fused-dq+index-dq": (BF16 | dict(fuse_dq=True), BF16 | dict(with_dq=True)),
    "today+cudnn-index-dq": ({}, dict(with_dq=False)),
}
GOAL = {4096: 1.3, 65536: 1.5}  # the bound on deterministic / default step time


@contextlib.contextmanager
def step_variant(attn: dict, index: dict):
    """`_DET_DEFAULT` updated by `attn`, the indexer's defaults by `index` (its `accumulate` into `_DET_INDEX_DEFAULT`,
    `with_dq` into `_DET_INDEX_DQ` through `_set_det_index_dq`: "deterministic" if true, "cudnn" if false, the default's
    if absent; the rest into
    `_DET_INDEX_PARTS`), for the steps run inside (the layer reads them at each call); all restored on exit."""
    saved = det._DET_DEFAULT, det._DET_INDEX_DEFAULT, det._DET_INDEX_PARTS
    parts = {k: v for k, v in index.items() if k not in ("accumulate", "with_dq")}
    det._DET_DEFAULT = {**saved[0], **attn}
    det._DET_INDEX_DEFAULT = index.get("accumulate", saved[1])
    det._DET_INDEX_PARTS = {**saved[2], **parts}
    dq_saved = det._set_det_index_dq(index_dq(index))
    try:
        yield
    finally:
        det._DET_DEFAULT, det._DET_INDEX_DEFAULT, det._DET_INDEX_PARTS = saved
        det._set_det_index_dq(dq_saved)


def index_dq(index: dict) -> str:
    """The `_DET_INDEX_DQ` value of a variant's indexer settings: its `with_dq` says whether d_q is ours (True) or
    cuDNN's (False); without it, the default's."""
    if "with_dq" not in index:
        return det._DET_INDEX_DQ
    return "deterministic" if index["with_dq"] else "cudnn"


def step_fn(layer):
    "One training step of `layer` (fresh gradients: rewritten, not accumulated, by a graph's replays)."

    def run(*ins):
        layer.zero_grad(set_to_none=True)
        return bench._step(layer, ins)[:2]

    return run


def step_tensors(layer, inputs, hold=None) -> dict:
    """Output, loss and every gradient (inputs' and weights') of one eager step, copied to `hold` (a device; `None`:
    where they are). A 65K step's tensors are gigabytes: the sweep holds those it compares on the CPU."""
    layer.zero_grad(set_to_none=True)
    out, loss, q, k = bench._step(layer, inputs)
    res = {"out": out, "loss": loss, "d_query": q.grad, "d_key": k.grad}
    res |= {f"d_{n}": p.grad for n, p in layer.named_parameters() if p.grad is not None}
    res = {n: t.detach().to(hold or t.device, copy=True) for n, t in res.items() if t is not None}
    layer.zero_grad(set_to_none=True)
    return res


def fmt(ms) -> str:
    "A time in ms to 3 decimals, or `-` for none."
    return "-" if ms is None else f"{ms:.3f}"


def time_step(layer, inputs, iters: int) -> dict:
    """`dict(graphed, queued)`: `bench.gpu_bound_ms` of one step — the median ms of `iters` CUDA-graph replays (None
    and the error's first line in `graph_error` if it does not capture) and the mean ms of steps queued back to back."""
    run = step_fn(layer)
    t = bench.gpu_bound_ms(lambda: run(*inputs), warmup=2, iters=iters)
    layer.zero_grad(set_to_none=True)
    return dict(graphed=t["graphed_ms"], queued=t["queued_ms"], graph_error=t.get("graphed_error"))


def repeats(layer, inputs, ref: dict, n: int = 5) -> bool:
    """Whether `n` eager steps give `ref`'s tensors (`step_tensors`) bit for bit; one step's tensors held at a time (a
    65K step's gradients are gigabytes), where `ref`'s are."""
    hold = next(iter(ref.values())).device
    return all(all(torch.equal(t, ref[k]) for k, t in step_tensors(layer, inputs, hold).items()) for _ in range(n))


def kernel_table(layer, inputs, rows: int = 12) -> None:
    "The CUDA kernels of one eager step by total time (torch.profiler), the first `rows`."
    run = step_fn(layer)
    run(*inputs)
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as p:
        run(*inputs)
        torch.cuda.synchronize()
    layer.zero_grad(set_to_none=True)
    table = p.key_averages().table(sort_by="cuda_time_total", row_limit=rows, max_name_column_width=60)
    print("\n".join("    " + line for line in table.splitlines()))


def warm_variants(o, names) -> None:
    """Compile the variants' Triton kernels first, `o.warm` processes at once (compiling is the host's work, one
    kernel at a time in a process): each runs one eager step of its variant at the first `--step-sq` (`--warm-only`),
    so that the timed runs find every kernel in Triton's disk cache. A process that fails says so; the sweep goes on
    (its variant then compiles in the sweep)."""
    import subprocess
    from concurrent.futures import ThreadPoolExecutor

    sq, t = o.step_sq.split(",")[0], time.time()

    def one(label):
        cmd = [sys.executable, __file__, "--step", "--step-sq", sq, "--step-variants", label, "--warm-only"]
        p = subprocess.run(cmd, capture_output=True, text=True)
        return label, p.returncode, ((p.stdout + p.stderr).strip().splitlines() or [""])[-1]

    with ThreadPoolExecutor(o.warm) as ex:
        for label, rc, last in ex.map(one, names):
            print(f"warm {label}: " + ("ok" if rc == 0 else f"FAILED {last}"))
    print(f"warmed {len(names)} variants at {sq} tokens in {time.time() - t:.0f} s, {o.warm} at once")


def step_section(o) -> None:
    """The whole training step at each of `o.step_sq` tokens: the default, then `deterministic=True` with each of
    `o.step_variants`: GPU-bound times, five-run bitwise repeat, similarity to the default, per-kernel profile."""
    import dataclasses

    from fused_csa_nb.attention import CompressedSparseAttention

    names = list(STEP_VARIANTS) if o.step_variants == "all" else o.step_variants.split(",")
    if o.seg:  # the segment sums' settings from --segments, in every variant (the indexer's tile capped at 128)
        bp, bd, w, sp = (int(x) for x in o.seg.split(","))
        seg = dict(seg_BLOCK_P=bp, seg_BLOCK_D=bd, seg_warps=w, seg_split=sp or None)
        seg_i = dict(seg, seg_BLOCK_D=min(bd, 128))  # the indexer's parts are 128 wide
        for label, (attn, index) in list(STEP_VARIANTS.items()):
            STEP_VARIANTS[label] = ({**attn, **seg}, {**index, **seg_i})
        print(f"every variant's segment sums: {seg} (the indexer's: {seg_i})")
    unknown = [n for n in names if n not in STEP_VARIANTS]
    if unknown:
        raise SystemExit(f"--step-variants: unknown {unknown}; known: {list(STEP_VARIANTS)}")
    if o.warm and not o.warm_only:
        warm_variants(o, names)
    summary = []
    for sq in (int(x) for x in o.step_sq.split(",")):
        iters = o.step_iters if sq <= 4096 else o.step_iters_long
        _, fused, inputs = bench.layer_pair(4, sq)
        detl = CompressedSparseAttention(dataclasses.replace(fused.cfg, deterministic=True), 4)
        detl.load_state_dict(fused.state_dict())
        detl.to(inputs[0].device, inputs[0].dtype)  # the sink stays fp32, as in `layer_pair`
        if o.warm_only:  # one eager step per variant: its kernels compiled into Triton's disk cache
            for label in names:
                with step_variant(*STEP_VARIANTS[label]):
                    step_tensors(detl, inputs)
            torch.cuda.synchronize()
            return
        base = time_step(fused, inputs, iters)
        hold = "cpu" if sq > 16384 else None  # the compared steps' tensors: on the CPU past 16K (see step_tensors)
        ref = step_tensors(fused, inputs, hold)
        print(
            f"\n[step, {sq} tokens, ratio 4] default: graphed {fmt(base['graphed'])} ms, queued {base['queued']:.3f} ms"
        )
        kernel_table(fused, inputs)
        today = None  # the step's tensors with today's kernels, once measured
        for label in names:
            attn, index = STEP_VARIANTS[label]
            if o.step_budget and time.time() - o.t0 > o.step_budget:  # a call of limited length keeps its summary
                print(f"[{sq}] {label}: skipped, the --step-budget of {o.step_budget:.0f} s has passed")
                continue
            try:
                with step_variant(attn, index):
                    t = time_step(detl, inputs, iters)
                    first = step_tensors(detl, inputs, hold)
                    repeat = repeats(detl, inputs, first, 4)  # five runs in all
                    sim = min(similarity(first[n], ref[n]) for n in ref)  # float64 in chunks, where the tensors are
                    same = "-" if today is None else all(torch.equal(first[n], today[n]) for n in today)
                    today = first if label == "today" else today  # the others: bitwise today's step?
                    del first
                    key = "graphed" if t["graphed"] and base["graphed"] else "queued"  # like with like
                    ms, x = t[key], t[key] / base[key]
                    print(
                        f"[{sq}] {label}: graphed {fmt(t['graphed'])} ms, queued {t['queued']:.3f} ms, "
                        f"x default {x:.2f} ({key}), bitwise x5 {repeat}, min sim vs default {sim:.6f}, "
                        f"bitwise today's {same}" + (f" (graph: {t['graph_error']})" if t.get("graph_error") else "")
                    )
                    kernel_table(detl, inputs)
            except Exception as e:  # e.g. out of memory at 65K: say so, go on
                print(f"[{sq}] {label}: FAILED {first_line(e)}")
                continue
            summary.append((sq, label, ms, x, repeat, sim))
            torch.cuda.empty_cache()
        del fused, detl, inputs, ref, today
        torch.cuda.empty_cache()
    step_summary(summary)


def step_summary(summary) -> None:
    """The table of `(tokens, variant, ms, x default, bitwise x5, min sim)` rows against `GOAL`, and the lines that make
    the fastest variant that repeats (and agrees with the default step) the default."""
    print(f"\n{'tokens':>6} {'ms':>9} {'x default':>9} {'goal':>5} {'bitwise x5':>10} {'min sim':>9}  variant")
    for sq, label, ms, x, rep, sim in summary:
        goal = GOAL.get(sq)
        ok = "" if goal is None else ("met" if x <= goal else f">{goal}")
        print(f"{sq:6d} {ms:9.3f} {x:9.2f} {ok:>5} {str(rep):>10} {sim:9.6f}  {label}")
    labels = {r[1] for r in summary}  # a variant qualifies if it repeats and agrees at every size measured
    good = [lb for lb in labels if all(r[4] and r[5] > 1 - 2e-2 for r in summary if r[1] == lb)]
    if good:
        worst = {lb: max(r[3] for r in summary if r[1] == lb) for lb in good}
        best = min(worst, key=worst.get)  # the least worst ratio over the sizes measured
        attn, index = STEP_VARIANTS[best]
        parts = {**det._DET_INDEX_PARTS, **{k: v for k, v in index.items() if k not in ("accumulate", "with_dq")}}
        print(
            f"fastest that repeats (its worst ratio {worst[best]:.2f}): {best}; to make it the default "
            f"(nbs/04_deterministic.ipynb, then export): _DET_DEFAULT = dict({kwargs({**det._DET_DEFAULT, **attn})}), "
            f'_DET_INDEX_DEFAULT = "{index.get("accumulate", det._DET_INDEX_DEFAULT)}", '
            f'_DET_INDEX_PARTS = dict({kwargs(parts)}), _DET_INDEX_DQ = "{index_dq(index)}"'
        )


SEG_TILES = [(16, 64), (32, 128), (64, 128), (64, 256), (128, 128)]  # the segment sum's BLOCK_P x BLOCK_D
SEG_PROGRAMS = (4, 16)  # programs per SM of its persistent grid (`det._programs`: 4)
SEG_WARPS = (4, 8)  # its warps (4 today)
SEG_SPLITS = (None, 256)  # whole segments (today), or pieces of at most this many pairs (`det._pieces`)
SEG_SHAPES = (  # label, query rows, compressed rows, slots per row (window first), of which window, D
    ("attention, 4,096 rows", 4096, 1024, 640, 128, 512),  # ~2,000 parts a compressed key: long segments
    ("attention, a 65K chunk", 5824, 16384, 640, 128, 512),  # one 8-GiB chunk of the 65K step: short segments
    ("indexer d_k, 4,096 rows", 4096, 1024, 512, 0, 128),
)


def segment_problem(rows: int, n_comp: int, k: int, window: int, seed: int = 0):
    """The pairs of `rows` query rows (`window` window slots, then `k - window` random compressed rows of `n_comp`,
    as `problem`'s) → `(targets, n)`: each pair's kv row (`n` = none), kv rows in all."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    t = torch.arange(rows, device="cuda")[:, None]
    win = t - torch.arange(window, device="cuda")[None]
    comp = rows + torch.randint(0, n_comp, (rows, k - window), device="cuda", generator=g)
    idx = torch.cat([torch.where(win >= 0, win, -1), comp], 1).to(torch.int32)
    return det._pair_targets(idx, None, rows + n_comp, 0, rows), rows + n_comp


def segment_ref(targets, part, n: int):
    "`acc [n, D]` float64: each kv row's parts summed (`index_add_` in chunks of pairs), the none rows left out."
    acc = torch.zeros(n + 1, part.shape[1], dtype=torch.float64, device=part.device)
    for p0 in range(0, part.shape[0], 1 << 18):
        acc.index_add_(0, targets[p0 : p0 + (1 << 18)].long(), part[p0 : p0 + (1 << 18)].double())
    return acc[:n]


def segment_row(seg, part, srt: bool, shape, ref, bp: int, bd: int, warps: int, split, iters: int):
    """`(ms, bitwise x2, max error / max |ref|)` of `det._segment_sum` of `part` (sorted or not) into a float32
    `acc` of `shape`, tiles `bp` x `bd`, `warps` warps, segments in pieces of `split` pairs (None: whole); `ref` the
    float64 sums."""
    acc = torch.zeros(shape, dtype=torch.float32, device="cuda")

    def run():
        det._segment_sum(seg, part, acc, srt, bp, bd, warps, split)

    run()
    one = acc.clone()
    acc.zero_()
    run()
    same = torch.equal(one, acc)
    err = (one.double() - ref).abs().max().item() / ref.abs().max().item()
    return bench.median_time_ms(run, iters=iters), same, err


def segment_section(o) -> None:
    """The segment sum alone (`det._segment_sum`; second to the ds kernel in the step's profile): at each of
    `SEG_SHAPES`, fp32 and bf16 parts, in pair order and sorted, each tile of `SEG_TILES`, grid of `SEG_PROGRAMS`,
    warps of `SEG_WARPS` and split of `SEG_SPLITS` →
    median ms, GB/s of parts read, whether two runs are bitwise equal and the largest error against a float64 sum
    relative to the largest |sum|."""
    programs = det._programs
    for label, rows, n_comp, k, window, d in SEG_SHAPES:
        targets, n = segment_problem(rows, n_comp, k, window)
        seg = det._segments(targets, n)
        lens = (seg[2][1:] - seg[2][:-1]).float()
        nseg = int(seg[3])
        print(f"\n[segments] {label}: {targets.shape[0]} pairs, {nseg} segments, parts per segment mean "
              f"{lens[:nseg].mean():.0f}, max {lens[:nseg].max():.0f}")  # fmt: skip
        g = torch.Generator(device="cuda").manual_seed(1)
        base = torch.randn(targets.shape[0], d, device="cuda", generator=g)
        for dt in (torch.float32, torch.bfloat16):
            pair = base.to(dt)
            ref = segment_ref(targets, pair, n)
            for srt in (False, True):
                part = pair[seg[1]] if srt else pair  # sorted: part i is pair order[i]
                gb = part.numel() * part.element_size() / 1e9
                for m in SEG_PROGRAMS:
                    det._programs = lambda dev, m=m: m * programs(dev) // 4
                    for (bp, bd), w, sp in itertools.product(SEG_TILES, SEG_WARPS, SEG_SPLITS):
                        if d % bd:  # a tile wider than the parts (the indexer's are 128 wide)
                            continue
                        tag = f"  {str(dt)[6:]:8s} sorted {srt!s:5s} {m:2d}/SM {bp:2d}x{bd:3d} {w} warps split {sp}:"
                        try:
                            ms, same, err = segment_row(seg, part, srt, (n, d), ref, bp, bd, w, sp, o.iters)
                        except Exception as e:  # e.g. too many registers for a tile
                            print(f"{tag} FAILED {first_line(e)}")
                            continue
                        print(f"{tag} {ms:7.3f} ms {gb / ms * 1e3:6.0f} GB/s  bitwise x2 {same}  max err {err:.1e}")
                det._programs = programs
            del pair, ref
        del base, targets, seg
        torch.cuda.empty_cache()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sq", type=int, default=4096)
    ap.add_argument("--long", type=int, default=16384, help="rows of the second run (best two); 0: none")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--budget", type=float, default=70.0, help="seconds after which untried variants are skipped")
    ap.add_argument("--no-profile", action="store_true")
    ap.add_argument("--index-rows", type=int, default=16384, help="the indexer section's rows and keys; 0: none")
    ap.add_argument("--index-only", action="store_true", help="the indexer section alone")
    ap.add_argument("--step", action="store_true", help="the whole training step per variant, alone (see above)")
    ap.add_argument("--step-sq", default="4096,65536", help="tokens of the timed steps, comma-separated")
    ap.add_argument("--step-iters", type=int, default=30, help="timed steps per median at <= 4,096 tokens")
    ap.add_argument("--step-iters-long", type=int, default=20, help="timed steps per median above 4,096 tokens")
    ap.add_argument("--step-variants", default="all", help=f"comma-separated labels of {list(STEP_VARIANTS)}")
    ap.add_argument(
        "--warm",
        type=int,
        default=0,
        help="with --step: first compile the variants' kernels in this many processes at once (0: in the sweep)",
    )
    ap.add_argument("--warm-only", action="store_true", help=argparse.SUPPRESS)  # one such process
    ap.add_argument("--segments", action="store_true", help="the segment sum alone, its tiles and grids (see above)")
    ap.add_argument(
        "--seg",
        default=None,
        help="with --step: BLOCK_P,BLOCK_D,warps,split of the segment sums (the attention's and the indexer's) in "
        "every variant (split 0: whole), e.g. 64,128,8,256 from --segments",
    )
    ap.add_argument(
        "--step-budget",
        type=float,
        default=0.0,
        help="with --step: seconds after which variants not yet started are skipped (summary still printed; 0: none)",
    )
    o = ap.parse_args()
    t0 = o.t0 = time.time()
    bench._cupti_teardown()  # the profiles below detach CUPTI at their end: later launches cost what they did
    torch.backends.cuda.matmul.allow_tf32 = False
    if o.segments:
        segment_section(o)
        print(f"\ntotal {time.time() - t0:.0f} s")
        return
    if o.step:
        step_section(o)
        print(f"\ntotal {time.time() - t0:.0f} s")
        return
    if o.index_rows:
        try:
            index_sweep(o, t0, o.budget * 0.2)
        except Exception as e:  # e.g. out of memory building the problem
            print(f"indexer section FAILED {first_line(e)}")
        torch.cuda.empty_cache()
        print()
    if o.index_only:
        return
    args = problem(o.sq)
    rows, cudnn = sweep(args, CONFIGS, o.iters, t0, o.budget * 0.6, f"s_q {o.sq}")
    good = [r for r in rows if r[1]]
    if not good:
        print("no variant repeats bitwise and agrees with cuDNN")
        return
    print("\nthe dq kernel's tiles on top of the fastest:")
    more, _ = sweep(args, [good[0][2] | c for c in DQ_CONFIGS], o.iters, t0, o.budget * 0.75, f"s_q {o.sq}")
    good = sorted(good + [r for r in more if r[1]], key=lambda r: r[0])
    best = good[0]
    print(f"\nbest: {best[0]:.3f} ms = {best[0] / cudnn:.2f}x cuDNN  {name(best[2])}")
    print(f"to make it the default (nbs/04_deterministic.ipynb, then export): _DET_DEFAULT = dict({kwargs(best[2])})")
    if not o.no_profile and time.time() - t0 < o.budget * 0.8:
        try:
            profile(best[2], args)
        except Exception as e:
            print(f"profile FAILED {type(e).__name__}: {(str(e).strip().splitlines() or [''])[0][:150]}")
    if o.long and time.time() - t0 < o.budget:
        del args
        torch.cuda.empty_cache()
        try:
            args = problem(o.long)
            sweep(args, [r[2] for r in good[:2]], max(5, o.iters // 4), t0, o.budget + 30, f"s_q {o.long}")
        except Exception as e:
            print(f"s_q {o.long} FAILED {type(e).__name__}: {(str(e).strip().splitlines() or [''])[0][:150]}")
    print(f"\ntotal {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
