"""CCP algorithms on portus (issues: CCP datapath, INT-aware CUBIC)."""
