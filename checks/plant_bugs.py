"""Plant known bugs one at a time and check that the tests named for each catch it.

A test suite is only as good as the bugs it fails on. Each entry of PLANTS is a
bug once planted by hand that a test must catch: a file, an exact text that
occurs in it once, what replaces it, and the tests expected to fail. For each
plant, the working tree (what git tracks, what it does not ignore, and the
compiled extensions beside the sources) is copied to a temporary folder, the
text is replaced there, a plant in the C++ of the CPU kernels (bindings/cpu/,
and bindings/shared_kernels/, which they share with the CUDA kernels) rebuilds
their extension there (CMakePresets.json's `cpu` preset, loaded through
POOL3D_KERNEL_LIBRARY: several minutes each on 2 cores), and the named tests
run there with this Python. Caught: they fail. Survived: they pass. First the
same tests run on an unplanted copy and must pass, or a failure would prove
nothing.

    python -m checks.plant_bugs                 # every plant
    python -m checks.plant_bugs --list          # the table
    python -m checks.plant_bugs NAME [NAME...]  # some plants, by name

Exit status: 0 every plant caught; 1 some plant survived; 2 the check could
not run (a text not found exactly once, the unplanted tests failing, a build
failing, the copy not imported). tests/checks/test_plant_bugs.py keeps the
table in step with the tree.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from pool3d_pass.environment import KERNEL_LIBRARY

ROOT = Path(__file__).resolve().parents[1]
# The C++ compiled into the CPU extension: its own and what it shares with the CUDA kernels.
CPU_SOURCES = ("pool3d_pass/bindings/cpu/", "pool3d_pass/bindings/shared_kernels/")
SCIKIT_BUILD_SKIP = "SKBUILD_EDITABLE_SKIP"  # scikit-build-core's editable finder stands aside for these paths


@dataclasses.dataclass(frozen=True)
class Plant:
    name: str
    path: str  # relative to the repository root
    find: str  # exact text; must occur in `path` exactly once
    replace: str
    # pytest node ids or files, relative to the root, expected to fail. Name tests without
    # drawn examples where one catches the plant: Hypothesis shrinks a failure for minutes.
    tests: tuple[str, ...]
    bug: str  # what the plant breaks, in words

    @property
    def rebuild(self) -> bool:
        """A change to C++ the CPU extension compiles: it is rebuilt in the copy."""
        return self.path.startswith(CPU_SOURCES) and self.path.endswith((".cc", ".h"))


PLANTS = (
    Plant(
        name="nki-launch-swaps-grad-output-and-output",
        path="pool3d_pass/bindings/neuron/calls.py",
        find="        grad_output=grad_output,\n        input_tensor=trimmed,\n        output_tensor=output,\n",
        replace="        grad_output=output,\n        input_tensor=trimmed,\n        output_tensor=grad_output,\n",
        tests=("tests/bindings/neuron/test_neuron_binding.py::test_the_binding_hands_the_kernel_each_tensor_and_attribute_in_its_place",),
        bug="the NKI kernel gets the forward output as grad_output and the gradient as output_tensor "
            "(same shape and dtype)",
    ),
    Plant(
        name="cpu-maximum-drops-plus-zero-over-minus-zero",
        path="pool3d_pass/bindings/shared_kernels/window_scan.h",
        find="  *m = best_key == 0 && plus_zero ? M(0) : best;\n",
        replace="  *m = best;\n",
        tests=("tests/bindings/cpu/test_cpu_kernel_layer.py::test_output_format_may_differ_from_data_format",),
        bug="the generic CPU kernels (mixed layouts) return a window's first zero, -0 before +0, as its maximum",
    ),
    Plant(
        name="reference-selects-the-last-tap-equal-to-the-maximum",
        path="pool3d_pass/bindings/reference/calls.py",
        find="            & (indices == NO_SELECTION)\n",
        replace="",
        tests=("tests/bindings/test_bindings.py::test_reference_binding_is_spliced_and_matches_the_original",
               "tests/bindings/reference/test_reference_calls.py::test_every_call_states_the_contract"),
        bug="the pure-JAX reference binding gives a tied window's gradient to its last maximal tap",
    ),
    Plant(
        name="pallas-recompute-selects-the-last-tap-equal-to-y",
        path="pool3d_pass/bindings/gpu/pallas/kernels.py",
        find="            take = real & (v == y) & (index < 0)\n",
        replace="            take = real & (v == y)\n",
        tests=("tests/bindings/gpu/test_pallas_kernels.py::test_mixed_layouts",),
        bug="the Pallas window kernel's recompute selection takes the last tap equal to y",
    ),
    Plant(
        name="cuda-overlapping-gather-counts-outputs",
        path="pool3d_pass/bindings/gpu/cuda/launch_plan.h",
        find="    if (kernel == Kernel::kGather && Overlapping(g)) {  // blocks of input positions\n",
        replace="    if (false) {  // blocks of input positions\n",
        tests=("tests/bindings/gpu/test_cuda_elements.py::test_every_call_equals_the_cpu_kernels[k3s2p1-ncdhw-f32-ints]",),
        bug="the CUDA gather over overlapping windows runs one unit per output window, not per block of "
            "inputs: most of dx is never written",
    ),
    Plant(
        name="cuda-chunk-writes-dx-at-the-output-offset",
        path="pool3d_pass/bindings/gpu/cuda/run_plan.h",
        find="  p.dx = all.dx ? all.dx + in : nullptr;\n",
        replace="  p.dx = all.dx ? all.dx + out : nullptr;\n",
        tests=("tests/bindings/gpu/test_cuda_elements.py::test_launch_variants_give_the_same_bits[ncdhw-k2s2-chunked]",),
        bug="launches after the first chunk write dx where the next chunk's outputs start",
    ),
    Plant(
        name="cuda-never-takes-int64-offsets",
        path="pool3d_pass/bindings/gpu/cuda/launch_plan.h",
        find="  const bool wide = biggest >= o.narrow_limit || o.wide;\n",
        replace="  const bool wide = o.wide;\n",
        tests=("tests/bindings/gpu/test_cuda_elements.py::test_offset_width_at_the_int32_boundary",),
        bug="planes of 2^31 elements or more keep int32 offsets (they overflow)",
    ),
    Plant(
        name="cuda-maximum-drops-plus-zero-over-minus-zero",
        path="pool3d_pass/bindings/gpu/cuda/window_units.h",
        find="            y[j] = best[j].plus_zero ? M(0) : M(M(1) << (8 * sizeof(M) - 1));\n",
        replace="            y[j] = Narrow<T>(best[j].m);\n",
        tests=("tests/bindings/gpu/test_cuda_elements.py::test_every_call_equals_the_cpu_kernels[k3s2p1-ndhwc-f32-zeros]",),
        bug="the CUDA window kernels return whichever zero they met as a zero maximum, not +0 where a tap holds +0",
    ),
    Plant(
        name="cuda-fused-block-leaves-uncovered-rows",
        path="pool3d_pass/bindings/gpu/cuda/fused_units.h",
        find="  if (last_d || last_h) ZeroUncoveredNcdhw<T, W, N>(g, dxp, d0, h0, c0, last_d, last_h);  // model: rare\n",
        replace="  if (false) ZeroUncoveredNcdhw<T, W, N>(g, dxp, d0, h0, c0, last_d, last_h);  // model: rare\n",
        tests=("tests/bindings/gpu/test_cuda_elements.py::test_every_call_equals_the_cpu_kernels[k2s2-ncdhw-f32-ints]",),
        bug="NCDHW non-overlapping gradients leave the rows no window covers unwritten",
    ),
    Plant(
        name="compile-drops-its-spliced-lowerings",
        path="pool3d_pass/integration/compile_hook.py",
        find="devices=devices, options=options, spliced=spliced, on_report=on_report)",
        replace="devices=devices, options=options, spliced=None, on_report=on_report)",
        tests=("tests/integration/test_partitioned.py::"
               "test_the_compile_keeps_its_lowerings_alive_when_the_caches_are_cleared_meanwhile",),
        bug="a compile keeps no list of the lowerings it spliced: once the caches drop them (another thread's "
            "jax.clear_caches()), XLA's partitioner finds no custom_partitioning callback and the program falls back",
    ),
    Plant(
        name="per-shard-code-stops-at-the-first-call",
        path="pool3d_pass/splicing/per_shard.py",
        find="                pending.extend(callees.get(name, ()))\n",
        replace="",
        tests=("tests/integration/test_shard_map.py::test_rewritten_with_jax_jit_results",),
        bug="a function called from a function a shard_map body calls (a jit inside a jit inside shard_map) gets "
            "the partitionable call, which XLA cannot partition in a manual computation: the program falls back",
    ),
    Plant(
        name="multi-device-rewrite-asks-bindings-for-partitionable-calls-they-lack",
        path="pool3d_pass/rewriting/strategy.py",
        find="    if not binding.implements(signature.call, partitioned=partitioned):\n",
        replace="    if False:\n",
        tests=("tests/integration/test_partitioned.py::"
               "test_a_binding_without_partitionable_calls_is_refused_in_a_multi_device_program",),
        bug="a multi-device program for a binding without partitionable calls (reference, neuron) is not refused: "
            "the public API raises KeyError: 'backward'",
    ),
    Plant(
        name="halo-forward-keeps-a-filler-plane-as-the-selection",
        path="pool3d_pass/bindings/halo_exchange.py",
        find="        if edge_padding:\n            indices = _first_real_taps(y, indices, plans, origins(False), False, pool, layout)\n",
        replace="",
        tests=("tests/integration/test_spatial_sharding.py",),
        bug="split along a padded dimension, a window at the volume's low edge whose real elements are all -inf "
            "selects the -inf filler plane below the volume, not its first real tap",
    ),
    Plant(
        name="halo-recompute-fills-with-minus-inf",
        path="pool3d_pass/bindings/halo_exchange.py",
        find='        x = widen(x, "input_halo", jnp.nan, pooled=False)\n',
        replace='        x = widen(x, "input_halo", -jnp.inf, pooled=False)\n',
        tests=("tests/integration/test_spatial_sharding.py",),
        bug="the recompute call's planes outside the volume hold -inf, which an all -inf window's maximum "
            "equals: its gradient goes to a filler plane",
    ),
    Plant(
        name="halo-fused-gradient-may-pick-a-filler-plane",
        path="pool3d_pass/bindings/halo_exchange.py",
        find="        if not edge_padding:\n",
        replace="        if True:\n",
        tests=("tests/integration/test_spatial_sharding.py",),
        bug="split along a padded dimension, the fused gradient call runs on the widened block, where a window "
            "at the volume's low edge whose real elements are all -inf selects a -inf filler plane",
    ),
    Plant(
        name="halo-exchange-sends-the-far-planes",
        path="pool3d_pass/bindings/halo_exchange.py",
        find="        start = shard - take if direction < 0 else 0\n",
        replace="        start = 0 if direction < 0 else shard - take\n",
        tests=("tests/integration/test_spatial_sharding.py",),
        bug="a device sends its neighbour the planes at its far side instead of those next to the neighbour",
    ),
    Plant(
        name="halo-leaves-an-uneven-shards-tail-unfilled",
        path="pool3d_pass/bindings/halo_exchange.py",
        find="    outside_possible = below > 0 or past_end and shard * topology.tiles(dim) + max(above, 0) > extent\n",
        replace="    outside_possible = below > 0 or past_end and max(above, 0) > 0\n",
        tests=("tests/integration/test_spatial_sharding.py",),
        bug="the padded tail of an uneven last shard keeps whatever XLA left there instead of a filler the "
            "kernel never selects",
    ),
)


class CheckError(Exception):
    """The check itself could not run (one line)."""


def problems(root: Path = ROOT, plants=PLANTS) -> list[str]:
    """What keeps the table from applying to the tree at `root` (empty: nothing)."""
    found, names = [], set()
    for plant in plants:
        if plant.name in names:
            found.append(f"{plant.name}: the name is used twice")
        names.add(plant.name)
        source = root / plant.path
        if not source.is_file():
            found.append(f"{plant.name}: {plant.path} does not exist")
            continue
        count = source.read_text().count(plant.find)
        if count != 1:
            found.append(f"{plant.name}: its text occurs {count} times in {plant.path}, not once")
        if plant.find == plant.replace:
            found.append(f"{plant.name}: the replacement is the text itself")
        if not plant.tests:
            found.append(f"{plant.name}: names no test")
        for test in plant.tests:
            if not (root / test.split("::")[0]).is_file():
                found.append(f"{plant.name}: {test} names no file")
    return found


def tree_files(root: Path) -> list[str]:
    """The files a copy needs: git's (tracked, and untracked but not ignored) and the built extensions."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=root, capture_output=True, check=True).stdout.decode()
    files = {name for name in listed.split("\0") if name and (root / name).is_file()}
    files.update(str(path.relative_to(root)) for path in (root / "pool3d_pass").rglob("*.so"))
    return sorted(files)


def copy_tree(root: Path, destination: Path) -> None:
    for name in tree_files(root):
        target = destination / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / name, target)


def apply(plant: Plant, tree: Path) -> None:
    source = tree / plant.path
    text = source.read_text()
    if text.count(plant.find) != 1:
        raise CheckError(f"{plant.name}: its text does not occur once in {plant.path}")
    source.write_text(text.replace(plant.find, plant.replace))


def environment(tree: Path, kernel_library: Path | None = None) -> dict[str, str]:
    """This process's environment, with `tree` the pool3d_pass every child imports."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    # An editable install's finder would import the installed tree's sources before PYTHONPATH's.
    finders = [str(finder.path) for finder in sys.meta_path
               if type(finder).__name__ == "ScikitBuildRedirectingFinder" and getattr(finder, "path", None)]
    env[SCIKIT_BUILD_SKIP] = os.pathsep.join(filter(None, [env.get(SCIKIT_BUILD_SKIP, ""), *finders]))
    env.pop(KERNEL_LIBRARY, None)
    if kernel_library is not None:
        env[KERNEL_LIBRARY] = str(kernel_library)
    return env


def check_imported_from(tree: Path, env: dict[str, str]) -> None:
    probe = subprocess.run([sys.executable, "-c", "import pool3d_pass; print(pool3d_pass.__file__)"],
                           cwd=tree, env=env, capture_output=True, text=True)
    where = probe.stdout.strip()
    if probe.returncode != 0 or not Path(where).resolve().is_relative_to(tree.resolve()):
        raise CheckError(f"the copy's tests would not import the copy's pool3d_pass (got {where or probe.stderr[-200:]!r})")


def build_cpu_kernels(tree: Path) -> Path:
    """The CPU extension built from `tree`'s sources (CMakePresets.json's `cpu` preset); its path."""
    if shutil.which("cmake") is None:
        raise CheckError("a C++ plant needs cmake on PATH (make install puts one into .venv)")
    steps = [["cmake", "--preset", "cpu", f"-DPython_EXECUTABLE={sys.executable}", "-DPOOL3D_CUDA=OFF"],
             ["cmake", "--build", "--preset", "cpu", "--parallel", str(os.cpu_count() or 1)]]
    for step in steps:
        result = subprocess.run(step, cwd=tree, capture_output=True, text=True)
        if result.returncode != 0:
            raise CheckError(f"{' '.join(step[:3])} failed: {(result.stdout + result.stderr)[-400:]}")
    built = sorted((tree / "build" / "cpu").glob("_kernel*.so"))
    if len(built) != 1:
        raise CheckError(f"the build left {len(built)} extensions in build/cpu, not one")
    return built[0]


def run_tests(tree: Path, env: dict[str, str], tests) -> tuple[int, str]:
    """pytest's exit status on `tests` in `tree` (stopping at the first failure), and its outcome in a line."""
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-rf", "-p", "no:cacheprovider", *tests],
                            cwd=tree, env=env, capture_output=True, text=True)
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    failed = [line.split(" - ")[0] for line in lines if line.startswith("FAILED ")]
    last = lines[-1].strip("= ") if lines else result.stderr.strip()[-200:]
    return result.returncode, " ".join([*failed[:1], f"({last})" if failed else last])


def check_plant(plant: Plant, root: Path) -> tuple[str, str]:
    """("caught" | "survived", pytest's summary) for one plant, in a copy of `root`."""
    with tempfile.TemporaryDirectory(prefix=f"plant-{plant.name}-") as folder:
        tree = Path(folder)
        copy_tree(root, tree)
        apply(plant, tree)
        env = environment(tree, build_cpu_kernels(tree) if plant.rebuild else None)
        check_imported_from(tree, env)
        status, summary = run_tests(tree, env, plant.tests)
    if status == 1:
        return "caught", summary
    if status == 0:
        return "survived", summary
    raise CheckError(f"{plant.name}: pytest could not run the tests (exit status {status}): {summary}")


def check_baseline(plants, root: Path) -> None:
    """The plants' tests pass on an unplanted copy."""
    tests = sorted({test for plant in plants for test in plant.tests})
    with tempfile.TemporaryDirectory(prefix="plant-baseline-") as folder:
        tree = Path(folder)
        copy_tree(root, tree)
        env = environment(tree)
        check_imported_from(tree, env)
        status, summary = run_tests(tree, env, tests)
    if status != 0:
        raise CheckError(f"the plants' tests fail without any plant: {summary}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m checks.plant_bugs", description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="plants to check (default: all)")
    parser.add_argument("--list", action="store_true", help="print the table and exit")
    args = parser.parse_args(argv)
    known = {plant.name: plant for plant in PLANTS}
    unknown = [name for name in args.names if name not in known]
    if unknown:
        parser.error(f"unknown plant(s) {', '.join(unknown)}; --list names them")
    plants = [known[name] for name in args.names] or list(PLANTS)
    if args.list:
        for plant in plants:
            rebuild = " (rebuilds the CPU kernels)" if plant.rebuild else ""
            print(f"{plant.name}: {plant.path}{rebuild}\n  {plant.bug}\n  caught by: {', '.join(plant.tests)}")
        return 0
    try:
        found = problems(ROOT, plants)
        if found:
            raise CheckError("; ".join(found))
        check_baseline(plants, ROOT)
        survived = 0
        for plant in plants:
            verdict, summary = check_plant(plant, ROOT)
            survived += verdict == "survived"
            print(f"{verdict:9} {plant.name}: {summary}", flush=True)
    except CheckError as error:
        print(f"plant_bugs: {error}", file=sys.stderr)
        return 2
    print(f"{len(plants) - survived} of {len(plants)} plants caught")
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main())
