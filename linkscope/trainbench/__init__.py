"""`bench train` end to end: predict the layout, refuse what cannot fit, measure, analyse traces, compare."""
