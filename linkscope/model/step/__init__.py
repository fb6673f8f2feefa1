"""Training steps and serving: the job, its layout, and the time, memory and throughput that follow.

- `transformer`: model specs (presets and files); `compute`: GEMM and HBM kernel times, the precisions.
- `layout`: candidate parallel layouts as arrays; `search`: enumerating and ranking them.
- `memory`: memory per GPU and what a GPU leaves usable; `train`: the step time of every layout, vectorized.
- `predict`: what `predict train` prints; `scaling`: speedup from 1 to N nodes; `infer`: prefill, decode, serving.
"""
