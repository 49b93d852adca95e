# Set-up and entry points. Every target installs what it needs into $(VENV).
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip --disable-pip-version-check -q
STAMP  := $(VENV)/.pool3d-installed
export PATH := $(abspath $(VENV))/bin:$(PATH)

.PHONY: install test pytest lit demo bench bench-quick fixtures clean

install: $(STAMP)

KERNEL_SOURCES := $(shell find pool3d_pass/bindings/cpu -name '*.cc' -o -name '*.h')

$(STAMP): pyproject.toml setup.py $(KERNEL_SOURCES)
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) install --upgrade pip setuptools wheel
	# jaxlib first: the CPU kernel is compiled against its XLA FFI headers.
	$(PIP) install jax==0.10.2 jaxlib==0.10.2
	$(PIP) install --no-build-isolation -e '.[test]'
	touch $@

test: pytest lit

pytest: $(STAMP)
	$(PY) -m pytest -q tests

lit: $(STAMP)
	$(VENV)/bin/lit -sv lit_tests

demo: $(STAMP)
	$(PY) examples/demo.py

bench: $(STAMP)
	$(PY) bench/run.py

bench-quick: $(STAMP)
	$(PY) bench/run.py --quick

fixtures: $(STAMP)
	$(PIP) install -e '.[fixtures]'
	$(PY) scripts/lower_fixtures.py

clean:
	rm -rf build *.egg-info lit_tests/Output .pytest_cache
	find . -name __pycache__ -prune -exec rm -rf {} +
