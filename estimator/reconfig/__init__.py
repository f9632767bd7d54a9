"""Models of path reconfiguration (the reconfigurable-network paper, 004): how much a
reconfiguration prolongs a migrated flow's transfer (fct.py)."""
