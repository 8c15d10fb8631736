#!/usr/bin/env python3
"""Host overhead of the fused ratio-4 step: eager vs CUDA-graphed time, kernels and launch calls per step, the top
ops by self CPU time (training and eval), and fused-vs-native parity at 1,024 tokens (ratios 0, 4, 128).

Usage (on an SM90 GPU, about a minute): python tools/profile_step.py [--sq 4096] [--iters 30] [--top 25]
                                        [--kernels 15] [--precision bf16|fp8] [--mode both|train|eval]
                                        [--deterministic] [--parity-sq 1024] [--python N]

`--kernels N`: also the N device kernels with the most GPU time per step (what a long step spends its time on, e.g.
`--sq 262144 --precision fp8 --mode eval --iters 3 --parity-sq 0`: the FP8 selection's kernels at 262K tokens).
`--precision`: the layer's `indexer_precision`; `--mode`: the training step, the inference step or both.
`--deterministic`: the same for the layer with `deterministic=True` (the deterministic chapter's kernels, its
`_DET_DEFAULT`; same weights and inputs): its host overhead, graphed time and launches per step.
`--python N`: also a cProfile of N eager steps (the Python functions the host spends its time in)."""

import argparse
import collections
import cProfile
import dataclasses
import io
import pstats
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout's package, wherever the script runs from

import torch  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

from fused_csa_nb.bench import _cupti_teardown, _device_ms, _step, layer_pair, layer_parity, step_profile  # noqa: E402

LAUNCH_CALLS = (
    "cudaLaunchKernel",
    "cuLaunchKernel",
    "cudaLaunchKernelExC",
    "cuLaunchKernelEx",
    "cudaMemcpyAsync",
    "cudaMemsetAsync",
)


def _short(name: str, width: int = 70) -> str:
    return name if len(name) <= width else name[: width - 1] + "…"


def _parents(e, depth: int = 3) -> str:
    "The names of the profiler events around `e`, innermost first (aten ops, autograd functions)."
    names, p = [], e.cpu_parent
    while p is not None and len(names) < depth:
        names.append(_short(p.name, 40))
        p = p.cpu_parent
    return " < ".join(names) or "(top level)"


def warm_step(layer, inputs, train: bool):
    "One eager step of `layer` as a function of no arguments, after three untimed steps (the GPU idle again)."

    def run():
        layer.zero_grad(set_to_none=True)
        _step(layer, inputs, train)

    for _ in range(3):
        run()
    torch.cuda.synchronize()
    return run


def launches(layer, inputs, train: bool, steps: int, top: int, kernels_top: int = 0) -> None:
    """Profile `steps` eager steps: device kernels, host launch calls by name and the top ops by self CPU time, per
    step; with `kernels_top` also that many device kernels by GPU time per step."""

    run = warm_step(layer, inputs, train)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*Profiler clears events.*")
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(steps):
                run()
            torch.cuda.synchronize()
    ev = prof.events()
    counts = {}
    total = _device_ms(ev, counts)  # ms of the steps' kernels, copies and memsets; `counts`: how many, ms by name
    kernels = counts["launches"]
    calls = collections.Counter(e.name for e in ev if e.name in LAUNCH_CALLS)
    other = collections.Counter(
        e.name
        for e in ev
        if e.device_type == torch.autograd.DeviceType.CPU
        and e.name not in LAUNCH_CALLS
        and any(w in e.name for w in ("LaunchKernel", "Memcpy", "Memset", "LaunchCooperative"))
    )
    print(
        f"  per step: {kernels / steps:.1f} device kernels/copies/memsets; host calls: "
        + ", ".join(f"{n} {calls[n] / steps:g}" for n in LAUNCH_CALLS)
        + f"; all launch calls {sum(calls.values()) / steps:g}"
    )
    if other:
        print("  other launch-like host calls per step: " + ", ".join(f"{n} {c / steps:g}" for n, c in other.items()))
    for call in ("cudaMemcpyAsync", "cudaMemsetAsync"):  # where the copies and memsets come from
        sites = collections.Counter(_parents(e) for e in ev if e.name == call)
        if sites:
            print(f"  {call} per step by caller (innermost first):")
            for site, n in sites.most_common(12):
                print(f"    {n / steps:5g}  {site}")
    if kernels_top:
        print(f"  top {kernels_top} device kernels by GPU time (per step; all {total / steps:.2f} ms): ms  share  name")
        for name, ms in collections.Counter(counts["by_kernel"]).most_common(kernels_top):
            print(f"    {ms / steps:8.3f} {ms / total:6.1%}  {_short(name)}")
    avg = sorted(prof.key_averages(), key=lambda a: a.self_cpu_time_total, reverse=True)[:top]
    print(f"  top {top} by self CPU time (per step): self_us  total_us  calls  name")
    for a in avg:
        print(
            f"    {a.self_cpu_time_total / steps:8.1f} {a.cpu_time_total / steps:9.1f} {a.count / steps:6.1f}  "
            f"{_short(a.key)}"
        )


def python_profile(layer, inputs, train: bool, steps: int, top: int) -> None:
    """cProfile of `steps` eager steps: the `top` Python functions by own time and by cumulative time, per step (where
    the host's time goes between launches: argument checks, Triton's launcher, the cuDNN wrappers, autograd)."""

    run = warm_step(layer, inputs, train)
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(steps):
        run()
    pr.disable()
    torch.cuda.synchronize()
    for key in ("tottime", "cumulative"):
        s = io.StringIO()
        pstats.Stats(pr, stream=s).sort_stats(key).print_stats(top)
        print(f"  cProfile of {steps} eager steps by {key} (seconds over all steps):")
        print("\n".join("    " + line for line in s.getvalue().splitlines() if line.strip()))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sq", type=int, default=4096, help="tokens of the profiled ratio-4 step (batch 1)")
    ap.add_argument("--iters", type=int, default=30, help="timed steps per median")
    ap.add_argument("--steps", type=int, default=5, help="profiled eager steps")
    ap.add_argument("--top", type=int, default=25, help="ops listed by self CPU time")
    ap.add_argument("--parity-sq", type=int, default=1024, help="tokens of the parity check (0: skip it)")
    ap.add_argument("--deterministic", action="store_true", help="profile the layer with deterministic=True")
    ap.add_argument("--kernels", type=int, default=0, help="device kernels listed by GPU time (0: none)")
    ap.add_argument("--precision", default="bf16", choices=("bf16", "fp8"), help="the layer's indexer_precision")
    ap.add_argument("--python", type=int, default=0, help="cProfile this many eager steps (0: none)")
    ap.add_argument("--mode", default="both", choices=("both", "train", "eval"), help="which steps to profile")
    args = ap.parse_args()
    t_start = time.perf_counter()
    _cupti_teardown()  # each profile below detaches CUPTI at its end: eager steps timed after it stay the host's
    warnings.filterwarnings("ignore", "The AccumulateGrad node's stream")  # autograd's note after a graph capture
    dev = torch.cuda.get_device_name()
    print(
        f"device {dev}, torch {torch.__version__}; V4-Flash ratio-4 layer, H 64, top-512, sparse loss, b 1, "
        f"{args.precision} selection"
    )
    _, fused, inputs = layer_pair(4, args.sq, precision=args.precision)
    if args.deterministic:  # the same weights and inputs, the deterministic kernels
        from fused_csa_nb.attention import CompressedSparseAttention

        det = CompressedSparseAttention(dataclasses.replace(fused.cfg, deterministic=True), 4)
        det.load_state_dict(fused.state_dict())
        fused = det.to(inputs[0].device, inputs[0].dtype)  # the sink stays fp32, as in `layer_pair`
        print("deterministic=True")
    for train in {"both": (True, False), "train": (True,), "eval": (False,)}[args.mode]:
        row = step_profile(fused, inputs, train=train, iters=args.iters, compiled=False)
        g = row["graphed_ms"]
        ratio = f"{row['eager_ms'] / g:.2f}x" if g else f"n/a ({row.get('graphed_error')})"
        print(
            f"{'train' if train else 'eval '} {args.sq} tokens: eager {row['eager_ms']:.3f} ms, graphed "
            f"{g if g is None else round(g, 3)} ms, eager/graphed {ratio}, GPU kernels {row['kernel_ms']:.3f} ms "
            f"(busy eager {row['busy_eager']:.0%})"
        )
        launches(fused, inputs, train, args.steps, args.top, args.kernels)
        if args.python:
            python_profile(fused, inputs, train, args.python, args.top)
    del fused, inputs
    torch.cuda.empty_cache()
    if args.parity_sq:
        print(
            f"parity fused vs native, {args.parity_sq} tokens: 1 - similarity "
            "(bars: out and loss < 2e-3, gradients < 2e-2; the bench's table has ~1e-5)"
        )
        for r in (0, 4, 128):
            native, fused, inputs = layer_pair(r, args.parity_sq)
            gap = {k: 1 - v for k, v in layer_parity(native, fused, inputs).items()}
            grads = {k: v for k, v in gap.items() if k.startswith("d_")}
            worst = max(grads, key=grads.get)
            ok = all(gap[k] < 2e-3 for k in ("out", "loss") if k in gap) and grads[worst] < 2e-2
            print(
                f"  ratio {r:3d}: out {gap['out']:.1e}, loss "
                + (f"{gap['loss']:.1e}" if "loss" in gap else "-")
                + f", worst of {len(grads)} gradients {grads[worst]:.1e} ({worst}); within the bars: "
                + ("yes" if ok else "NO")
            )
            del native, fused, inputs
    print(f"done in {time.perf_counter() - t_start:.1f} s")


if __name__ == "__main__":
    main()
