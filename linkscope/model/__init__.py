"""Prediction, in floors that only import downward: `ranges` (the p10..p90 range each prediction carries),
`comm` (collectives), `step` (training steps, memory, search, inference), `calibration` (measured runs ->
profiles, and predictions from them) and `fidelity` (the evidence set, the fit and the errors behind the ranges).
Data in `data/`; `in_force` (below every floor) holds the packaged constants' overrides while a fit tries candidates."""
