"""The p10..p90 range every prediction carries: the ground floor of `model/`, below the predictors that use it.

- `accuracy`: a predicted time or rate -> its range, from the spread of the leave-one-source-out errors per kind
  (data/accuracy.yaml, which `fidelity.validate` computes and a test keeps equal to what it computes).
"""
