"""What a decode step cannot beat on this GPU: the physical terms of small-batch decode, measured.

Measures on one CUDA device, each against a reference taken in the same run:
- achieved HBM bandwidth: a large device-to-device copy (bytes read + written) and a large read-only reduction;
- the cost of one kernel launched from Python, and of one kernel replayed inside a CUDA graph (serving stacks run
  decode under CUDA graphs);
- one decoder layer's GEMMs (QKV, output, gate+up, down) at decode batches 1-32 for a Llama-3.1-70B-shaped layer
  (hidden 8192, 64 query / 8 KV heads of 128, FFN 28672), weights rotated over enough layers to defeat the L2 cache,
  in BF16 and, where torch can, FP8 (per-tensor scaled); each as achieved weight-read bandwidth against the copy.

Prints a table and, with --json FILE, writes every figure. Needs a CUDA device; refuses in one line without one.

    python benchmarks/gpu_decode_floor.py [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Callable
from typing import Any

HIDDEN = 8192
HEADS, KV_HEADS, HEAD_DIM = 64, 8, 128
FFN = 28672
BATCHES = (1, 2, 4, 8, 16, 32)
LAYERS = 8
"""Distinct layers' weights rotated per timed call: 8 x 1.7 GB in BF16 is far beyond the 60 MB L2."""


def time_us(fn: Callable[[], object], repeat: int = 50, warmup: int = 5) -> float:
    """Median time of one call of `fn`, by CUDA events around each call."""
    import torch
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times: list[float] = []
    for _ in range(repeat):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    return statistics.median(times)


def captured(fn: Callable[[], object]) -> Any:
    """A CUDA graph of `fn`, run once on a side stream first (as capture requires of cuBLAS and the allocator)."""
    import torch
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph


def missing_cuda(script: str) -> str | None:
    """Why `script` cannot run here (no torch, no CUDA device), or None when it can."""
    try:
        import torch
    except ImportError:
        return f"{script}: torch is not installed"
    return None if torch.cuda.is_available() else f"{script}: needs a CUDA device; none is visible"


def begin(script: str, doc: str | None) -> tuple[dict[str, Any], str | None] | None:
    """Parse the scripts' one option (--json FILE); the results, started with the device and torch version, and
    where to write them. None, after one line on stderr, without torch or a CUDA device."""
    parser = argparse.ArgumentParser(description=(doc or "").splitlines()[0])
    parser.add_argument("--json", help="Write every figure to this file.")
    args = parser.parse_args()
    why = missing_cuda(script)
    if why:
        print(why, file=sys.stderr)
        return None
    import torch
    return {"device": torch.cuda.get_device_name(), "torch": torch.__version__}, args.json


def saved(results: dict[str, Any], path: str | None) -> int:
    """Write `results` to `path` as JSON when one was asked for; the scripts' exit code."""
    if path:
        with open(path, "w", encoding="utf-8") as out:
            json.dump(results, out, indent=1)
    return 0


def hbm(results: dict[str, Any]) -> float:
    """Achieved copy and read bandwidth in GB/s; returns the copy's."""
    import torch
    n_bytes = 4 * 2**30
    src = torch.randn(n_bytes // 2, dtype=torch.bfloat16, device="cuda")
    dst = torch.empty_like(src)
    copy_us = time_us(lambda: dst.copy_(src), repeat=20)
    read_us = time_us(lambda: src.sum(dtype=torch.float32), repeat=20)
    results["copy_gb_per_s"] = 2 * n_bytes / copy_us / 1e3
    results["read_gb_per_s"] = n_bytes / read_us / 1e3
    return float(results["copy_gb_per_s"])


def launches(results: dict[str, Any]) -> None:
    """One small kernel: launched eagerly from Python, and replayed in a CUDA graph of many."""
    import torch
    x = torch.randn(1024, device="cuda")
    n = 1000

    def eager() -> None:
        for _ in range(n):
            x.add_(1.0)

    results["eager_launch_us"] = time_us(eager, repeat=10) / n
    graph = captured(eager)
    results["graph_kernel_us"] = time_us(graph.replay, repeat=10) / n
    empty = torch.cuda.CUDAGraph()
    with torch.cuda.graph(empty):
        x.add_(1.0)
    results["graph_replay_one_kernel_us"] = time_us(empty.replay, repeat=50)


def _layer_shapes() -> list[tuple[str, int, int]]:
    qkv = (HEADS + 2 * KV_HEADS) * HEAD_DIM
    return [("qkv", HIDDEN, qkv), ("out", HEADS * HEAD_DIM, HIDDEN), ("gate_up", HIDDEN, 2 * FFN),
            ("down", FFN, HIDDEN)]


def _fp8_matmul(torch: Any) -> Callable[[Any, Any], Any] | None:
    """A per-tensor scaled FP8 matmul when this torch and GPU have one, else None."""
    if not hasattr(torch, "_scaled_mm") or not hasattr(torch, "float8_e4m3fn"):
        return None
    one = torch.ones((), device="cuda")

    def mm(a: Any, w_t: Any) -> Any:
        return torch._scaled_mm(a, w_t, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    try:
        a = torch.randn(16, 64, device="cuda").to(torch.float8_e4m3fn)
        w = torch.randn(64, 64, device="cuda").to(torch.float8_e4m3fn)
        mm(a, w.t())
    except Exception as exc:  # noqa: BLE001 - any failure means this torch/GPU has no FP8 GEMM to time
        print(f"fp8 skipped: {exc}", file=sys.stderr)
        return None
    return mm


def layer_gemms(results: dict[str, Any], copy_gb_per_s: float) -> None:
    """One layer's decode GEMMs per batch and precision, weights rotated over LAYERS layers, run as one graph."""
    import torch
    rows: list[dict[str, Any]] = []
    fp8_mm = _fp8_matmul(torch)
    precisions: list[tuple[str, Any, Callable[[Any, Any], Any]]] = [("bf16", torch.bfloat16, torch.matmul)]
    if fp8_mm is not None:
        precisions.append(("fp8", torch.float8_e4m3fn, fp8_mm))
    for name, dtype, mm in precisions:
        weights = [[(torch.randn(n, k, device="cuda") * 0.02).to(dtype) for _, k, n in _layer_shapes()]
                   for _ in range(LAYERS)]
        weight_bytes = sum(w.numel() * w.element_size() for w in weights[0])
        for batch in BATCHES:
            pad = max(batch, 16) if name == "fp8" else batch
            acts = {k: (torch.randn(pad, k, device="cuda")).to(dtype) for _, k, _ in _layer_shapes()}

            def step(weights: list[list[Any]] = weights, acts: dict[int, Any] = acts,
                     mm: Callable[[Any, Any], Any] = mm) -> None:
                for layer in weights:
                    for (_, k, _), w in zip(_layer_shapes(), layer, strict=True):
                        mm(acts[k], w.t())
            graph = captured(step)
            layer_us = time_us(graph.replay, repeat=30) / LAYERS
            gb_per_s = weight_bytes / layer_us / 1e3
            rows.append({"precision": name, "batch": batch, "rows_run": pad, "layer_us": layer_us,
                         "weight_bytes": weight_bytes, "weight_read_gb_per_s": gb_per_s,
                         "share_of_copy": gb_per_s / copy_gb_per_s})
        del weights
        torch.cuda.empty_cache()
    results["layer_gemms"] = rows


def main() -> int:
    started = begin("gpu_decode_floor", __doc__)
    if started is None:
        return 2
    results, json_path = started
    copy_gb_per_s = hbm(results)
    launches(results)
    layer_gemms(results, copy_gb_per_s)
    print(f"{results['device']}, torch {results['torch']}")
    print(f"copy {results['copy_gb_per_s']:.0f} GB/s (read+write), read {results['read_gb_per_s']:.0f} GB/s")
    print(f"launch from Python {results['eager_launch_us']:.2f} us/kernel; in a CUDA graph "
          f"{results['graph_kernel_us']:.2f} us/kernel; "
          f"a one-kernel graph replay {results['graph_replay_one_kernel_us']:.2f} us")
    print(f"{'prec':<5} {'batch':>5} {'layer us':>9} {'weights GB/s':>13} {'x copy':>7}")
    for row in results["layer_gemms"]:
        print(f"{row['precision']:<5} {row['batch']:>5} {row['layer_us']:>9.1f} {row['weight_read_gb_per_s']:>13.0f} "
              f"{row['share_of_copy']:>7.2f}")
    return saved(results, json_path)


if __name__ == "__main__":
    raise SystemExit(main())
