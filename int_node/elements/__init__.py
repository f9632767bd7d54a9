"""Element classes; importing this package registers all of them."""
from . import basic, classify, devices, inband, link, queues, reconfig, routing, rtt, separation, slots, wireless  # noqa: F401
