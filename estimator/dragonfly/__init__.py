"""In-network CCA classification (Dragonfly): the CNN over a flow's per-slot CBIQ and
ingress bytes at a node's queue (telemetry.cbiq, int_node FlowSlots), shipped as ONNX."""
