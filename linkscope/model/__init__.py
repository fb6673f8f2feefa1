"""Prediction: `comm` (collectives), `step` (training steps, memory, search, inference), `calibration`
(measured runs -> profiles) and `fidelity` (the evidence set, the fit and the error ranges). Data in `data/`."""
