"""Measurement: collective sweeps with nccl-tests' semantics, the pairwise matrix, launching and timing ranks.

Entry points: `runner.run_bench(BenchConfig)` and `runner.run_p2p(P2PConfig)`, both returning a `RunResult`
(run id, rows, status, exit code). Modules, from the bottom up: `sizes`, `dtypes`, `ops`, `verify`,
`timing` (pure tables and arithmetic); `comm`, `sweep`, `p2p` (what each rank runs); `launch`,
`torchrun` (starting and watching ranks); `recorder`, `printer`, `progress`, `runinfo`, `nccl_capture`
(what rank 0 reports becomes printed lines and stored rows); `faults` (deliberate faults for the tests).
"""
