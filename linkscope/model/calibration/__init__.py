"""From measurements to the model: fits of stored runs, saved profiles, and the calibration set.

- `calibrate`: latency and bandwidth per message-size range, fitted on a run's rows.
- `calibrate_run`: a stored run -> a saved profile; `profiles`: profiles on disk, the tiers they give, and
  collective predictions from their fitted curves.
- `systems`: `--system` with `profile:NAME` resolved; `calibration_set`: the published runs the constants fit.
- `train_fit`: a step model fitted to `bench train` runs on CPU ranks; `train_compute`: on GPUs, the measured
  compute against the datasheet model's, and the step model run with its compute scaled by it.
"""
