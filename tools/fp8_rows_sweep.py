#!/usr/bin/env python3
"""Time the one-pass FP8 rows (`reference._fp8_rows_pass`: rotation + e4m3 quantisation) over a program's rows and
warps, on one GPU, at the shapes the FP8 selection quantises.

Usage: python tools/fp8_rows_sweep.py [--iters 30] [--rows 2 4 8 16 32] [--warps 1 2 4 8]

The shapes: a 262,144-token step's query block (2,048 rows × 64 indexer heads of 128) and its keys (65,536 rows of
128), bf16 standard normal. Each configuration's output is compared bit for bit with the default's
(`block_rows=None`, `num_warps=None`) before it is timed; CUDA events, the median of `--iters` calls after 3 untimed
ones. Prints one line per configuration, fastest first: the block's ms, the keys' ms, GB/s of the block (bytes read and
written), equal.
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout's package, wherever the script runs from

import torch  # noqa: E402

from fused_csa_nb.bench import median_time_ms  # noqa: E402
from fused_csa_nb.reference import _fp8_rows_pass  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--rows", type=int, nargs="+", default=[2, 4, 8, 16, 32])
    ap.add_argument("--warps", type=int, nargs="+", default=[1, 2, 4, 8])
    args = ap.parse_args()
    g = torch.Generator(device="cuda").manual_seed(0)
    shapes = {"block": (1, 2048, 64, 128), "keys": (1, 65536, 128)}
    xs = {k: torch.randn(*s, device="cuda", generator=g).bfloat16() for k, s in shapes.items()}

    def run(x, br, w):
        return _fp8_rows_pass(x, rotate=True, quantize=True, dtype=torch.float8_e4m3fn, block_rows=br, num_warps=w)

    ref = {k: run(x, None, None) for k, x in xs.items()}
    rows = []
    for br in [None, *args.rows]:
        for w in [None, *args.warps] if br is None else args.warps:
            try:
                same = all(
                    torch.equal(o[0].view(torch.uint8), r[0].view(torch.uint8)) and torch.equal(o[1], r[1])
                    for o, r in ((run(x, br, w), ref[k]) for k, x in xs.items())
                )
                ms = {k: median_time_ms(lambda x=x: run(x, br, w), iters=args.iters) for k, x in xs.items()}
            except Exception as e:  # a tile the compiler refuses (registers, shared memory)
                print(f"rows {br} warps {w}: {type(e).__name__}: {str(e).splitlines()[0][:120]}", flush=True)
                continue
            gbs = xs["block"].numel() * 3 / ms["block"] / 1e6  # 2 bytes read and 1 written a value
            rows.append((ms["block"], ms["keys"], gbs, br, w, same))
            print(
                f"rows {br} warps {w}: block {ms['block']:.3f} ms, keys {ms['keys']:.3f} ms, equal {same}", flush=True
            )
    print(
        f"\n{torch.cuda.get_device_name()}, torch {torch.__version__}; fastest first"
        " (None: the default, 4 rows of 1 warp):"
    )
    print("block ms  keys ms  block GB/s  rows  warps  equal")
    for b, k, gbs, br, w, same in sorted(rows, key=lambda r: r[0]):
        print(f"{b:8.3f} {k:8.3f} {gbs:10.0f}  {str(br):>4}  {str(w):>5}  {same}")


if __name__ == "__main__":
    main()
