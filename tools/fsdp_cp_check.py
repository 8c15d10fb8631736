#!/usr/bin/env python3
"""FSDP2 × context parallelism of a CSA block on GPUs (NCCL) or CPUs (gloo): one training step against one process.

Usage (NVLink multicast off in every process on the H200 machines; the script sets it when unset):

    export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
    torchrun --nproc_per_node 2 tools/fsdp_cp_check.py --seq 8192 --out fsdp_cp.json            # dp 1 × cp 2
    torchrun --nproc_per_node 2 tools/fsdp_cp_check.py --seq 8192 --layout zigzag
    torchrun --nproc_per_node 4 tools/fsdp_cp_check.py --dp 2 --seq 8192                        # a 2 × 2 mesh
    torchrun --nproc_per_node 4 tools/fsdp_cp_check.py --device cpu --dp 2 --seq 512            # gloo, no GPU

Every rank builds the same block (the projections of the sharding chapter's toy block around one
`CompressedSparseAttention`; the fused cuDNN backend on CUDA, the native one on the CPU), shards it with
`sharding.shard_model` over a `(dp, cp)` mesh with `MixedPrecisionPolicy(bf16 parameters, fp32 reduce)`,
runs one training step on its `sharding.split_batch` rows (its share of the replica's mean loss: the
output against a fixed random gradient, plus the indexer loss) and gathers the parameter gradients.
Rank 0 runs the same step in one process on the whole batch (the block cast to bf16, its sink float32)
and reports the loss's relative error and the similarity (`2Σab / Σ(a²+b²)`) of every parameter gradient.
Bars: loss within 2e-2, gradients > 1 − 2e-2 (bf16; the indexer's top-k may differ in places). The exit
code is 1 when a bar is missed.
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
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy

from fused_csa_nb.attention import CompressedSparseAttention
from fused_csa_nb.config import CSAConfig
from fused_csa_nb.context_parallel import cp_positions
from fused_csa_nb.rotary import apply_layer_rotary
from fused_csa_nb.sharding import shard_model, split_batch
from fused_csa_nb.testing import similarity


class Block(nn.Module):
    "Projections around one `CompressedSparseAttention` (the sharding chapter's toy block); `forward(x, positions)`."

    def __init__(self, cfg, ratio, cp_layout="contiguous"):
        super().__init__()
        H, D, h = cfg.num_heads, cfg.head_dim, cfg.hidden_size
        self.cfg, self.ratio = cfg, ratio
        self.wq, self.wkv = nn.Linear(h, H * D, bias=False), nn.Linear(h, D, bias=False)
        self.wqr, self.wo = nn.Linear(h, cfg.q_lora_rank, bias=False), nn.Linear(H * D, h, bias=False)
        self.attn = CompressedSparseAttention(cfg, ratio, cp_layout=cp_layout)

    def forward(self, x, positions):
        sq, b, _ = x.shape
        cfg, rope = self.cfg, lambda t: apply_layer_rotary(t, positions, self.cfg, self.ratio)
        q = rope(self.wq(x).view(sq, b, cfg.num_heads, cfg.head_dim))
        k = rope(self.wkv(x).view(sq, b, 1, cfg.head_dim))
        qr = self.wqr(x) if self.attn.indexer is not None else None
        out, loss = self.attn(q, k, x if self.ratio else None, qr)
        return x + self.wo(out), loss


def config(args):
    if args.device == "cpu":
        return CSAConfig(
            num_heads=4,
            head_dim=32,
            v_head_dim=32,
            hidden_size=48,
            q_lora_rank=24,
            window_size=8,
            index_topk=5,
            index_n_heads=4,
            index_head_dim=32,
            rotary_dim=16,
            dsa_kernel_backend="none",
            indexer_loss_coeff=0.5,
            indexer_use_sparse_loss=True,
        )
    return CSAConfig.v4_flash(
        dsa_kernel_backend="cudnn",
        hidden_size=args.hidden,
        q_lora_rank=args.q_lora,
        index_topk=args.topk,
        compress_ratios=(args.ratio,),
        indexer_loss_coeff=1.0,
        indexer_use_sparse_loss=True,
    )


def block(cfg, args, device):
    torch.manual_seed(0)  # the same weights on every rank
    m = Block(cfg, args.ratio, args.layout)
    with torch.no_grad():
        m.attn.attn_sink.uniform_(-1, 1)
    return m.to(device)


def run(args, rank, world, device):
    cfg, S, B, cp = config(args), args.seq, args.batch, world // args.dp
    mesh = init_device_mesh(device.type, (args.dp, cp), mesh_dim_names=("dp", "cp"))
    g = torch.Generator().manual_seed(1)
    X, dY = (torch.randn(S, B, cfg.hidden_size, generator=g).to(device) for _ in range(2))
    model = shard_model(
        block(cfg, args, device),
        mesh,
        mp_policy=MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32),
    )
    x, dy = (split_batch(t, mesh, layout=args.layout) for t in (X, dY))
    pos = cp_positions(S, mesh["cp"].get_local_rank(), cp, args.layout, device=device).view(-1, 1, 1)
    y, iloss = model(x, pos)
    share = (y.float() * dy).sum() / (x.shape[1] * S) + (iloss if iloss is not None else 0)
    share.backward()
    loss = share.detach().clone()
    dist.all_reduce(loss)  # Σ over all ranks = dp × the mean of the replicas' losses
    grads = {n: p.grad.full_tensor() for n, p in model.named_parameters() if p.grad is not None}
    if rank != 0:
        return None
    one = block(cfg, args, device).bfloat16()  # the layer keeps its sink float32
    y1, l1 = one(X.bfloat16(), torch.arange(S, device=device).view(-1, 1, 1))
    ref = (y1.float() * dY).sum() / (B * S) + (l1 if l1 is not None else 0)
    ref.backward()
    ref = ref.detach()
    res = dict(
        mesh=[args.dp, cp],
        layout=args.layout,
        ratio=args.ratio,
        S=S,
        B=B,
        loss=float(loss) / args.dp,
        loss_one_process=float(ref),
        loss_rel_err=abs(float(loss) / args.dp - float(ref)) / abs(float(ref)),
    )
    res["grads"] = {n: similarity(grads[n], p.grad) for n, p in one.named_parameters() if p.grad is not None}
    res["missing_grads"] = sorted(set(n for n, p in one.named_parameters() if p.grad is not None) - set(grads))
    res["pass"] = (
        res["loss_rel_err"] < 2e-2 and not res["missing_grads"] and all(v > 1 - 2e-2 for v in res["grads"].values())
    )
    return res


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--dp", type=int, default=1, help="data-parallel degree; cp = world size / dp")
    ap.add_argument("--seq", type=int, default=8192, help="global sequence length S")
    ap.add_argument("--batch", type=int, default=None, help="global batch B (default: dp)")
    ap.add_argument("--ratio", type=int, default=4, choices=(0, 4, 128))
    ap.add_argument("--layout", default="contiguous", choices=("contiguous", "zigzag"))
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--q-lora", type=int, default=512)
    ap.add_argument("--topk", type=int, default=512)
    ap.add_argument("--out", default=None, help="write the result (rank 0) as JSON here")
    args = ap.parse_args(argv)
    args.batch = args.batch or args.dp
    world, local = int(os.environ.get("WORLD_SIZE", "1")), int(os.environ.get("LOCAL_RANK", "0"))
    if world % args.dp:
        ap.error(f"--dp {args.dp} must divide the world size {world}")
    if args.device == "cuda":
        torch.cuda.set_device(local)
        device = torch.device("cuda", local)
        dist.init_process_group("nccl", device_id=device)
    else:
        torch.set_num_threads(1)
        device = torch.device("cpu")
        dist.init_process_group("gloo")
    res = run(args, dist.get_rank(), world, device)
    if res is not None:
        print(json.dumps(res, indent=1))
        if args.out:
            Path(args.out).write_text(json.dumps(dict(args=vars(args), world=world, result=res), indent=1))
    ok = [res["pass"] if res is not None else True]
    dist.broadcast_object_list(ok, src=0)
    dist.destroy_process_group()
    return 0 if ok[0] else 1


if __name__ == "__main__":
    sys.exit(main())
