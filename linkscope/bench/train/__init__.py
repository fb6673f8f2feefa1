"""The measured training loop of `bench train`: what runs inside the ranks, and launching and recording them.

`traincheck/` (above) decides what to run, predicts it and judges the measurement; this room only measures.

- `config`: what to train and how (layout, precision, steps), checked before launch.
- `model`: the Llama-style decoder; `parallel`: DDP (buckets, compression hooks), FSDP2 and TP wrapping.
- `loop`: the per-rank loop (timing, loss, peak memory, profiled steps); `stats`: step-time statistics.
- `recorder`: rank 0's reports into the store; `runner`: launching the ranks; `trace_comm`: exposed
  communication from the Kineto traces, with HolisticTraceAnalysis's definition of overlap.
- `profiler_noise`: kineto's trace start/stop markers kept off the terminal.
"""
