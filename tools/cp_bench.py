#!/usr/bin/env python3
"""Context-parallel (CP) checks and measurements of one CSA layer on GPUs (NCCL).

Usage (two GPUs; the NVLink-multicast variables must be set in every process):

    export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
    torchrun --nproc_per_node 2 tools/cp_bench.py parity --seq 32768 --out cp_parity.json
    python tools/cp_bench.py scale --seq 131072 --out cp_scale_1gpu.json
    torchrun --nproc_per_node 2 tools/cp_bench.py scale --seq 131072 524288 --out cp_scale_2gpu.json
    torchrun --nproc_per_node 2 tools/cp_bench.py scale --layout
    zigzag --seq 131072 524288 --out cp_scale_2gpu_zigzag.json

`parity`: the fused layer with `cp_group` (each rank its shard) against the fused layer on the
whole sequence (computed on every rank, each comparing its own rows): output, loss (sum of the
shares), input gradients (rows) and parameter gradients (summed over the ranks), as similarities
(`2Σab / Σ(a²+b²)`; bars of the spec: forward > 1 − 2e-3, gradients > 1 − 2e-2).

`scale`: one ratio-4 training step (forward + backward, sparse indexer loss, V4-Flash shapes,
b = 1): median time per rank (CUDA events), peak memory per rank, the NCCL kernel time inside one
profiled step (communication plus waiting for the other rank), and the time of the step's
collectives alone (all-gather + reduce-scatter of the compressed KV and indexer keys, halos).
Without torchrun (one process) the layer runs without `cp_group`.

`--layout {contiguous,zigzag}`: the CP layout (`CompressedSparseAttention(..., cp_layout=...)`). Each rank's
rows are cut from the global tensors with `context_parallel.cp_split` (parity), and at scale drawn per rank
for the rows `cp_split` would give it (their values are random; the layout decides their global positions,
which is what the indexer's work depends on).
"""

import argparse
import json
import os
import sys
from pathlib import Path

for _k, _v in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"), ("NVSHMEM_DISABLE_NVLS", "1")):
    os.environ.setdefault(_k, _v)  # NVLink multicast off (spec §4), before NCCL starts

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the package of this checkout

import torch
import torch.distributed as dist

from fused_csa_nb.attention import CompressedSparseAttention
from fused_csa_nb.bench import _cupti_teardown, median_time_ms
from fused_csa_nb.context_parallel import cp_comm_bytes, cp_split, gather_seq, halo_from_prev
from fused_csa_nb.testing import similarity
from fused_csa_nb.config import CSAConfig


def setup():
    "`(rank, world, group)`: NCCL under torchrun, else one process without a group."
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world == 1:
        torch.cuda.set_device(0)
        return 0, 1, None
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    return dist.get_rank(), world, dist.group.WORLD


def config(args):
    return CSAConfig.v4_flash(
        dsa_kernel_backend="cudnn",
        hidden_size=args.hidden,
        q_lora_rank=args.q_lora,
        index_topk=args.topk,
        compress_ratios=(args.ratio,),
        indexer_loss_coeff=1.0,
        indexer_use_sparse_loss=True,
    )


def make_layer(cfg, ratio, group, layout="contiguous", seed=0):
    torch.manual_seed(seed)  # the same parameters on every rank
    layer = CompressedSparseAttention(cfg, ratio, cp_group=group, cp_layout=layout).cuda().bfloat16()
    with torch.no_grad():
        layer.attn_sink.uniform_(-1, 1)
    layer.attn_sink.data = layer.attn_sink.data.float()
    return layer.train()


def inputs(cfg, S, rows, seed):
    "Rows `rows` (a slice) of global bf16 inputs `(query, key, x, qr, d_out)` drawn from one seed on the GPU."
    g = torch.Generator(device="cuda").manual_seed(seed)

    def mk(*s):
        return torch.randn(*s, generator=g, device="cuda", dtype=torch.bfloat16)[rows].contiguous()

    return (
        mk(S, 1, cfg.num_heads, 512),
        mk(S, 1, 1, 512),
        mk(S, 1, cfg.hidden_size),
        mk(S, 1, cfg.q_lora_rank),
        mk(S, 1, cfg.num_heads * 512),
    )


def step(layer, ins):
    "Forward + backward with a fixed output gradient and the loss; returns `(out, loss, input grads)`."
    q, k, x, qr = (t.detach().requires_grad_() for t in ins[:4])
    out, loss = layer(q, k, x, qr)
    torch.autograd.backward([out, loss], [ins[4], torch.ones_like(loss)])
    return out, loss, (q.grad, k.grad, x.grad, qr.grad)


def parity(args, rank, world, group):
    cfg, S = config(args), args.seq[0]

    def mine(t):  # this rank's rows of a global tensor
        return cp_split(t, rank, world, args.layout)

    one, cp = make_layer(cfg, args.ratio, None), make_layer(cfg, args.ratio, group, args.layout)
    full = inputs(cfg, S, slice(None), 1)
    o1, l1, g1 = step(one, full)
    oc, lc, gc = step(cp, tuple(mine(t) for t in full))
    res = {"out": similarity(oc, mine(o1))}
    loss = lc.detach().clone()
    if group is not None:
        dist.all_reduce(loss, group=group)
    res["loss"] = similarity(loss.reshape(1), l1.detach().reshape(1))
    res["loss_rel_err"] = abs(float(loss) - float(l1)) / abs(float(l1))
    for name, a, r in zip(("d_query", "d_key", "d_x", "d_qr"), gc, g1):
        if r is not None:
            res[name] = similarity(a, mine(r))
    for (name, p1), (_, pc) in zip(one.named_parameters(), cp.named_parameters()):
        if p1.grad is None:
            continue
        g = pc.grad.float()
        if group is not None:
            dist.all_reduce(g, group=group)
        res["d_" + name] = similarity(g, p1.grad)
    worst = {k: v for k, v in res.items() if k != "loss_rel_err"}
    res["pass"] = res["out"] > 1 - 2e-3 and all(v > 1 - 2e-2 for v in worst.values())
    return res


def comm_only_ms(cfg, L, ratio, group, layout="contiguous"):
    """Median time of the step's collectives alone: halos forward/backward and the gather + reduce-scatter.

    Zigzag: the halos are all-gathers of both chunks' tails (the layer's `_zigzag_gather`), not point-to-point."""
    n, D = L // ratio, 512
    both = torch.randn(n, 1, D + cfg.index_head_dim, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    kv_tail = torch.randn(cfg.window_size - 1, 1, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    x_tail = torch.randn(ratio, 1, cfg.hidden_size, device="cuda", dtype=torch.bfloat16, requires_grad=True)

    def run():
        if layout == "zigzag":
            outs = [
                gather_seq(both, group),
                gather_seq(torch.cat([kv_tail, kv_tail]), group),
                gather_seq(torch.cat([x_tail, x_tail]), group),
            ]
        else:
            outs = [gather_seq(both, group), halo_from_prev(kv_tail, group), halo_from_prev(x_tail, group)]
        torch.autograd.backward(outs, [torch.ones_like(o) for o in outs])

    return median_time_ms(run, warmup=3, iters=10)


def nccl_ms(layer, ins):
    "NCCL kernel time (ms) inside one profiled training step."
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        step(layer, ins)
        torch.cuda.synchronize()
    return sum(e.self_device_time_total for e in prof.key_averages() if "nccl" in e.key.lower()) / 1e3


def scale(args, rank, world, group):
    cfg, out = config(args), []
    for S in args.seq:
        L = S // world
        layer = make_layer(cfg, args.ratio, group, args.layout)
        ins = inputs(cfg, L, slice(None), 10 + rank)  # this rank's S/P rows, random: no global tensor
        try:
            ms = median_time_ms(lambda: step(layer, ins), warmup=args.warmup, iters=args.iters)
        except torch.cuda.OutOfMemoryError:  # one GPU at the longest S: the memory model decides
            out.append(dict(S=S, P=world, rank=rank, oom=True))
            layer = ins = None
            torch.cuda.empty_cache()
            continue
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        step(layer, ins)
        torch.cuda.synchronize()
        peak = (torch.cuda.max_memory_allocated() - base) / 2**30
        row = dict(
            S=S,
            P=world,
            rank=rank,
            layout=args.layout if group is not None else None,
            step_ms=ms,
            peak_gib=peak,
            peak_total_gib=torch.cuda.max_memory_allocated() / 2**30,
        )
        if group is not None:
            row["nccl_in_step_ms"] = nccl_ms(layer, ins)
            row["comm_only_ms"] = comm_only_ms(cfg, L, args.ratio, group, args.layout)
            row["comm_bytes_fwd"] = cp_comm_bytes(S, world, args.ratio, hidden_size=cfg.hidden_size)["total"]
        out.append(row)
        layer = ins = None
        torch.cuda.empty_cache()
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=("parity", "scale"))
    ap.add_argument("--seq", type=int, nargs="+", default=[32768], help="global sequence lengths S")
    ap.add_argument("--ratio", type=int, default=4, choices=(0, 4, 128))
    ap.add_argument(
        "--layout",
        default="contiguous",
        choices=("contiguous", "zigzag"),
        help="context-parallel layout of the sequence over the ranks (cp_layout)",
    )
    ap.add_argument("--hidden", type=int, default=1024, help="hidden size (x width), as in the bench chapter")
    ap.add_argument("--q-lora", type=int, default=512)
    ap.add_argument("--topk", type=int, default=512)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--out", default=None, help="write the results (rank 0) as JSON here")
    args = ap.parse_args(argv)
    _cupti_teardown()  # nccl_ms profiles between rows: CUPTI detached after each, the next row's steps unslowed
    rank, world, group = setup()
    res = parity(args, rank, world, group) if args.what == "parity" else scale(args, rank, world, group)
    allres = [None] * world
    if group is not None:
        dist.all_gather_object(allres, res, group=group)
    else:
        allres = [res]
    if rank == 0:
        print(json.dumps(allres, indent=1))
        if args.out:
            Path(args.out).write_text(
                json.dumps(dict(what=args.what, world=world, args=vars(args), ranks=allres), indent=1)
            )
    if group is not None:
        dist.destroy_process_group()
    return 0 if args.what != "parity" or all(r["pass"] for r in allres) else 1


if __name__ == "__main__":
    sys.exit(main())
