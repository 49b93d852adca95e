"""PyTorch models on JAX through torchax: a small `torch.nn` 3-D CNN's training step under `pool3d_pass.jit`.

torchax lowers `aten.max_pool3d` to `lax.reduce_window`; JAX's autodiff then
emits the usual `select_and_scatter`, which the pass rewrites
(docs/frontends.md, "PyTorch through torchax"). Checked: every pool's gradient
becomes a kernel call, none is left to XLA, the loss equals `jax.jit`'s bit for
bit and the gradients up to the order overlapping windows' contributions are
summed in (f32; the pools read ReLU outputs, so windows hold ties).

Needs torch and a torchax that imports under it: torchax 0.0.10-0.0.13 do not
under torch 2.13 (the CPU build this project's machines have), so the module
skips there, saying why.
"""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.needs_torch

torch = pytest.importorskip("torch", reason="needs PyTorch (the 'torch' extra); its CPU build is for Python 3.11 here")
try:
    import torchax
except ImportError as error:
    pytest.skip(f"torchax is not installed ({error}); see docs/frontends.md, 'PyTorch through torchax'",
                allow_module_level=True)
except Exception as error:  # noqa: BLE001 -- an import that raises anything else: a torch it does not support
    pytest.skip(f"torchax does not import under torch {torch.__version__} ({type(error).__name__}: {error}); "
                "see docs/frontends.md, 'Versions'", allow_module_level=True)

import jax
import jax.numpy as jnp

import pool3d_pass
from oracles.compiled_hlo import pool_gradient_ops
from pool3d_pass.contract import TARGETS

GRADIENT_CALLS = ("backward", "backward_from_indices", "backward_from_input")


class Net(torch.nn.Module):
    """Two pooling kinds torch users write: a plain MaxPool3d(2), and a padded, overlapping, ceil-mode one."""

    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv3d(2, 4, 3, padding=1)
        self.pool1 = torch.nn.MaxPool3d(2)
        self.conv2 = torch.nn.Conv3d(4, 4, 3, padding=1)
        self.pool2 = torch.nn.MaxPool3d(3, stride=2, padding=1, ceil_mode=True)
        self.head = torch.nn.Linear(4, 3)

    def forward(self, x):
        x = self.pool1(torch.relu(self.conv1(x)))
        x = self.pool2(torch.relu(self.conv2(x)))
        return self.head(x.mean(dim=(2, 3, 4)))


def test_a_torch_nn_models_training_step_is_rewritten_with_jax_jits_results():
    torch.manual_seed(0)
    weights, fn = torchax.extract_jax(Net())
    x = jnp.asarray(np.random.default_rng(0).standard_normal((2, 2, 8, 9, 10), np.float32))

    def loss(w, x):
        return jnp.mean(fn(w, (x,)) ** 2)

    step = jax.value_and_grad(loss)
    rewritten = pool3d_pass.jit(step)
    hlo = rewritten.lower(weights, x).compile().as_text()
    calls = {kind: hlo.count(f'custom_call_target="{target}"') for kind, target in TARGETS.items()}
    assert sum(calls[kind] for kind in GRADIENT_CALLS) == 2, calls
    assert pool_gradient_ops(hlo) == 0
    (loss_a, grads_a), (loss_b, grads_b) = jax.jit(step)(weights, x), rewritten(weights, x)
    assert float(loss_a) == float(loss_b)
    assert grads_a.keys() == grads_b.keys()
    for name in grads_a:
        a, b = np.asarray(grads_a[name]), np.asarray(grads_b[name])
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6 * np.abs(a).max(), err_msg=name)
