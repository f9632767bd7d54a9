"""Result records: what a measurement was, and where it came from.

Every record the product writes (an experiment's summary.json, an estimator eval JSON, a
benchmark's output) carries a ``provenance``: the date, the commit of the code that made
it and the command line. The docs' result tables are built from committed records
(``intcc report``), so a figure can always be traced to the run behind it.
"""
from records.provenance import Provenance, stamp, provenance_of

__all__ = ["Provenance", "stamp", "provenance_of"]
