"""What runs mean: the tables, comparisons with confidence intervals, the fairness
arithmetic and its plots, read from run records."""
