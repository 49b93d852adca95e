"""Whether this Python has the Neuron SDK the binding needs, and what to install if not.

The binding traces nkilib's kernel through `nki.jit`, so it needs the real
`nki` package and the kernel's module,
`nkilib.experimental.pooling.max_pooling_3d_backward`, which first ships in
Neuron SDK 2.33 (nkilib is bundled with neuronx-cc, not published on its own).
Both come from the Neuron SDK's own pip repository. The public registry holds
placeholders under the SDK's names (`nki`, `neuronx-cc`, `jax-neuronx`, and
`nki-library`, the library's own name) whose import raises "WRONG PACKAGE..."
or that install no module at all: they are told apart from the SDK here, so
the failure is one line at the start of a run, not an error deep inside
lowering.

`problems()` imports the modules (a placeholder is found only by importing
it); a successful check is remembered for the process.
"""

from __future__ import annotations

import importlib
import importlib.metadata

MIN_SDK = "2.33"
KERNEL_MODULE = "nkilib.experimental.pooling.max_pooling_3d_backward"
KERNEL_FUNCTION = "max_pooling_3d_backward"
PIP_REPOSITORY = "https://pip.repos.neuron.amazonaws.com"
INSTALL = f"pip install 'jax-neuronx[stable]' --extra-index-url={PIP_REPOSITORY}"
PLACEHOLDER_MARK = "WRONG PACKAGE"  # what the public registry's placeholders raise on import


class NeuronSdkUnavailable(ImportError):
    """One line: what is missing or wrong, and what to install from where."""


_checked = False


def _import_problem(module: str) -> str | None:
    """None if `module` imports; else a short phrase saying why not."""
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as error:
        missing = error.name or module
        if missing == module.split(".")[0]:
            return f"{missing} is not installed"
        if module == missing or module.startswith(f"{missing}."):
            # nkilib present, but without the kernel's module: an SDK older than 2.33
            return f"{module} is missing (Neuron SDK older than {MIN_SDK})"
        return f"import {module} failed: {missing} is not installed"
    except Exception as error:  # noqa: BLE001 - a broken install is reported, never raised from here
        text = " ".join(str(error).split())
        if PLACEHOLDER_MARK in text:
            package = module.split(".")[0]
            return f"the installed {package} is the public registry's placeholder (its import raises {PLACEHOLDER_MARK!r})"
        return f"import {module} failed ({type(error).__name__}: {text[:120]})"
    return None


def _placeholder_distributions() -> list[str]:
    """Placeholder distributions that install no module (the registry's `nki-library`)."""
    found = []
    try:
        files = importlib.metadata.files("nki-library")
    except importlib.metadata.PackageNotFoundError:
        return found
    if not any(str(f).startswith("nkilib/") for f in files or ()):
        found.append("nki-library (the public registry's placeholder, no nkilib in it)")
    return found


def problems() -> list[str]:
    """Why the binding cannot trace the kernel here (empty: it can)."""
    global _checked
    if _checked:
        return []
    found = []
    nki_problem = _import_problem("nki")
    if nki_problem:
        found.append(nki_problem)
    kernel_problem = _import_problem(KERNEL_MODULE)
    if kernel_problem:
        found.append(kernel_problem)
        found.extend(_placeholder_distributions())
    elif not found:
        module = importlib.import_module(KERNEL_MODULE)
        if not callable(getattr(module, KERNEL_FUNCTION, None)):
            found.append(f"{KERNEL_MODULE} has no {KERNEL_FUNCTION}")
    _checked = not found
    return found


def message(found: list[str]) -> str:
    """The one-line error for `found` problems."""
    return (
        f"the neuron binding needs the Neuron SDK {MIN_SDK} or later (Trn2/Trn3): {'; '.join(found)}; "
        f"use the Neuron SDK's JAX environment, or uninstall any placeholder and run `{INSTALL}` "
        "(nkilib ships inside neuronx-cc; see docs/neuron.md)"
    )


def require() -> None:
    """Raise NeuronSdkUnavailable (one line) unless the SDK's nki and the kernel's module import."""
    found = problems()
    if found:
        raise NeuronSdkUnavailable(message(found))


def load_kernel():
    """The `@nki.jit`-decorated kernel, by its full module path."""
    require()
    return getattr(importlib.import_module(KERNEL_MODULE), KERNEL_FUNCTION)
