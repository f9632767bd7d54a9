# intcc: make setup | make test | make demo | make bench
PYTHON ?= python3
APT_PACKAGES = iproute2 iputils-ping ethtool iperf3 tshark tcpdump mosquitto mosquitto-clients procps \
	clang llvm libclang-dev libbpf-dev libelf-dev zlib1g-dev bpftool pkg-config pypy3 pypy3-venv \
	chromium chromium-driver bpftrace
STAMP = .setup.stamp
# the stamp alone is no proof of an install (a machine reset keeps the work tree): where the
# package does not import, setup runs again
ifneq ($(shell cd / && $(PYTHON) -c "import intcc, pyportus" 2>/dev/null && echo ok),ok)
$(shell rm -f $(STAMP))
endif
PYPORTUS_VERSION = 0.6.1
# INT nodes may run under PyPy (python = "pypy"; int_node/runtime.py): its own virtualenv, node deps only
PYPY_VENV = /opt/intcc-pypy

.PHONY: setup test need-root test-accuracy unit integration demo bench report clean-testbeds help

help:
	@echo "make setup        install system packages and the intcc package (idempotent)"
	@echo "make test         setup, then the whole test suite (unit + integration; root)"
	@echo "make demo         setup, then the lossy-link experiment (quick) and its table"
	@echo "make bench        setup, then the benchmarks in tests/perf (prints figures)"
	@echo "make test-accuracy  the estimator's accuracy on live testbeds (minutes; not in CI)"
	@echo "make report       regenerate the docs' Results tables and figures from the records in data/"
	@echo "make clean-testbeds  remove every intcc testbed left on this machine"

setup: $(STAMP)

$(STAMP): setup.cfg pyproject.toml Makefile datapath/Makefile datapath/bpf/intcc_ccp.bpf.c $(wildcard datapath/bpf/*.h) ccp_algs/contract.py \
		datapath/Cargo.toml datapath/Cargo.lock $(wildcard datapath/src/*.rs) \
		int_node/fastpath/bpf/intcc_node.bpf.c int_node/fastpath/layout.py int_node/ioam.py
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi
	$(PYTHON) -m pip install -q --disable-pip-version-check -e ".[dev,cluster]" 2>&1 | grep -v "Running pip as the 'root'" || true
	@# pyportus 0.6.1 is a source-only Rust extension; newer rustc needs lints capped to build it
	$(PYTHON) -c "import pyportus" 2>/dev/null || RUSTFLAGS="--cap-lints warn" $(PYTHON) -m pip install -q \
		--disable-pip-version-check "pyportus==$(PYPORTUS_VERSION)" 2>&1 | grep -v "Running pip as the 'root'" || true
	$(PYTHON) -c "import int_node, telemetry, experiments, broker.publisher, broker.embedded, ccp_agent.cli, pyportus, pyroute2, hypothesis, click, ray"
	@# PyPy 7.3 is Python 3.9: pip picks the click/paho-mqtt releases that still support it
	test -x $(PYPY_VENV)/bin/python || pypy3 -m venv $(PYPY_VENV)
	$(PYPY_VENV)/bin/python -c "import click, paho.mqtt" 2>/dev/null || $(PYPY_VENV)/bin/python -m pip install -q \
		--disable-pip-version-check "click>=8.1" "paho-mqtt>=2.1,<3" 2>&1 | grep -v "Running pip as the 'root'" || true
	PYTHONPATH=. $(PYPY_VENV)/bin/python -c "import int_node.router, int_node.elements, broker.node"
	$(MAKE) -C datapath
	@# the INT node's fast path (intcc node run --fast-path): its BPF object, in ~/.cache/intcc
	$(PYTHON) -m int_node.fastpath.build
	@touch $(STAMP)

test: need-root setup
	$(MAKE) -s -C datapath test
	@# the slowest tests printed: the suite must stay under 20 minutes in CI
	$(PYTHON) -m pytest -q --durations=30 -m "not accuracy" tests/unit lab/tests tests/integration

# the integration half needs namespaces, raw sockets and BPF: without root it would be skipped
# silently, and a green run would hide it
need-root:
	@if [ "$$(id -u)" != 0 ]; then echo "make test needs root (namespaces, raw sockets, BPF); 'make unit' runs the unit tests alone" >&2; exit 1; fi

# the estimator's accuracy on live paths: real testbeds, minutes, not in CI
test-accuracy: setup
	$(PYTHON) -m pytest -q -m accuracy tests/integration

unit: setup
	$(PYTHON) -m pytest -q tests/unit lab/tests

integration: setup
	$(PYTHON) -m pytest -q -m "not accuracy" tests/integration

demo: setup
	intcc exp run lossy_link --quick --out results/demo-lossy-link

bench: setup
	$(PYTHON) -m pytest -q -s tests/perf/bench_*.py

report: setup
	intcc report

clean-testbeds:
	intcc testbed down
