"""Scripted runs: scenarios (TOML), the runner that sweeps them over algorithms and seeds,
what a run leaves (its record), and the estimator's data collection and live evaluation."""
