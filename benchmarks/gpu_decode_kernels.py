"""The small kernels of one decode layer, measured: what a decode step pays per layer besides its GEMMs.

For a Llama-3.1-70B-shaped layer (hidden 8192, 64 query / 8 KV heads of 128, FFN 28672), sharded for tensor
parallel 1 and 2, at decode batches 1, 8 and 32 with 2,048 tokens of KV cache in BF16, it captures in one CUDA
graph, per layer: the residual add and RMSNorm before attention, rotary embedding of the query and key, the
KV-cache write, attention over the cache (torch's scaled_dot_product_attention), the residual add and RMSNorm
before the MLP, and SiLU-and-multiply; 80 layers of it, distinct caches per layer. Prints the time per layer,
the CUDA kernels per layer (counted by the profiler on one eager layer) and the time per kernel; with --json
FILE writes every figure. Plain PyTorch fuses less than a serving engine, so its kernel count is an upper
bound on a serving engine's and its time per layer what an unfused stack pays.

    python benchmarks/gpu_decode_kernels.py [--json out.json]
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from gpu_decode_floor import begin, captured, saved, time_us  # the sibling script: one timer, one capture

HIDDEN = 8192
HEADS, KV_HEADS, HEAD_DIM = 64, 8, 128
FFN = 28672
LAYERS = 80
CONTEXT = 2048
BATCHES = (1, 8, 32)
TPS = (1, 2)


def _layer_fn(torch: Any, batch: int, tp: int) -> tuple[Callable[[int], None], int]:
    """One layer's non-GEMM work as a function of the layer index, and the bytes of KV cache it reads."""
    import torch.nn.functional as F
    hq, hkv, ffn = HEADS // tp, KV_HEADS // tp, FFN // tp
    dev, bf16 = "cuda", torch.bfloat16
    x = torch.randn(batch, HIDDEN, device=dev, dtype=bf16)
    res = torch.randn_like(x)
    norm_w = torch.ones(HIDDEN, device=dev, dtype=bf16)
    q = torch.randn(batch, hq, 1, HEAD_DIM, device=dev, dtype=bf16)
    k = torch.randn(batch, hkv, 1, HEAD_DIM, device=dev, dtype=bf16)
    cos = torch.randn(1, 1, 1, HEAD_DIM, device=dev, dtype=bf16)
    sin = torch.randn_like(cos)
    caches = [(torch.randn(batch, hkv, CONTEXT, HEAD_DIM, device=dev, dtype=bf16),
               torch.randn(batch, hkv, CONTEXT, HEAD_DIM, device=dev, dtype=bf16)) for _ in range(LAYERS)]
    gate_up = torch.randn(batch, 2 * ffn, device=dev, dtype=bf16)
    pos = torch.tensor([CONTEXT - 1], device=dev)

    def rotate(t: Any) -> Any:
        half = t.shape[-1] // 2
        return t * cos + torch.cat((-t[..., half:], t[..., :half]), dim=-1) * sin

    def layer(i: int) -> None:
        h = F.rms_norm(x + res, (HIDDEN,), norm_w)
        qr, kr = rotate(q), rotate(k)
        kc, vc = caches[i]
        kc.index_copy_(2, pos, kr)
        vc.index_copy_(2, pos, kr)
        F.scaled_dot_product_attention(qr, kc, vc, enable_gqa=True)
        F.rms_norm(h + res, (HIDDEN,), norm_w)
        g, u = gate_up.chunk(2, dim=-1)
        F.silu(g) * u

    return layer, 2 * batch * hkv * CONTEXT * HEAD_DIM * 2


def _kernels_per_layer(torch: Any, layer: Callable[[int], None]) -> int:
    """CUDA kernels one eager layer launches, counted by the profiler."""
    from torch.profiler import ProfilerActivity, profile
    layer(0)
    torch.cuda.synchronize()
    try:
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            layer(0)
            torch.cuda.synchronize()
    except RuntimeError as exc:  # no CUPTI: the times stand without the count
        print(f"kernel count skipped: {exc}", file=sys.stderr)
        return 0
    return sum(1 for e in prof.events() if e.device_type.name == "CUDA")


def measure(results: dict[str, Any]) -> None:
    """Per TP shard and batch: time per layer in a CUDA graph of LAYERS layers, kernels per layer."""
    import torch
    rows: list[dict[str, Any]] = []
    for tp in TPS:
        for batch in BATCHES:
            layer, kv_bytes = _layer_fn(torch, batch, tp)
            kernels = _kernels_per_layer(torch, layer)

            def step(layer: Callable[[int], None] = layer) -> None:
                for i in range(LAYERS):
                    layer(i)
            graph = captured(step)
            layer_us = time_us(graph.replay, repeat=20, warmup=3) / LAYERS
            rows.append({"tp": tp, "batch": batch, "layer_us": layer_us, "kernels": kernels,
                         "us_per_kernel": layer_us / kernels if kernels else None, "kv_bytes_per_layer": kv_bytes})
            del graph, layer
            torch.cuda.empty_cache()
    results["rows"] = rows


def main() -> int:
    """Measure and print; exit 2 without torch or a CUDA device."""
    started = begin("gpu_decode_kernels", __doc__)
    if started is None:
        return 2
    results, json_path = started
    measure(results)
    print(f"{results['device']}, torch {results['torch']}")
    print(f"{'tp':>3} {'batch':>5} {'layer us':>9} {'kernels':>8} {'us/kernel':>10} {'KV MB':>7}")
    for row in results["rows"]:
        per_kernel = f"{row['us_per_kernel']:.2f}" if row["us_per_kernel"] else "-"
        print(f"{row['tp']:>3} {row['batch']:>5} {row['layer_us']:>9.1f} {row['kernels']:>8} "
              f"{per_kernel:>10} {row['kv_bytes_per_layer'] / 1e6:>7.1f}")
    return saved(results, json_path)


if __name__ == "__main__":
    raise SystemExit(main())
