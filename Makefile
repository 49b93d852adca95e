# Set-up and entry points. Every target installs what it needs into $(VENV).
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip --disable-pip-version-check -q
STAMP  := $(VENV)/.pool3d-installed
export PATH := $(abspath $(VENV))/bin:$(PATH)

# Supported JAX: >=0.9.0,<0.11 (pyproject.toml, pool3d_pass/jax_compat.py). `make test`
# runs the full suite on $(JAX) in $(VENV) and the pass-level tests on $(JAX09) in
# $(VENV09) (Neuron SDK environments ship JAX 0.9.x).
JAX      ?= 0.10.2
JAX09  ?= 0.9.0
VENV09 ?= .venv-jax09
PY09   := $(VENV09)/bin/python
PIP09  := $(PY09) -m pip --disable-pip-version-check -q
STAMP09 := $(VENV09)/.pool3d-installed
# What the pass-level run covers: lit (below), the pass on every fixture, the CLI and
# bindings, the CPU kernel, the JAX integration (hook, jit, sharding), end-to-end
# numerics of the fixtures through XLA. Not: the property-based and torch/flax tests.
PASS_TESTS := tests/test_mlir_api.py tests/test_pass.py tests/test_frontend_fixtures.py \
              tests/test_cli.py tests/test_bindings.py tests/test_cpu_kernel.py \
              tests/test_integration.py tests/test_sharding.py tests/test_numerics_fixtures.py \
              tests/test_strategies.py tests/test_safe_parse.py \
              --deselect 'tests/test_sharding.py::test_output_shardings_are_kept[indices_pool_forward_and_grad_spatially_sharded]'
# (deselected: on 0.9 XLA itself tiles that unconstrained output of the PLAIN program
# over part of the mesh, the rewritten one is replicated; values exact. docs/jax_integration.md)

.PHONY: install install-jax09 test test-jax09 pytest lit demo bench bench-quick fixtures clean

install: $(STAMP)

KERNEL_SOURCES := $(shell find pool3d_pass/bindings/cpu -name '*.cc' -o -name '*.h')

$(STAMP): pyproject.toml setup.py $(KERNEL_SOURCES)
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) install --upgrade pip setuptools wheel
	# jaxlib first: the CPU kernel is compiled against its XLA FFI headers.
	$(PIP) install jax==$(JAX) jaxlib==$(JAX)
	$(PIP) install --no-build-isolation -e '.[test]'
	touch $@

install-jax09: $(STAMP09)

# A regular (not editable) install into $(VENV09): the CPU kernel is compiled
# against that jaxlib's FFI headers, in its own build folder (build/jax09, cleared
# when anything but a .py file changed), and lands in that venv's site-packages;
# the in-tree .so stays $(VENV)'s. So the copy is refreshed when any package file changes.
PACKAGE_FILES := $(shell find pool3d_pass -name '*.py' -o -name '*.cc' -o -name '*.h')

$(STAMP09): pyproject.toml setup.py $(PACKAGE_FILES)
	test -x $(PY09) || python3 -m venv $(VENV09)
	$(PIP09) install --upgrade pip setuptools wheel
	$(PIP09) install jax==$(JAX09) jaxlib==$(JAX09)
	$(if $(filter-out %.py,$?),rm -rf build/jax09)
	printf '[build]\nbuild_base = build/jax09\n' > $(VENV09)/build.cfg
	DIST_EXTRA_CONFIG=$(abspath $(VENV09))/build.cfg $(PIP09) install --no-build-isolation '.[test-pass]'
	# Installing pool3d_pass must have kept this environment's JAX (as in a Neuron SDK venv).
	$(PY09) -c "import jax, jaxlib; assert jax.__version__ == jaxlib.__version__ == '$(JAX09)', (jax.__version__, jaxlib.__version__)"
	touch $@

test: pytest lit test-jax09

# bin/pytest, not `python -m pytest`: the latter puts the work tree (whose
# pool3d_pass holds $(VENV)'s kernel build) first on sys.path.
test-jax09: $(STAMP09)
	PATH="$(abspath $(VENV09))/bin:$$PATH" $(VENV09)/bin/pytest -q $(PASS_TESTS)
	PATH="$(abspath $(VENV09))/bin:$$PATH" $(VENV09)/bin/lit -s lit_tests

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

# --- The gpu binding (docs/gpu.md) ----------------------------------------------
# gpu-compile-check: XLA:GPU's deviceless compile for an NVIDIA H200, no GPU needed, in
# its own venv $(GPU_VENV) (the CUDA plugin must not reach the main venvs: JAX would try
# to start it in every test). Installs JAX $(GPU_JAX), jax-cuda12-plugin/-pjrt of that
# version and nvidia-cuda-nvcc-cu12 (ptxas; ~240 MB of wheels, ~5 s to install here, the
# whole venv ~1 min), then runs tests/test_gpu_deviceless.py there and compiles every
# rewritten bench program (scripts/gpu_compile_check.py: Triton calls, ptxas registers,
# no spills). Run by hand; `make test` skips those tests (their reason says so).
# gpu-check: the device check (scripts/gpu_check.py), on a machine with an NVIDIA GPU and
# JAX's CUDA plugin, with that machine's own Python ($(GPU_CHECK_PYTHON)); a CPU dry run:
# `make gpu-check GPU_CHECK_ARGS=--platform=cpu`.
.PHONY: gpu-compile-check gpu-check
GPU_PYTHON       ?= $(shell pyenv root 2>/dev/null)/versions/3.12.1/bin/python3.12
GPU_JAX          ?= 0.12.0.1
GPU_VENV         ?= .venv-gpu
GPU_STAMP        := $(GPU_VENV)/.pool3d-gpu-installed
GPU_CHECK_PYTHON ?= python3
GPU_CHECK_ARGS   ?=

$(GPU_STAMP):
	test -x $(GPU_VENV)/bin/python || $(GPU_PYTHON) -m venv $(GPU_VENV)
	$(GPU_VENV)/bin/python -m pip --disable-pip-version-check -q install jax==$(GPU_JAX) jaxlib==$(GPU_JAX) \
	  jax-cuda12-plugin==$(GPU_JAX) jax-cuda12-pjrt==$(GPU_JAX) nvidia-cuda-nvcc-cu12 pytest hypothesis
	touch $@

gpu-compile-check: $(GPU_STAMP)
	PYTHONPATH=$(CURDIR) JAX_PLATFORMS=cpu $(GPU_VENV)/bin/python -m pytest -q -p no:cacheprovider tests/test_gpu_deviceless.py
	PYTHONPATH=$(CURDIR) JAX_PLATFORMS=cpu $(GPU_VENV)/bin/python scripts/gpu_compile_check.py

gpu-check:
	PYTHONPATH=$(CURDIR) $(GPU_CHECK_PYTHON) scripts/gpu_check.py $(GPU_CHECK_ARGS)
