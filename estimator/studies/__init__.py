"""One-off studies the docs cite: each runnable with ``python -m estimator.studies.NAME``,
each printing the figures docs/estimator.md quotes. Not part of the estimator's API."""
