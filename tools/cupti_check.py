#!/usr/bin/env python3
"""Does a finished profile slow the launches after it? Host-bound timings before and after profiled steps.

Usage (on an SM90+ GPU, about a minute): python tools/cupti_check.py [--context 65536] [--iters 30]

When a `torch.profiler` session with CUDA activity ends, Kineto keeps CUPTI attached unless `TEARDOWN_CUPTI=1` is
set (pytorch#144455), and every later kernel launch may pay for CUPTI's callbacks. The bench chapters profile
through `bench._profiled_events`, which sets it (`bench._cupti_teardown`). This script measures what that is worth
on the machine at hand: the eager ratio-4 training step at 4,096 tokens (the bench layer, medians of `--iters`) and a
plain ratio-4 decode call at `--context` tokens (medians of 200) —
1. fresh, before any profile;
2. after one profiled step with `TEARDOWN_CUPTI=0` (CUPTI kept, as without the bench's helper);
3. after one profiled step with `TEARDOWN_CUPTI=1` (CUPTI detached at its end);
then a CUDA graph of the training step captured and replayed after the teardown, a third profile (CUPTI again) and
the two timings once more. A host-bound timing that rises in 2 and falls back in 3 is CUPTI's cost.
"""

import argparse
import os
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout's package, wherever the script runs from

import torch  # noqa: E402

from fused_csa_nb.bench import _device_ms, _graphed_ms, _profiled_events, _step, layer_pair, median_time_ms  # noqa: E402
from fused_csa_nb.bench_decode import _decode_setup, _rewind  # noqa: E402


def kernel_ms(fn) -> float:
    """GPU ms of one profile of `fn()` after two warm-up calls, as it comes: 0 where the profile recorded nothing
    (`bench.gpu_kernel_ms` would profile once more, then refuse; this script shows the profile itself)."""
    fn()
    fn()
    torch.cuda.synchronize()
    return _device_ms(_profiled_events(fn))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--context", type=int, default=65536, help="tokens in the decode cache")
    ap.add_argument("--iters", type=int, default=30, help="timed training steps per median")
    args = ap.parse_args()
    warnings.filterwarnings("ignore", "The AccumulateGrad node's stream")  # autograd's note after a graph capture
    os.environ["TEARDOWN_CUPTI"] = "0"  # CUPTI kept after the first profile (the bench's helper keeps a set value)
    t0 = time.perf_counter()
    _, layer, inputs = layer_pair(4, 4096)

    def train():
        layer.zero_grad(set_to_none=True)
        _step(layer, inputs, True)

    dl, cache, new = _decode_setup(4, "bf16", 1, args.context, 1, room=2048, seed=0)  # one token's inputs: `new`

    @torch.no_grad()
    def call():
        dl(*new, cache=cache)

    def measure(label):
        eager = median_time_ms(train, warmup=5, iters=args.iters)
        decode = median_time_ms(call, warmup=5, iters=200)
        _rewind(cache, args.context)
        print(f"{label:42s} eager 4K training step {eager:7.3f} ms; decode call {1e3 * decode:7.1f} µs "
              f"({time.perf_counter() - t0:.0f} s)", flush=True)  # fmt: skip

    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, CUDA {torch.version.cuda}")
    measure("fresh")
    print(f"  profiled step, TEARDOWN_CUPTI=0: {kernel_ms(train):.3f} ms of kernels")
    measure("after a profile, CUPTI kept")
    os.environ["TEARDOWN_CUPTI"] = "1"
    print(f"  profiled step, TEARDOWN_CUPTI=1: {kernel_ms(train):.3f} ms of kernels")
    measure("after a profile that detached CUPTI")
    graphed, err = _graphed_ms(train, 3, args.iters)
    print(f"  graphed training step after the teardown: {graphed if err is None else err}")
    print(f"  a third profile (CUPTI attached again): {kernel_ms(train):.3f} ms of kernels")
    measure("after the third profile")


if __name__ == "__main__":
    main()
