"""The telemetry model, transport-free: what INT tells a sender and how.

``schema`` (versioned records and their codec), ``flowid`` (the one mapping from a
5-tuple to a flow id), ``attribution`` (which losses were congestion and which the
link), ``sink`` (the sink's per-packet accounting that builds flow and hop records).
No MQTT here: ``broker/`` carries these records.
"""
