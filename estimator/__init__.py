"""Competing-flow CCA estimator (issue: competing-flow CCA estimator)."""
