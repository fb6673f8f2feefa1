"""How far to trust the model: the evidence set, the fit on it, and the errors behind every range.

- `evidence`: published measurements with their sources (data/evidence.yaml); `evidence_predict`: the model on them.
- `fit`: the fitting procedure; `validate`: in-sample and leave-one-source-out errors per kind and source, and
  the quantiles of those errors that `model/ranges` reads (data/accuracy.yaml).
"""
