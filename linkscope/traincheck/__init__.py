"""`bench train` checked against its prediction: the orchestration above the measured loop in `bench/train/`.

It plans the points (one, a `--sweep` or a `--scaling`), predicts each and refuses what cannot fit before any
rank starts, has `bench/train` launch and measure them, analyses the traces, and judges measured against
predicted: one document per point and the verdicts across points. `linkscope check` does the same for a
machine's interconnect (`check/`).

- `session`: one `bench train` invocation end to end; `predict`: the prediction beside a measurement;
  `document`: one point's `--json` document; `verdicts`: the winner of a sweep, the efficiency of a scaling.
- `moe`: `bench moe`'s dispatch and combine (measured in `bench/moe/`) beside the prediction for the same routing.
"""
