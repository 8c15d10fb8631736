#!/usr/bin/env python3
"""The deterministic backward's dKV summed by kv tiles, without parts: a prototype, its CPU self-test, its GPU timing.

Usage:

    python tools/det_tiles.py --self-test        # CPU (Triton's interpreter): against float64, under a minute
    python tools/det_tiles.py [--budget 280]      # one GPU: the timings below, within the budget (seconds)

The deterministic backward (chapter *Deterministic mode*) writes every valid `(row, slot)` pair's dKV part `[D]`
(2.6 M parts of 512 bf16 at the bench's 4,096 rows, about 2.7 GB), sorts the pairs by kv row and sums each kv row's
parts in that order (the segment sum). In the CHANGELOG's H100 profile of the 4,096-token step (2.63 ms slower than the
default) the segment sum took 1.11 ms and the sort 0.29; `tools/det_atomics.py` timed the part stores alone at
0.87-0.98 ms. This prototype sums without parts:

1. a ds kernel as the chapter's (the row's slot block: `s = q·kᵀ`, `dp = dout·kᵀ`), writing `ds` and `gp = p·gate`,
   `[R, K, H]` bf16 (a slot's heads side by side), and no parts; `dq` from `ds` as in the chapter;
2. each query row's slots sorted by kv row (a per-row sort of `[R, K]`) and, where no row repeats a kv row, each
   row's slot of each kv row (`slot map [R, N]`, -1: none);
3. a tile kernel: a program owns a tile of `BLOCK_J` kv rows and a chunk of `BD` columns for a range of `RP` query
   rows; for each row `t` of its range, in order, it takes the row's slots in the tile (`m_ds [BLOCK_J, H]`,
   `m_gp` from the slot map; with repeated kv rows a one-hot product over the row's sorted slots in the tile sums them)
   and adds `m_ds·q[t] + m_gp·dout[t]` to its accumulator, then stores it: one partial sum a range, summed over the
   ranges in order (`torch.sum` over a fixed shape). Every sum has one order: bitwise repeatable by construction.

Products: the tile kernel's are dense over each tile (a row's unselected kv rows give zero rows), so it pays for
density: about `1 / density` the parts' products, with density the share of a tile's kv rows a row selects (high at
short context: 512 of at most 1,024 compressed entries at 4,096 tokens; low at 65,536). Bytes: each row's `q` and
`dout` are read once per tile that it touches (from the L2 where the tiles' programs run together), instead of the
parts' write and read through HBM. Memory: `ds`, `gp` (`2·R·K·H` bf16), the slot map (`R·N` int32) and the partial
sums (`R / RP · N · D` fp32): for short sequences (the segment sum stays for long ones).

The GPU part times, on one GPU, each of `CONFIGS` against the chapter's backward and cuDNN's on the bench problem at
4,096 rows (distinct compressed entries a row, as the layer's selection gives; `bench._bench_problem`'s random
entries repeat, which takes the one-hot path: timed last), then the whole ratio-4 training step at 4,096 tokens with
the fastest patched in (CUDA-graph replays, five eager steps compared bitwise, the least similarity to the default
step, a kernel table), then 16,384 rows.
"""

import argparse
import dataclasses
import os
import sys
import time
from pathlib import Path

if "--self-test" in sys.argv:  # the kernels in Triton's interpreter (set before the package reads it)
    os.environ.setdefault("TRITON_INTERPRET", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout's package, wherever the script runs from

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from fused_csa_nb.deterministic import (  # noqa: E402
    _BLOCK_D,
    _det_blocks,
    _det_delta_kernel,
    _det_row_block,
    _det_scores,
    _det_variant,
)
from fused_csa_nb.launch import _INTERPRETED, _cdiv, _launch_triton, _pow2  # noqa: E402


@triton.jit
def _tds_kernel(
    q_ptr, kv_ptr, do_ptr, idx_ptr, tlen_ptr, lsef_ptr, delta_ptr, ds_ptr, gp_ptr, row0, H, K, N, scale,
    D: tl.constexpr, DV: tl.constexpr, HAS_TLEN: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_K: tl.constexpr,
    BLOCK_D: tl.constexpr, UPCAST: tl.constexpr, PIPE: tl.constexpr, STAGES: tl.constexpr, ROWS64: tl.constexpr,
    ROW_ORDER: tl.constexpr,
):  # fmt: skip
    r, kb = _det_row_block(tl.cdiv(K, BLOCK_K), ROW_ORDER)
    t = (row0 + r).to(tl.int64)
    if HAS_TLEN:
        if kb * BLOCK_K >= tl.load(tlen_ptr + t):
            return
    ks = kb * BLOCK_K + tl.arange(0, BLOCK_K)
    hs = tl.arange(0, BLOCK_H)
    hm = hs < H
    idx = tl.load(idx_ptr + t * K + ks, mask=ks < K, other=-1)
    valid = (idx >= 0) & (idx < N) & (ks < K)
    if HAS_TLEN:
        valid = valid & (ks < tl.load(tlen_ptr + t))
    rows = tl.where(valid, idx, 0)
    if ROWS64:
        rows = rows.to(tl.int64)
    s, dp = _det_scores(
        q_ptr + t * H * D, kv_ptr, do_ptr + t * H * DV, H, hs, hm, rows, valid, D, DV, BLOCK_H, BLOCK_K, BLOCK_D,
        UPCAST, PIPE, STAGES,
    )  # fmt: skip
    lsef = tl.load(lsef_ptr + t * H + hs, mask=hm, other=float("inf"))
    delta = tl.load(delta_ptr + t * H + hs, mask=hm, other=0.0)
    live = hm[:, None] & valid[None, :]
    gp = tl.where(live, tl.exp(s * scale - lsef[:, None]), 0.0)
    ds = tl.where(live, gp * (dp - delta[:, None]) * scale, 0.0)
    off = (r.to(tl.int64) * K + ks[None, :]) * H + hs[:, None]  # [R, K, H]: a slot's heads side by side
    m = hm[:, None] & (ks < K)[None, :]
    tl.store(ds_ptr + off, ds.to(ds_ptr.dtype.element_ty), mask=m)
    tl.store(gp_ptr + off, gp.to(gp_ptr.dtype.element_ty), mask=m)


@triton.jit
def _tdq_kernel(
    kv_ptr, idx_ptr, tlen_ptr, ds_ptr, dq_ptr, row0, H, K, N,
    D: tl.constexpr, HAS_TLEN: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_D: tl.constexpr,
    UPCAST: tl.constexpr, ROW_ORDER: tl.constexpr,
):  # fmt: skip
    "`_det_dq_block` reading `ds [R, K, H]`."
    r, db = _det_row_block(D // BLOCK_D, ROW_ORDER)
    t = (row0 + r).to(tl.int64)
    dd = db * BLOCK_D + tl.arange(0, BLOCK_D)
    hs = tl.arange(0, BLOCK_H)
    hm = hs < H
    acc = tl.zeros([BLOCK_H, BLOCK_D], dtype=tl.float32)
    k_end = K
    if HAS_TLEN:
        k_end = tl.minimum(K, tl.load(tlen_ptr + t))
    for k0 in range(0, k_end, BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        idx = tl.load(idx_ptr + t * K + ks, mask=ks < K, other=-1)
        valid = (idx >= 0) & (idx < N) & (ks < k_end)
        rows = tl.where(valid, idx, 0).to(tl.int64)
        k = tl.load(kv_ptr + rows[:, None] * D + dd[None, :], mask=valid[:, None], other=0.0)
        ds = tl.load(
            ds_ptr + (r.to(tl.int64) * K + ks[None, :]) * H + hs[:, None], mask=hm[:, None] & valid[None, :], other=0.0
        )
        if UPCAST:
            acc = tl.dot(ds, k.to(tl.float32), acc)
        else:
            acc = tl.dot(ds.to(k.dtype), k, acc)
    tl.store(dq_ptr + (t * H + hs[:, None]) * D + dd[None, :], acc.to(dq_ptr.dtype.element_ty), mask=hm[:, None])


@triton.jit
def _tile_step(q_row, do_row, mds, mgp, hs, hm, c0, acc, D: tl.constexpr, DV: tl.constexpr, BD: tl.constexpr,
               UPCAST: tl.constexpr, FULL: tl.constexpr):  # fmt: skip
    "`acc += mds·q[t, :, c0:c0+BD] + mgp·dout[t, :, c0:c0+BD]` (`dout`'s part where the columns are < DV)."
    cols = c0 + tl.arange(0, BD)
    if FULL:  # every head, every column: no mask
        qc = tl.load(q_row + hs[:, None] * D + cols[None, :])
    else:
        qc = tl.load(q_row + hs[:, None] * D + cols[None, :], mask=hm[:, None] & (cols < D)[None, :], other=0.0)
    if UPCAST:
        qc = qc.to(tl.float32)
    acc = tl.dot(mds, qc, acc)
    if c0 < DV:
        if FULL:
            dc = tl.load(do_row + hs[:, None] * DV + cols[None, :])
        else:
            dc = tl.load(do_row + hs[:, None] * DV + cols[None, :], mask=hm[:, None] & (cols < DV)[None, :], other=0.0)
        if UPCAST:
            dc = dc.to(tl.float32)
        acc = tl.dot(mgp, dc, acc)
    return acc


@triton.jit
def _tile_sums(ds_ptr, gp_ptr, skey_ptr, sslot_ptr, r, b0, b1, K, H, jj, hs, hm, mds, mgp,
               BLOCK_L: tl.constexpr, UPCAST: tl.constexpr, FULL_H: tl.constexpr):  # fmt: skip
    "`mds += onehot·ds`, `mgp += onehot·gp` over sorted positions `[b0, b0 + BLOCK_L) ∩ [b0, b1)` of row `r`."
    ls = b0 + tl.arange(0, BLOCK_L)
    lm = ls < b1
    key = tl.load(skey_ptr + r * K + ls, mask=lm, other=-1)
    slot = tl.load(sslot_ptr + r * K + ls, mask=lm, other=0)  # int32 offsets within the row (K·H < 2^31)
    if FULL_H:
        m2 = lm[:, None]
    else:
        m2 = lm[:, None] & hm[None, :]
    off = slot[:, None] * H + hs[None, :]
    dsg = tl.load(ds_ptr + r * K * H + off, mask=m2, other=0.0)
    gpg = tl.load(gp_ptr + r * K * H + off, mask=m2, other=0.0)
    hot = jj[:, None] == key[None, :]
    if UPCAST:
        oh = hot.to(tl.float32)
        dsg = dsg.to(tl.float32)
        gpg = gpg.to(tl.float32)
    else:
        oh = hot.to(dsg.dtype)
    return tl.dot(oh, dsg, mds), tl.dot(oh, gpg, mgp)


@triton.jit
def _tile_row(q_ptr, do_ptr, ds_ptr, gp_ptr, skey_ptr, sslot_ptr, bnd_ptr, t, row0, K, H, NT, tile, ch, jj, hs, hm,
              acc, acct, D: tl.constexpr, DV: tl.constexpr, BLOCK_J: tl.constexpr, BLOCK_L: tl.constexpr,
              BLOCK_H: tl.constexpr, BD: tl.constexpr, TAIL: tl.constexpr, HAS_TAIL: tl.constexpr,
              NCH: tl.constexpr, UPCAST: tl.constexpr, MANY: tl.constexpr, FULL_H: tl.constexpr):  # fmt: skip
    "Query row `t`'s share of the tile: its slots in the tile summed by kv row, times its `q` and `dout` columns."
    t64 = tl.cast(t, tl.int64)
    r = t64 - row0
    b0 = tl.load(bnd_ptr + r * (NT + 1) + tile)
    b1 = tl.load(bnd_ptr + r * (NT + 1) + tile + 1)
    mds = tl.zeros([BLOCK_J, BLOCK_H], dtype=tl.float32)
    mgp = tl.zeros([BLOCK_J, BLOCK_H], dtype=tl.float32)
    mds, mgp = _tile_sums(
        ds_ptr, gp_ptr, skey_ptr, sslot_ptr, r, b0, b1, K, H, jj, hs, hm, mds, mgp, BLOCK_L, UPCAST, FULL_H
    )
    if MANY:  # a row with more than BLOCK_L slots in a tile (repeated kv rows): the rest, in order
        for l0 in range(b0 + BLOCK_L, b1, BLOCK_L):
            mds, mgp = _tile_sums(
                ds_ptr, gp_ptr, skey_ptr, sslot_ptr, r, l0, b1, K, H, jj, hs, hm, mds, mgp, BLOCK_L, UPCAST, FULL_H
            )
    if not UPCAST:
        mds = mds.to(q_ptr.dtype.element_ty)
        mgp = mgp.to(q_ptr.dtype.element_ty)
    q_row = q_ptr + t64 * H * D
    do_row = do_ptr + t64 * H * DV
    acc = _tile_step(q_row, do_row, mds, mgp, hs, hm, ch * BD, acc, D, DV, BD, UPCAST, FULL_H and (DV % BD == 0))
    if HAS_TAIL:
        if ch == NCH - 1:
            acct = _tile_step(q_row, do_row, mds, mgp, hs, hm, NCH * BD, acct, D, DV, TAIL, UPCAST, False)
    return acc, acct


@triton.jit
def _tile_row_map(q_ptr, do_ptr, ds_ptr, gp_ptr, smap_ptr, t, row0, K, H, NS, N, ch, jj, hs, hm, acc, acct,
                  D: tl.constexpr, DV: tl.constexpr, BD: tl.constexpr, TAIL: tl.constexpr, HAS_TAIL: tl.constexpr,
                  NCH: tl.constexpr, UPCAST: tl.constexpr, FULL_H: tl.constexpr):  # fmt: skip
    "`_tile_row` where each kv row has at most one slot in a query row: that slot from the row's map, no sums."
    t64 = tl.cast(t, tl.int64)
    r = t64 - row0
    ms = tl.load(smap_ptr + r * NS + jj, mask=jj < N, other=-1)  # [BLOCK_J] the slot of each kv row, -1 none
    mm = ms >= 0
    off = ms[:, None] * H + hs[None, :]
    if FULL_H:
        m2 = mm[:, None]
    else:
        m2 = mm[:, None] & hm[None, :]
    mds = tl.load(ds_ptr + r * K * H + off, mask=m2, other=0.0)
    mgp = tl.load(gp_ptr + r * K * H + off, mask=m2, other=0.0)
    q_row = q_ptr + t64 * H * D
    do_row = do_ptr + t64 * H * DV
    acc = _tile_step(q_row, do_row, mds, mgp, hs, hm, ch * BD, acc, D, DV, BD, UPCAST, FULL_H and (DV % BD == 0))
    if HAS_TAIL:
        if ch == NCH - 1:
            acct = _tile_step(q_row, do_row, mds, mgp, hs, hm, NCH * BD, acct, D, DV, TAIL, UPCAST, False)
    return acc, acct


@triton.jit
def _tile_kernel(
    q_ptr, do_ptr, ds_ptr, gp_ptr, skey_ptr, sslot_ptr, bnd_ptr, trange_ptr, mode_ptr, smap_ptr, part_ptr,
    row0, H, K, N, NT, NS,
    D: tl.constexpr, DV: tl.constexpr, BLOCK_J: tl.constexpr, BLOCK_L: tl.constexpr, BLOCK_H: tl.constexpr,
    BD: tl.constexpr, TAIL: tl.constexpr, HAS_TAIL: tl.constexpr, NCH: tl.constexpr, RP: tl.constexpr,
    UPCAST: tl.constexpr, STAGES: tl.constexpr, FULL_H: tl.constexpr,
):  # fmt: skip
    """Program (kv tile `program_id(0)`, D chunk `program_id(1)`, split `program_id(2)`): the tile's rows'
    `Σ_t ds[t]ᵀ·q[t] + gp[t]ᵀ·dout[t]` over the split's query rows, in order, into `part[split]`; `mode [1]` (above)."""
    tile, ch, sp = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    jj = tile * BLOCK_J + tl.arange(0, BLOCK_J)
    hs = tl.arange(0, BLOCK_H)
    hm = hs < H
    t_lo = tl.load(trange_ptr + 2 * tile)
    t_hi = tl.load(trange_ptr + 2 * tile + 1)
    ta = t_lo + sp * RP
    tb = tl.minimum(t_hi, ta + RP)
    acc = tl.zeros([BLOCK_J, BD], dtype=tl.float32)
    acct = tl.zeros([BLOCK_J, TAIL], dtype=tl.float32)
    mode = tl.load(mode_ptr)  # 0: a slot map; 1: sorted slots, at most BLOCK_L a tile; 2: more
    if mode == 0:
        for t in tl.range(ta, tb, num_stages=STAGES):
            acc, acct = _tile_row_map(
                q_ptr, do_ptr, ds_ptr, gp_ptr, smap_ptr, t, row0, K, H, NS, N, ch, jj, hs, hm, acc, acct,
                D, DV, BD, TAIL, HAS_TAIL, NCH, UPCAST, FULL_H,
            )  # fmt: skip
    elif mode == 1:
        for t in tl.range(ta, tb, num_stages=STAGES):
            acc, acct = _tile_row(
                q_ptr, do_ptr, ds_ptr, gp_ptr, skey_ptr, sslot_ptr, bnd_ptr, t, row0, K, H, NT, tile, ch, jj, hs, hm,
                acc, acct, D, DV, BLOCK_J, BLOCK_L, BLOCK_H, BD, TAIL, HAS_TAIL, NCH, UPCAST, False, FULL_H,
            )  # fmt: skip
    else:
        for t in range(ta, tb):
            acc, acct = _tile_row(
                q_ptr, do_ptr, ds_ptr, gp_ptr, skey_ptr, sslot_ptr, bnd_ptr, t, row0, K, H, NT, tile, ch, jj, hs, hm,
                acc, acct, D, DV, BLOCK_J, BLOCK_L, BLOCK_H, BD, TAIL, HAS_TAIL, NCH, UPCAST, True, FULL_H,
            )  # fmt: skip
    base = part_ptr + sp.to(tl.int64) * N * D
    cols = ch * BD + tl.arange(0, BD)
    tl.store(base + jj[:, None].to(tl.int64) * D + cols[None, :], acc, mask=(jj < N)[:, None])
    if HAS_TAIL:
        if ch == NCH - 1:
            ct = NCH * BD + tl.arange(0, TAIL)
            tl.store(
                base + jj[:, None].to(tl.int64) * D + ct[None, :], acct, mask=(jj < N)[:, None] & (ct < D)[None, :]
            )


def _row_sort(indices, topk_length, n, r0, r1):
    "Each row's slots sorted by kv row (none → n): `(keys [R, K] int32, slots [R, K] int32)`."
    idx = indices[r0:r1]
    valid = (idx >= 0) & (idx < n)
    if topk_length is not None:
        valid &= torch.arange(idx.shape[1], device=idx.device, dtype=torch.int32)[None] < topk_length[r0:r1, None]
    keys, slots = torch.sort(torch.where(valid, idx, n), dim=1, stable=True)
    return keys.contiguous(), slots.to(torch.int32).contiguous()


def _tile_plan(keys, n, bj, r0):
    "`bnd [R, NT+1]` each row's first sorted position in each tile; `trange [NT, 2]` the rows (global) touching a tile."
    R = keys.shape[0]
    nt = _cdiv(n, bj)
    edges = (torch.arange(nt + 1, device=keys.device, dtype=torch.int32) * bj).clamp(max=n)
    bnd = torch.searchsorted(keys, edges[None].expand(R, nt + 1).contiguous()).to(torch.int32)
    valid = keys < n
    tile = torch.where(valid, keys // bj, nt).flatten().long()
    rows = (torch.arange(R, device=keys.device, dtype=torch.int32)[:, None] + r0).expand_as(keys).flatten()
    lo = torch.full((nt + 1,), r0 + R, dtype=torch.int32, device=keys.device).scatter_reduce(0, tile, rows, "amin")
    hi = torch.full((nt + 1,), r0, dtype=torch.int32, device=keys.device).scatter_reduce(0, tile, rows + 1, "amax")
    return bnd.contiguous(), torch.stack([lo[:nt], hi[:nt]], 1).contiguous()


def _slot_map(keys, slots, bnd, n: int, block_l: int, slotmap: bool):
    """The tile kernel's path, on the device: `(smap [R, ns] int32, mode [1] int32, ns)`. `mode` 0: no row repeats a
    kv row, `smap[t, j]` row `t`'s slot of kv row `j` (-1: none; the stride `ns` leaves column `n` to the invalid
    pairs); 1: the one-hot path, at most `block_l` of a row's slots in a tile; 2: more (its unpipelined loop).
    Without `slotmap`, never 0 (and `smap` is `keys`, unread)."""
    many = ((bnd[:, 1:] - bnd[:, :-1]).amax() > block_l).to(torch.int32).reshape(1)
    ns = _cdiv(n + 1, 16) * 16
    if not slotmap:
        return keys, 1 + many, ns
    valid = keys < n
    smap = torch.full((keys.shape[0], ns), -1, dtype=torch.int32, device=keys.device)
    smap.scatter_reduce_(1, keys.long(), torch.where(valid, slots, -1), "amax", include_self=True)
    smap[:, n:] = -1
    repeat = (smap[:, :n] >= 0).sum() != valid.sum()
    return smap, torch.where(repeat, 1 + many, 0).to(torch.int32), ns


def tiles_bwd(
    q, kv, out, dout, lse, attn_sink, indices, sm_scale, topk_length=None, *, BLOCK_J=64, BLOCK_L=64, BD=128, RP=256,
    tile_warps=8, tile_stages=2, slotmap=True,
):  # fmt: skip
    """The deterministic sparse-attention backward with dKV summed by kv tiles: `_deterministic_sparse_bwd`'s arguments
    and results (`(dq, dkv, d_sink fp32)`), one chunk of rows. The tile kernel's settings: `BLOCK_J` kv rows and `BD`
    columns a program (the last chunk also takes the `D % BD` columns left), `BLOCK_L` sorted slots a one-hot product,
    `RP` query rows a program, `tile_warps`, `tile_stages` (its row loop's pipeline); `slotmap`: the slot map where no
    row repeats a kv row (False: the one-hot path always). The ds and dq kernels take the chapter's default tiles
    (`_det_variant`)."""
    s_q, h, d = q.shape
    n, k, dv = kv.shape[0], indices.shape[1], out.shape[-1]
    dev = q.device
    v = _det_variant(h, d, dv)  # the chapter's default tiles for the ds and dq kernels
    bh = _det_blocks(h)[0]
    up = _INTERPRETED  # fp32 tiles in the interpreter, as in the chapter
    lsef = torch.logaddexp(lse, attn_sink[None])
    delta = torch.empty(s_q, h, dtype=torch.float32, device=dev)
    bound = torch.zeros(s_q, dtype=torch.float32, device=dev)  # (unused: no bound without the fixed point)
    _launch_triton(_det_delta_kernel, (s_q,), out, dout, delta, q, bound, bound, h, sm_scale,
                   D=d, DV=dv, BLOCK_H=bh, BLOCK_D=_BLOCK_D, BOUND=False)  # fmt: skip
    d_sink = -(delta * torch.exp(attn_sink[None] - lsef)).sum(0)
    ds = torch.empty(s_q, k, h, dtype=torch.float32 if up else q.dtype, device=dev)
    gp = torch.empty_like(ds)
    dq = torch.empty_like(q)
    tlen = topk_length if topk_length is not None else indices
    _launch_triton(_tds_kernel, (s_q * _cdiv(k, v["BLOCK_K"]),), q, kv, dout, indices, tlen, lsef, delta, ds, gp,
                   0, h, k, n, sm_scale, D=d, DV=dv, HAS_TLEN=topk_length is not None, BLOCK_H=bh,
                   BLOCK_K=v["BLOCK_K"], BLOCK_D=v["BLOCK_D"], UPCAST=up, PIPE=v["num_stages"] is not None,
                   STAGES=v["num_stages"] or 1, ROWS64=n * d >= 2**31, ROW_ORDER=True,
                   num_warps=v["num_warps"])  # fmt: skip
    _launch_triton(_tdq_kernel, (s_q * (d // v["dq_BLOCK_D"]),), kv, indices, tlen, ds, dq, 0, h, k, n, D=d,
                   HAS_TLEN=topk_length is not None, BLOCK_H=bh, BLOCK_K=v["dq_BLOCK_K"], BLOCK_D=v["dq_BLOCK_D"],
                   UPCAST=up, ROW_ORDER=True, num_warps=v["dq_num_warps"])  # fmt: skip
    keys, slots = _row_sort(indices, topk_length, n, 0, s_q)
    bnd, trange = _tile_plan(keys, n, BLOCK_J, 0)
    nt, nch, tail, splits = _cdiv(n, BLOCK_J), d // BD, d % BD, _cdiv(s_q, RP)
    smap, mode, ns = _slot_map(keys, slots, bnd, n, BLOCK_L, slotmap)
    part = torch.empty(splits, n, d, dtype=torch.float32, device=dev)  # every program writes its block (zeros too)
    _launch_triton(_tile_kernel, (nt, nch, splits), q, dout, ds, gp, keys, slots, bnd, trange, mode, smap, part,
                   0, h, k, n, nt, ns, D=d, DV=dv, BLOCK_J=BLOCK_J, BLOCK_L=BLOCK_L, BLOCK_H=bh, BD=BD,
                   TAIL=_pow2(tail) if tail else 16, HAS_TAIL=tail > 0, NCH=nch, RP=RP, UPCAST=up,
                   STAGES=tile_stages, FULL_H=h == bh, num_warps=tile_warps)  # fmt: skip
    return dq, part.sum(0).to(kv.dtype), d_sink


# The CPU self-test


def oracle_bwd(q, kv, sink, idx, scale, tlen, dv, dout):
    "float64 `(out, lse, (dq, dkv, d_sink))` of sparse MQA attention with a sink (autograd on the written-out softmax)."
    S, H, D = q.shape
    N, K = kv.shape[0], idx.shape[1]
    qd, kd, sd = (t.double().requires_grad_() for t in (q, kv, sink))
    valid = (idx >= 0) & (idx < N)
    if tlen is not None:
        valid &= torch.arange(K)[None] < tlen[:, None]
    keys = kd[idx.long().clamp(0, N - 1)]
    s = (torch.einsum("qhd,qkd->qhk", qd, keys) * scale).masked_fill(~valid[:, None], float("-inf"))
    lse = torch.logsumexp(s, -1)
    p = torch.softmax(torch.cat([s, sd.view(1, H, 1).expand(S, H, 1)], -1), -1)[..., :K]
    o = torch.einsum("qhk,qkd->qhd", p, keys[..., :dv])
    grads = torch.autograd.grad(o, (qd, kd, sd), dout.double())
    return o.detach(), torch.where(torch.isneginf(lse), float("inf"), lse).detach(), grads


def self_test() -> None:
    """Against the float64 oracle on fresh random inputs (bars: the chapter's, max-rel 1e-2 and 1 − similarity 1e-4),
    each of the three paths (slot map; sorted slots; more than `BLOCK_L` of them in a tile), with and without
    `topk_length`, tails of columns and heads; bitwise repeat; `dq` and `d_sink` bitwise the chapter's (the same `ds`,
    the same `delta`)."""
    from fused_csa_nb.deterministic import _deterministic_sparse_bwd
    from fused_csa_nb.testing import max_rel_err, similarity

    g = torch.Generator().manual_seed(0)
    modes = set()  # the tile kernel's paths taken
    cases = [  # (S, H, D, DV, N, K, repeats, tile settings)
        (6, 4, 128, 64, 20, 24, True, dict(BD=64)),
        (9, 4, 192, 128, 150, 40, False, dict(BD=128, BLOCK_J=64, RP=4)),
        (7, 16, 256, 256, 70, 33, True, dict(BD=128, BLOCK_J=32, BLOCK_L=16, RP=3)),
        (8, 64, 512, 512, 300, 48, False, dict(BLOCK_J=128, BD=256, RP=3)),
        (8, 64, 512, 512, 300, 48, True, dict(BLOCK_J=64, BD=128, BLOCK_L=16)),
    ]
    for S, H, D, DV, N, K, rep, cfg in cases:
        q, kv = torch.randn(S, H, D, generator=g).bfloat16(), torch.randn(N, D, generator=g).bfloat16()
        sink = torch.randn(H, generator=g)
        if rep:
            idx = torch.randint(-1, min(N, 24) + 3, (S, K), generator=g, dtype=torch.int32)
        else:
            idx = torch.stack([torch.randperm(N, generator=g)[:K] for _ in range(S)]).int()
            idx[:, -3:] = -1
        idx[2] = -1  # a row without keys
        for tlen in (None, torch.randint(0, K + 1, (S,), generator=g, dtype=torch.int32)):
            dout = torch.randn(S, H, DV, generator=g).bfloat16()
            o, lse, ref = oracle_bwd(q, kv, sink, idx, 0.1, tlen, DV, dout)
            args = (q, kv, o.bfloat16(), dout, lse.float(), sink, idx, 0.1, tlen)
            got = tiles_bwd(*args, **cfg)
            keys, slots = _row_sort(idx, tlen, N, 0, S)
            bnd = _tile_plan(keys, N, cfg.get("BLOCK_J", 64), 0)[0]
            modes.add(int(_slot_map(keys, slots, bnd, N, cfg.get("BLOCK_L", 64), True)[1]))
            for name, a, r in zip(("dq", "dkv"), got, ref):
                err, sim = max_rel_err(a, r), similarity(a, r)
                assert err < 1e-2 and sim > 1 - 1e-4, (name, S, H, D, rep, err, sim)
            assert similarity(got[2], ref[2]) > 1 - 1e-3  # d_sink reads the bf16 `out` (the chapter's contract)
            assert all(torch.equal(a, b) for a, b in zip(got, tiles_bwd(*args, **cfg))), "not bitwise repeatable"
            chapter = _deterministic_sparse_bwd(*args)
            assert torch.equal(got[0], chapter[0]) and torch.equal(got[2], chapter[2]), "dq, d_sink: not the chapter's"
            print(
                f"S {S} H {H} D {D} repeats {rep} topk_length {tlen is not None}: max-rel vs float64 dq "
                f"{max_rel_err(got[0], ref[0]):.1e}, dkv {max_rel_err(got[1], ref[1]):.1e} "
                f"(the chapter's, bf16 parts: {max_rel_err(chapter[1], ref[1]):.1e})"
            )
    assert modes == {0, 1, 2}, f"paths taken: {sorted(modes)}"
    print("self-test passed: the slot map, sorted slots and the many-slot loop")


# The GPU timing

CONFIGS = [  # `tiles_bwd`'s keywords
    dict(BLOCK_J=64, BD=128),
    dict(BLOCK_J=64, BD=128, slotmap=False),
    dict(BLOCK_J=128, BD=128),
    dict(BLOCK_J=64, BD=256),
    dict(BLOCK_J=128, BD=128, tile_stages=3),
    dict(BLOCK_J=128, BD=128, RP=512),
    dict(BLOCK_J=64, BD=128, tile_warps=4),
    dict(BLOCK_J=128, BD=256),
    dict(BLOCK_J=128, BD=128, BLOCK_L=128),
]


def problem(sq, distinct=True, heads=64, topk=640, seed=0):
    """`bench._bench_problem` at `n_comp = sq // 4`: with `distinct`, each row's compressed entries distinct (as the
    layer's selection gives), else the bench's (random, repeating)."""
    from fused_csa_nb import bench
    from fused_csa_nb.kernels import _run

    n_comp = sq // 4
    if not distinct:
        return bench._bench_problem(sq, heads, topk, n_comp, seed)
    g = torch.Generator(device="cuda").manual_seed(seed)
    q = torch.randn(sq, heads, 512, device="cuda", generator=g).bfloat16()
    kv = torch.randn(sq + n_comp, 512, device="cuda", generator=g).bfloat16()
    sink = torch.randn(heads, device="cuda", generator=g)
    t = torch.arange(sq, device="cuda")[:, None]
    win = t - torch.arange(128, device="cuda")[None]
    comp = sq + torch.rand(sq, n_comp, device="cuda", generator=g).argsort(1)[:, : topk - 128]
    idx = torch.cat([torch.where(win >= 0, win, -1), comp], 1).to(torch.int32).contiguous()
    out, lse = _run("flash_mla_sparse_fwd", q, kv, idx, 512**-0.5, sink, None, None)
    dout = torch.randn(out.shape, device="cuda", generator=g).bfloat16()
    return (q, kv, out, dout, lse, sink, idx, 512**-0.5, None)


def kernels(fn, rows=12):
    "The CUDA kernels of one call by total time (torch.profiler)."
    fn()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as p:
        fn()
        torch.cuda.synchronize()
    print(p.key_averages().table(sort_by="cuda_time_total", row_limit=rows, max_name_column_width=60))


def alone(sq, configs, left, iters=30, distinct=True):
    """The backward alone at `sq` rows: cuDNN's, the chapter's, each of `configs` (median ms of `iters`, 3-run bitwise,
    similarity to cuDNN's, `dq` bitwise the chapter's) → `([(ms, cfg)] fastest first, args)`."""
    from fused_csa_nb import bench
    from fused_csa_nb.deterministic import _deterministic_sparse_bwd
    from fused_csa_nb.kernels import _sparse_bwd
    from fused_csa_nb.testing import similarity

    args = problem(sq, distinct)
    ref = _sparse_bwd(*args)
    cud = bench.median_time_ms(lambda: _sparse_bwd(*args), iters=iters)
    today = _deterministic_sparse_bwd(*args)
    t_today = bench.median_time_ms(lambda: _deterministic_sparse_bwd(*args), iters=iters)
    print(f"[{sq} rows, distinct {distinct}] cuDNN {cud:.3f} ms; chapter {t_today:.3f} ms ({t_today / cud:.2f}x)")
    rows = []
    for cfg in configs:
        if left() < 40:
            print("  skipped (budget)", cfg)
            continue
        try:
            runs = [tiles_bwd(*args, **cfg) for _ in range(3)]
            rep = all(torch.equal(a, b) for r in runs[1:] for a, b in zip(runs[0], r))
            sims = " ".join(f"{similarity(a, b):.7f}" for a, b in zip(runs[0], ref))
            same_dq = torch.equal(runs[0][0], today[0])
            del runs
            ms = bench.median_time_ms(lambda: tiles_bwd(*args, **cfg), iters=iters)
        except Exception as e:  # a config that does not compile or run: say so, go on
            print(f"  FAILED {type(e).__name__}: {(str(e).strip().splitlines() or [''])[0][:200]}  {cfg}")
            continue
        rows.append((ms, cfg))
        print(f"  {ms:8.3f} ms ({ms / t_today:.2f}x chapter) bitwise x3 {rep}, sim dq/dkv/d_sink {sims}, "
              f"dq the chapter's {same_dq}  {cfg}", flush=True)  # fmt: skip
    return sorted(rows, key=lambda r: r[0]), args


def step(sq, cfg, iters=30):
    """The ratio-4 training step at `sq` tokens: default, deterministic (the chapter's), deterministic with `cfg`'s
    tiles patched in (`deterministic._deterministic_sparse_bwd`, which the layer's op calls)."""
    import det_sweep as dsw

    from fused_csa_nb import bench
    from fused_csa_nb import deterministic as det
    from fused_csa_nb.attention import CompressedSparseAttention
    from fused_csa_nb.testing import similarity

    _, fused, inputs = bench.layer_pair(4, sq)
    detl = CompressedSparseAttention(dataclasses.replace(fused.cfg, deterministic=True), 4)
    detl.load_state_dict(fused.state_dict())
    detl.to(inputs[0].device, inputs[0].dtype)
    base = dsw.time_step(fused, inputs, iters)
    ref = dsw.step_tensors(fused, inputs)
    print(f"\n[step {sq}] default: graphed {dsw.fmt(base['graphed'])} ms", flush=True)
    saved = det._deterministic_sparse_bwd
    for label, patch in (("chapter", None), ("tiles", cfg)):
        if patch is not None:
            det._deterministic_sparse_bwd = lambda *a, part_bytes=None, **kw: tiles_bwd(*a[:9], **patch)
        try:
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
        finally:
            det._deterministic_sparse_bwd = saved


def gpu(budget: float) -> None:
    "The timings of the docstring, within `budget` seconds (each part skipped when too little is left)."
    from fused_csa_nb.deterministic import _deterministic_sparse_bwd

    t0 = time.time()

    def left():
        return budget - (time.time() - t0)

    print(torch.cuda.get_device_name(), torch.__version__, triton.__version__, flush=True)
    rows, args = alone(4096, CONFIGS, left)
    if not rows:
        return
    best = rows[0][1]
    print("fastest", best, flush=True)
    if left() > 60:
        print("kernels, tiles:")
        kernels(lambda: tiles_bwd(*args, **best))
        print("kernels, the chapter's:")
        kernels(lambda: _deterministic_sparse_bwd(*args))
    args = None  # the problem's tensors freed before the step's
    torch.cuda.empty_cache()
    if left() > 90:
        step(4096, best)
        torch.cuda.empty_cache()
    if left() > 60:
        alone(16384, [best], left, iters=10)
    if left() > 40:
        alone(4096, [best, {**best, "slotmap": False}], left, distinct=False)
    print(f"done in {time.time() - t0:.0f} s")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--self-test", action="store_true", help="CPU: the kernels interpreted, against float64")
    ap.add_argument("--budget", type=float, default=280.0, help="GPU: seconds for the timings")
    o = ap.parse_args()
    if o.self_test:
        self_test()
    elif not torch.cuda.is_available():
        raise SystemExit("det_tiles.py: the timings need a CUDA GPU (--self-test runs on the CPU)")
    else:
        sys.path.insert(0, str(Path(__file__).resolve().parent))  # det_sweep's step helpers
        gpu(o.budget)


if __name__ == "__main__":
    main()
