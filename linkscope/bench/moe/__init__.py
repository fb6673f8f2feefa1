"""The measured MoE dispatch and combine of `bench moe`: what runs inside the ranks, and launching and recording it.

`traincheck/moe` (above) predicts the same shape and judges the measurement; this room only measures.

- `config`: the shape (tokens, hidden, top-k, experts, skew, precision) and timing options, checked before launch.
- `routing`: router-like uneven routing, seeded so every rank agrees; `loop`: the per-rank exchange and its timing.
- `recorder`: rank 0's reports into the store; `runner`: launching the ranks (linkscope's launcher or torchrun).
"""
