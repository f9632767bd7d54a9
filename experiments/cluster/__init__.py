"""Scenarios fanned out over a Ray cluster (``intcc exp run ... --cluster ADDRESS``).

Each host runs ``ray start`` advertising how many testbeds it holds (``intcc_testbed``)
and, once, the CCP datapath (``intcc_datapath``: one per kernel). The submitter splits a
scenario into its runs (units.py), one worker actor per testbed on the cluster runs them
(worker.py: a RunSession that keeps its testbed up between runs, as ``--jobs`` does), and
the submitter merges what comes back into the summary.json and run directories a local
run writes (submit.py). Optional: ``pip install intcc[cluster]``; without it, and
without ``--cluster``, nothing here is imported."""
