"""`linkscope check`: an acceptance test of the machine it runs on (probe + bench + model -> verdicts)."""
