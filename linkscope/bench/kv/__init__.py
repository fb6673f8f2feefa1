"""`bench kv`: KV-cache pages moved between ranks the way disaggregated serving engines move them.

- `config`: the page geometry (a model's layers, KV heads, head dim; tokens per block), the sweep of block sizes and
  requests in flight, checked before launch.
- `loop`: what every rank runs: prefill-side ranks send their pages to decode-side ranks, timed per point.
- `recorder`: rank 0's reports into the store (kind `kv`); `runner`: launching the ranks.
"""
