"""Studies of the in-network CCA classifier (docs/dragonfly.md): runnable with
``python -m lab.dragonfly.NAME``."""
