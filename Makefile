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

# The CPU kernels under AddressSanitizer and UndefinedBehaviorSanitizer: built
# into $(SANITIZE_DIR) (never the installed extension) and loaded by the kernel
# tests through POOL3D_KERNEL_LIBRARY. Python itself is not instrumented, so
# libasan is preloaded, with libstdc++ (else ASan's interceptor of
# __cxa_throw aborts on the first C++ exception); leak checking is off (Python
# and XLA keep allocations alive at exit).
.PHONY: sanitize
SANITIZE_DIR   ?= build/sanitize
SANITIZE_TESTS ?= tests/test_cpu_kernel.py tests/test_cpu_kernel_layer.py
SANITIZE_FLAGS := -std=c++17 -O1 -g -fno-omit-frame-pointer -fPIC -shared -pthread \
                  -fvisibility=hidden -fsanitize=address,undefined -fno-sanitize-recover=undefined

sanitize: $(STAMP)
	mkdir -p $(SANITIZE_DIR)
	$(CXX) $(SANITIZE_FLAGS) -Ipool3d_pass/bindings/cpu \
	  -isystem "$$($(PY) -c 'import jax.ffi; print(jax.ffi.include_dir())')" \
	  -isystem "$$($(PY) -c 'import sysconfig; print(sysconfig.get_paths()["include"])')" \
	  $(shell find pool3d_pass/bindings/cpu -name '*.cc' | sort) -o $(SANITIZE_DIR)/_kernel.so
	POOL3D_KERNEL_LIBRARY=$(SANITIZE_DIR)/_kernel.so \
	LD_PRELOAD="$$($(CXX) -print-file-name=libasan.so) $$($(CXX) -print-file-name=libstdc++.so)" \
	ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1 \
	$(PY) -m pytest -q -p no:cacheprovider $(SANITIZE_TESTS)
