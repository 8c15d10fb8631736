#!/usr/bin/env python3
"""What the deterministic backward's dKV accumulation costs, by kind, at the bench shape (one GPU, under a minute).

Usage: python tools/det_atomics.py [--sq 4096] [--iters 20]

The deterministic backward (chapter *Deterministic mode*) writes each valid `(row, slot)` pair's dKV part `[D]` as
bf16, sorts the pairs by kv row and sums each row's parts in a fixed order (the segment sum). cuDNN's default backward
adds the same contributions into dKV with fp32 atomics instead, in an order that changes from run to run. Atomics can
be made order-free: where every contribution to a kv row is a multiple of one power of two `2^e` and the row's partial
sums stay below `2^(24+e)` in magnitude, every fp32 addition is exact, so any order gives the same bits (integers, as
in the chapter's fixed-point variant, are the same idea at 64 bits).

This script times the three ways of handing the parts on, alone, on the pairs of `bench._bench_problem(sq)` (the
128 window slots and 512 random compressed entries per row; 2.6 M pairs at 4,096 rows, 512 columns each): a kernel
makes each pair's part with one tensor-core product, as the ds kernel does, then
1. stores it as bf16 in pair order (what the ds kernel writes today; the sort and the segment sum come on top),
2. adds it into an fp32 `[N, D]` buffer with atomics (Triton lowers `tl.atomic_add` on fp32 to vector atomics on
   SM90: the PTX instructions are printed), raw and rounded to a grid of `2^-8`,
3. adds it rounded to that grid as int64 atomics (the fixed-point variant's width),
for a few tiles; then checks that the grid-rounded fp32 sums repeat bitwise and equal the int64 sums exactly, and
times cuDNN's backward and the deterministic backward (default and fixed point) on the same problem for scale.
The grid here is a constant (the parts are small); a real kernel would need each kv row's bound before its first
addition, which the ds kernel only knows after computing that row's contributions.
"""

import argparse
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout's package, wherever the script runs from

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from fused_csa_nb import bench  # noqa: E402
from fused_csa_nb.deterministic import _deterministic_sparse_bwd  # noqa: E402
from fused_csa_nb.kernels import _sparse_bwd  # noqa: E402

STORE, ATOMIC_F32, ATOMIC_I64 = 0, 1, 2
TILES = [(128, 64, 8), (128, 128, 8), (64, 64, 4), (64, 128, 4)]  # (pairs, columns, warps) a program


@triton.jit
def _parts_kernel(
    acc_ptr, acc64_ptr, part_ptr, idx_ptr, a_ptr, b_ptr, P, N, inv_grid, grid,
    D: tl.constexpr, BK: tl.constexpr, BD: tl.constexpr, MODE: tl.constexpr, QUANT: tl.constexpr,
):  # fmt: skip
    "Pairs `[pid·BK, …)`: part = a·b (one product, fp32), then stored, or added into kv row `idx[pair]` (see above)."
    pid = tl.program_id(0)
    ks = pid * BK + tl.arange(0, BK)
    idx = tl.load(idx_ptr + ks, mask=ks < P, other=-1)
    valid = (idx >= 0) & (idx < N)
    rows = tl.where(valid, idx, 0).to(tl.int64)
    a = tl.load(a_ptr + (pid % 64) * BK * 64 + tl.arange(0, BK)[:, None] * 64 + tl.arange(0, 64)[None, :])
    for d0 in tl.static_range(0, D, BD):
        dd = d0 + tl.arange(0, BD)
        c = tl.dot(a, tl.load(b_ptr + tl.arange(0, 64)[:, None] * D + dd[None, :]))
        if QUANT:
            c = tl.floor(c * inv_grid + 0.5) * grid  # a multiple of `grid`
        if MODE == 0:
            tl.store(part_ptr + ks.to(tl.int64)[:, None] * D + dd[None, :], c.to(tl.bfloat16), mask=valid[:, None])
        elif MODE == 1:
            tl.atomic_add(acc_ptr + rows[:, None] * D + dd[None, :], c, mask=valid[:, None], sem="relaxed")
        else:
            fx = (c * inv_grid).to(tl.int64)  # exact: `c` is a multiple of `grid`
            tl.atomic_add(acc64_ptr + rows[:, None] * D + dd[None, :], fx, mask=valid[:, None], sem="relaxed")


def median_ms(fn, iters: int) -> float:
    return bench.median_time_ms(fn, warmup=3, iters=iters, device="cuda")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sq", type=int, default=4096, help="query rows of the bench problem")
    ap.add_argument("--iters", type=int, default=20, help="timed calls per median")
    o = ap.parse_args()
    args = bench._bench_problem(o.sq, 64, 640, o.sq // 4, 0)
    kv, idx = args[1], args[6]
    n, d = kv.shape
    flat = idx.flatten().contiguous()
    pairs = flat.numel()
    g = torch.Generator(device="cuda").manual_seed(1)
    a = (torch.randn(64 * 128, 64, device="cuda", generator=g) * 0.05).bfloat16()
    b = (torch.randn(64, d, device="cuda", generator=g) * 0.05).bfloat16()
    acc = torch.zeros(n, d, device="cuda")
    acc64 = torch.zeros(n, d, device="cuda", dtype=torch.int64)
    part = torch.empty(pairs, d, device="cuda", dtype=torch.bfloat16)
    grid_step = 2.0**-8

    def launch(mode, quant, bk=128, bd=64, warps=8):
        return _parts_kernel[(triton.cdiv(pairs, bk),)](
            acc, acc64, part, flat, a, b, pairs, n, 1 / grid_step, grid_step,
            D=d, BK=bk, BD=bd, MODE=mode, QUANT=quant, num_warps=warps,
        )  # fmt: skip

    valid = int((flat >= 0).sum())
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}")
    print(f"{o.sq} rows: {pairs} pairs ({valid} valid) x {d} columns, {n} kv rows; medians of {o.iters} (ms)")
    kinds = [(STORE, False, "bf16 part store"), (ATOMIC_F32, False, "fp32 atomics"),
             (ATOMIC_F32, True, "fp32 atomics, grid"), (ATOMIC_I64, True, "int64 atomics")]  # fmt: skip
    print(f"{'pairs':>5} {'cols':>4} {'warps':>5} " + " ".join(f"{k[2]:>20}" for k in kinds))
    for bk, bd, warps in TILES:
        ms = [median_ms(lambda m=m, q=q: launch(m, q, bk, bd, warps), o.iters) for m, q, _ in kinds]
        print(f"{bk:5d} {bd:4d} {warps:5d} " + " ".join(f"{t:20.3f}" for t in ms), flush=True)
    ptx = launch(ATOMIC_F32, True).asm["ptx"]
    print("atomic instructions in the fp32 kernel's PTX:", sorted(set(re.findall(r"\b(?:red|atom)\.[a-z0-9_.]+", ptx))))

    def sums(mode):
        acc.zero_()
        acc64.zero_()
        launch(mode, True)
        return (acc if mode == ATOMIC_F32 else acc64).clone()

    f1, f2, i64 = sums(ATOMIC_F32), sums(ATOMIC_F32), sums(ATOMIC_I64)
    exact = torch.equal(f1.double() / grid_step, i64.double())
    print(f"grid-rounded fp32 atomics: two runs bitwise equal {torch.equal(f1, f2)}; equal to the int64 sums {exact}")
    for label, fn in (
        ("cuDNN backward (fp32 atomics, not repeatable)", lambda: _sparse_bwd(*args)),
        ("deterministic backward, default", lambda: _deterministic_sparse_bwd(*args)),
        ("deterministic backward, fixed point", lambda: _deterministic_sparse_bwd(*args, accumulate="fixed_point")),
    ):
        print(f"{label:46s} {median_ms(fn, o.iters):.3f}", flush=True)


if __name__ == "__main__":
    main()
