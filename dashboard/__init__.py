"""The INT sink dashboard: a web service fed by the subscriber (live push to the page,
bounded history), its static assets served from the package, Prometheus ``/metrics``."""
