"""How far to trust the model: the evidence set, the fit on it, and the errors that give every range.

- `evidence`: published measurements with their sources (data/evidence.yaml); `evidence_predict`: the model on them.
- `fit`: the fitting procedure; `validate`: in-sample and leave-one-source-out errors per kind and source.
- `accuracy`: the p10..p90 ranges each prediction carries, from those errors (data/accuracy.yaml).
"""
