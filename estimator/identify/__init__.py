"""Identification by evidence: physics-first tests on a competitor's own INT series, each
turning what it measured into a likelihood per CCA (from the kernels' constants, not
fitted), and a sequential test that commits to a CCA once its posterior passes a
threshold, or says "unknown" (a CCA outside the four, a flow no test explains)."""
