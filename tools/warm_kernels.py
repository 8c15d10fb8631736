#!/usr/bin/env python3
"""Compile the kernels the stored run's timed chapters share, before they run (`execute_nb.py --warm`).

Usage: python tools/warm_kernels.py [--sq N]   (on a CUDA GPU; prints what each piece took)
       python tools/warm_kernels.py --cpu      (the pieces on the CPU stand-ins of the kernels: a check of their calls)

cuDNN's DSA kernels compile through `cute.compile` once per process (seconds a kernel, no cache across processes),
and their compile keys barely depend on the sequence length. The timed chapters run last, one after another in one
process (`run_tests.py --store`), and the first of them compiled every kernel inside its own cells' time. Run in that
process while the other chapters still run (`run_tests.py` starts it early and lets its notebooks start once the
others have ended), `warm()` compiles them before: fused layers at the bench chapter's widths (H = 64, D = 512,
top-512, hidden 1,024) on a short sequence — ratios 0, 4 and 128, a training and an inference step each; FP8
selection; the deterministic mode; a packed (THD) step; a prompt and decode steps through a cache. Nothing here is
measured or stored, and a piece that fails says so and does not stop the others (the chapters then compile what they
need, as before).
"""

import argparse
import dataclasses
import sys
import time

import torch

from fused_csa_nb import bench
from fused_csa_nb.attention import CompressedSparseAttention


def _layer(ratio: int, sq: int, device="cuda", precision="bf16", **cfg):
    """The bench chapter's fused layer (`bench.layer_pair`, its `precision`) with config fields `cfg` replaced, and its
    inputs."""
    _, fused, inputs = bench.layer_pair(ratio, sq, device=device, precision=precision)
    if cfg:
        layer = CompressedSparseAttention(dataclasses.replace(fused.cfg, **cfg), ratio)
        layer.load_state_dict(fused.state_dict())
        fused = layer.to(device, torch.bfloat16)
    return fused, inputs


def _steps(ratio: int, sq: int, device="cuda", **kw):
    "A training and an inference step of a ratio-`ratio` fused layer (`kw`: `_layer`'s)."
    layer, inputs = _layer(ratio, sq, device, **kw)
    for train in (True, False):
        bench._step(layer, inputs, train)


def _packed(sq: int, device="cuda"):
    "A training step of a pack of three documents (THD) at ratio 4."
    layer, inputs = _layer(4, sq, device)
    q, k, x, qr, d_out = (t[:, 0] for t in inputs)
    cu = torch.tensor([0, sq // 4, sq // 2, sq], dtype=torch.int32, device=device)
    q, k = q.detach().requires_grad_(), k.detach().requires_grad_()
    out, loss = layer(q, k, x, qr, cu_seqlens=cu, max_seqlen=sq // 2)
    torch.autograd.backward(
        [out] + ([loss] if loss is not None else []),
        [d_out.view_as(out)] + ([torch.ones_like(loss)] if loss is not None else []),
    )


def _decode(sq: int, device="cuda", steps: int = 3):
    "A prompt of `sq - steps` tokens through a cache at ratio 4, then `steps` one-token steps."
    layer, inputs = _layer(4, sq, device)
    layer.eval()
    cache, n = layer.new_cache(1, sq), sq - steps
    with torch.no_grad():
        layer(*(t[:n] for t in inputs[:4]), cache=cache)
        for i in range(n, sq):
            layer(*(t[i : i + 1] for t in inputs[:4]), cache=cache)


PIECES = {  # label → what it runs
    "ratio 0, 4, 128 (bf16)": lambda sq, dev: [_steps(r, sq, dev) for r in (0, 4, 128)],
    "ratio 4, FP8 selection": lambda sq, dev: _steps(4, sq, dev, precision="fp8"),
    "ratio 4, deterministic": lambda sq, dev: _steps(4, sq, dev, deterministic=True),
    "ratio 4, packed (THD)": _packed,
    "ratio 4, decode": _decode,
}


def warm(sq: int = 1024, device="cuda") -> tuple[list[str], bool]:
    """Run every piece of `PIECES` on `sq` tokens on `device` (`"cpu"`: the CPU stand-ins' check of the pieces, inside
    `testing.stand_in_kernels`) → `(a line per piece: its time, or why it failed; whether every piece ran)`; the CUDA
    cache emptied after, the random-number generators' states as they were (the notebooks after it draw what they
    drew)."""
    lines, ok = [], True
    with torch.random.fork_rng(devices=range(torch.cuda.device_count()) if device != "cpu" else []):
        for label, piece in PIECES.items():
            t0 = time.perf_counter()
            try:
                piece(sq, device)
                if device != "cpu":
                    torch.cuda.synchronize()
                lines.append(f"{label}: {time.perf_counter() - t0:.1f} s")
            except Exception as e:  # noqa: BLE001 — a warm-up that fails costs only what it would have saved
                ok = False
                lines.append(f"{label}: failed ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})")
    if device != "cpu":
        torch.cuda.empty_cache()
    return lines, ok


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sq", type=int, default=1024, help="tokens per warm-up step (default 1024)")
    ap.add_argument(
        "--cpu", action="store_true", help="check the pieces on the CPU, on the kernels' stand-ins (256 tokens, ~40 s)"
    )
    args = ap.parse_args(argv)
    if args.cpu:
        from fused_csa_nb.testing import stand_in_kernels

        with stand_in_kernels():
            lines, ok = warm(256, device="cpu")
    elif not torch.cuda.is_available():
        print("warm_kernels: no CUDA device: nothing to compile", file=sys.stderr)
        return 1
    else:
        lines, ok = warm(args.sq)
    print("\n".join(lines))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
