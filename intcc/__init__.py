"""intcc: INT-driven adaptive TCP congestion control. The console entry point lives here."""
__version__ = "0.1.0"
