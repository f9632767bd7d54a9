"""Emulated testbed, scenarios, runner, metrics and plots."""
