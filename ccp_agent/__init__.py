"""The CCP agent runtime: the portus process, the datapath daemon and agents as child
processes, the sink's telemetry feed, flow ids, the command line. The algorithms it runs
are in ccp_algs/ (decision logic only)."""
