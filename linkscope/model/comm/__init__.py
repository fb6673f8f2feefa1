"""Collectives: how long one takes on a System, per algorithm and protocol, as NCCL would run it.

- `params`: NCCL's tuning constants and the fabric data files.
- `tiers`: a System -> its link tiers (NVLink, PCIe, network) with latency and bandwidth, modelled or calibrated.
- `collectives`: time of a collective for every algorithm and protocol NCCL has, vectorized, and the one NCCL picks.
- `predict`: what `predict collective` prints: time, algbw, busbw, the range, and what limits it.
"""
