"""Advice: rank offerings for a training or serving job by total cost or time, compare interconnects,
and place ranks on a topology. Builds on `hardware` and `model`; printing lives in `report` and `cli`."""
