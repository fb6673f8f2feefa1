"""Training steps and serving: the job, its layout, and the time, memory and throughput that follow.

- `job`: what is trained; `transformer`: model specs (presets and files); `compute`: kernel times, precisions.
- `layout`: candidate parallel layouts as arrays; `search`: enumerating and ranking them.
- `memory`: memory per GPU and what a GPU leaves usable; `train`: the step time of every layout, vectorized.
- `step_collectives`: the collectives of one step per parallel group (what `plan` prices).
- `predict`: what `predict train` prints; `scaling`: speedup from 1 to N nodes; `infer`: prefill, decode, serving.
"""
