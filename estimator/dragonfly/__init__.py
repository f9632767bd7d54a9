"""In-network CCA classification (Dragonfly): the CNN over a flow's per-slot CBIQ and
ingress bytes at a node's queue (telemetry.cbiq, int_node FlowSlots), shipped as ONNX."""

import os

#: the shipped model (``intcc estimator dragonfly train``; docs/dragonfly.md gives its data and scores)
DEFAULT_MODEL = os.path.join(os.path.dirname(os.path.dirname(__file__)), "models", "dragonfly_500ms.onnx")
#: the classes trained on: the paper's three (the testbed's captures have no Vegas flow yet)
TRAIN_CLASSES = ("reno", "cubic", "bbr")
