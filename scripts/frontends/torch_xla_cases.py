"""torch-xla max-pool gradients lowered to StableHLO (run in a torch-xla venv).

Run by ``scripts/lower_fixtures.py --frontend torch-xla --python <venv>/bin/python``
(see docs/frontends.md for the venv: torch-xla 2.9 needs torch 2.9); standalone::

    PJRT_DEVICE=CPU /work/venv-txla/bin/python scripts/frontends/torch_xla_cases.py OUT.json [NAME ...]

writes a JSON list like scripts/frontends/tensorflow_cases.py. Each case runs
eagerly on a lazy XLA device (``PJRT_DEVICE=CPU``): inputs are created on the
host and moved to ``torch_xla.device()`` (so they become parameters of the
graph, not inlined random-number code), ``loss.backward()`` (and an optimizer
step) record the graph, and ``torch_xla.core.xla_model.get_stablehlo(tensors)``
returns the StableHLO of the graph computing ``tensors`` (x.grad, or the
updated parameters and the loss); nothing is executed. torch-xla writes the
forward as ``pad(-inf)`` + ``reduce_window`` without padding and the backward
as ``select_and_scatter`` with attribute padding (``ceil_mode`` adds high
padding).

Two cases take the other route torch-xla offers: ``torch.export.export`` of a
loss module, its joint forward-backward graph
(``torch.export.experimental._export_forward_backward``, a private API of
torch 2.9), lowered by ``torch_xla.stablehlo.exported_program_to_stablehlo``
(``.get_stablehlo_text()``). (``torch_xla._XLAC._get_stablehlo`` is what
``get_stablehlo`` calls.)
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("PJRT_DEVICE", "CPU")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import numpy as np
import torch
import torch.nn.functional as F
import torch_xla
import torch_xla.core.xla_model as xm

from case_runner import CaseList, main  # this folder: the script's own

CASES = CaseList("torch-xla")
case = CASES.case


def dev():
    return torch_xla.device()


def leaf(shape, dtype=torch.float32, seed=0):
    """A host tensor moved to the XLA device: a graph parameter, requires_grad."""
    x = torch.from_numpy(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))
    return x.to(dtype).to(dev()).requires_grad_()


def grad_of(pool, shape, dtype=torch.float32, loss="sq"):
    """x.grad of sum(pool(x)**2) (forward needed) or sum(pool(x)) (forward not needed)."""
    def build():
        x = leaf(shape, dtype)
        y = pool(x)
        (y.float().square().sum() if loss == "sq" else y.float().sum()).backward()
        return [x.grad]
    return build


def mp3(k, s, p=0, ceil=False, **kw):
    return lambda x: F.max_pool3d(x, k, s, p, ceil_mode=ceil, **kw)


def mp2(k, s, p=0, ceil=False):
    return lambda x: F.max_pool2d(x, k, s, p, ceil_mode=ceil)


G = "x.grad of sum(F.max_pool3d(x)**2)"
case("txla_max_pool3d_k2s2_p0_f32", f"{G}, (2,3,6,6,6), k2 s2 p0")(grad_of(mp3(2, 2), (2, 3, 6, 6, 6)))
case("txla_max_pool3d_k2s2_floor_odd7_f32", f"{G}, (2,3,7,7,7), k2 s2 p0 ceil_mode=False: last plane dropped")(
    grad_of(mp3(2, 2), (2, 3, 7, 7, 7)))
case("txla_max_pool3d_k2s2_ceil_odd7_f32",
     f"{G}, (2,3,7,7,7), k2 s2 p0 ceil_mode=True: padding (0,1), the forward is pad(-inf)+reduce_window",
     notes="attribute padding (0,1) on the gradient, explicit pad on the forward: one forward, two forms")(
    grad_of(mp3(2, 2, ceil=True), (2, 3, 7, 7, 7)))
case("txla_max_pool3d_k2s2_p1_f32", f"{G}, (2,3,6,6,6), k2 s2 padding=1: padding (1,1)")(
    grad_of(mp3(2, 2, 1), (2, 3, 6, 6, 6)))
case("txla_max_pool3d_k3s2_p1_f32", f"{G}, (2,3,7,7,7), k3 s2 padding=1: padding (1,1), overlap")(
    grad_of(mp3(3, 2, 1), (2, 3, 7, 7, 7)))
case("txla_max_pool3d_k3s2_p1_ceil_f32", f"{G}, (2,3,8,8,8), k3 s2 padding=1 ceil_mode=True: padding (1,2)")(
    grad_of(mp3(3, 2, 1, ceil=True), (2, 3, 8, 8, 8)))
case("txla_max_pool3d_k3s2_p0_ceil_f32", f"{G}, (2,3,8,8,8), k3 s2 p0 ceil_mode=True: padding (0,1), overlap")(
    grad_of(mp3(3, 2, 0, ceil=True), (2, 3, 8, 8, 8)))
case("txla_max_pool3d_k3s1_p1_f32", f"{G}, (2,3,5,5,5), k3 s1 padding=1: shape-preserving, heavy overlap")(
    grad_of(mp3(3, 1, 1), (2, 3, 5, 5, 5)))
case("txla_max_pool3d_k123_s122_p011_f32",
     f"{G}, (2,3,4,7,9), anisotropic kernel (1,2,3) stride (1,2,2) padding (0,1,1)")(
    grad_of(mp3((1, 2, 3), (1, 2, 2), (0, 1, 1)), (2, 3, 4, 7, 9)))
case("txla_max_pool3d_unbatched_k2s2_f32", f"{G}, unbatched (3,6,6,6), k2 s2")(
    grad_of(mp3(2, 2), (3, 6, 6, 6)))
case("txla_max_pool3d_unbatched_k3s2_p1_ceil_f32", f"{G}, unbatched (3,8,8,8), k3 s2 padding=1 ceil_mode=True")(
    grad_of(mp3(3, 2, 1, ceil=True), (3, 8, 8, 8)))
case("txla_max_pool3d_sum_loss_k2s2_ceil_f32",
     "x.grad of sum(F.max_pool3d(x)), (2,3,7,7,7), k2 s2 ceil_mode=True: cotangent all ones, the "
     "forward is not needed (absent)", forward=False)(
    grad_of(mp3(2, 2, ceil=True), (2, 3, 7, 7, 7), loss="sum"))
case("txla_max_pool2d_k2s2_f32", "x.grad of sum(F.max_pool2d(x)**2), (2,3,8,8), k2 s2")(
    grad_of(mp2(2, 2), (2, 3, 8, 8)))
case("txla_max_pool2d_k3s2_p1_ceil_f32",
     "x.grad of sum(F.max_pool2d(x)**2), (2,3,8,8), k3 s2 padding=1 ceil_mode=True: padding (1,2)")(
    grad_of(mp2(3, 2, 1, ceil=True), (2, 3, 8, 8)))
case("txla_max_pool3d_k2s2_bf16", f"{G}, (2,3,6,6,6) bf16, k2 s2")(
    grad_of(mp3(2, 2), (2, 3, 6, 6, 6), torch.bfloat16))
case("txla_max_pool3d_k3s2_p1_f16", f"{G}, (2,3,7,7,7) f16, k3 s2 padding=1")(
    grad_of(mp3(3, 2, 1), (2, 3, 7, 7, 7), torch.float16))
case("txla_max_pool3d_return_indices_f32",
     f"{G} with return_indices=True (indices unused), (2,3,7,7,7), k3 s2 padding=1")(
    grad_of(lambda x: F.max_pool3d(x, 3, 2, 1, return_indices=True)[0], (2, 3, 7, 7, 7)))


def _train_step(pool_kwargs, shape):
    def build():
        torch.manual_seed(0)

        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = torch.nn.Conv3d(shape[1], 4, 3, padding=1)
                self.pool = torch.nn.MaxPool3d(**pool_kwargs)
                with torch.no_grad():
                    n = self.pool(self.conv(torch.zeros(shape))).numel() // shape[0]
                self.fc = torch.nn.Linear(n, 3)

            def forward(self, x):
                return self.fc(self.pool(torch.relu(self.conv(x))).flatten(1))

        model = Net().to(dev())
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        x = leaf(shape).detach()
        target = leaf((shape[0], 3), seed=1).detach()
        opt.zero_grad()
        loss = F.mse_loss(model(x), target)
        loss.backward()
        opt.step()
        return [loss, *model.parameters()]
    return build


case("txla_conv3d_maxpool3d_train_step_f32",
     "torch.nn Conv3d(pad 1)-ReLU-MaxPool3d(2)-Linear, one SGD step (zero_grad, backward, step), "
     "x (2,2,6,6,6); results: loss and the updated parameters")(
    _train_step(dict(kernel_size=2, stride=2), (2, 2, 6, 6, 6)))
case("txla_conv3d_maxpool3d_ceil_train_step_f32",
     "torch.nn Conv3d(pad 1)-ReLU-MaxPool3d(3, stride 2, padding 1, ceil_mode=True)-Linear, one SGD step, "
     "x (2,2,7,7,7): forward pad(-inf)+reduce_window, gradient with attribute padding",
     notes="the forward must be reused across the two padding forms (report: forward inserted 0)")(
    _train_step(dict(kernel_size=3, stride=2, padding=1, ceil_mode=True), (2, 2, 7, 7, 7)))

def _export_joint(pool_kwargs, shape):
    """torch.export of a loss module, its joint forward-backward graph, through torch_xla.stablehlo."""
    def build():
        from torch.export.experimental import _export_forward_backward
        from torch_xla.stablehlo import exported_program_to_stablehlo

        torch.manual_seed(0)

        class Loss(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = torch.nn.Conv3d(shape[1], 4, 3, padding=1)
                self.pool = torch.nn.MaxPool3d(**pool_kwargs)
                with torch.no_grad():
                    n = self.pool(self.conv(torch.zeros(shape))).numel() // shape[0]
                self.fc = torch.nn.Linear(n, 3)

            def forward(self, x, target):
                y = self.pool(torch.relu(self.conv(x)))
                return (F.mse_loss(self.fc(y.flatten(1)), target),)

        x = torch.from_numpy(np.random.default_rng(0).standard_normal(shape).astype(np.float32))
        target = torch.from_numpy(np.random.default_rng(1).standard_normal((shape[0], 3)).astype(np.float32))
        exported = torch.export.export(Loss(), (x, target))
        joint = _export_forward_backward(exported)  # loss and the parameters' gradients
        return exported_program_to_stablehlo(joint).get_stablehlo_text()
    return build


case("txla_export_joint_conv3d_maxpool3d_ceil_f32",
     "torch.export of Conv3d(pad 1)-ReLU-MaxPool3d(3, stride 2, padding 1, ceil_mode=True)-Linear-MSE, "
     "joint forward-backward graph (torch.export.experimental._export_forward_backward), lowered by "
     "torch_xla.stablehlo.exported_program_to_stablehlo; x (2,2,7,7,7); results: loss and parameter gradients",
     notes="the exported form: forward pad(-inf) + reduce_window, gradient with attribute padding; no "
           "lazy tensors involved")(
    _export_joint(dict(kernel_size=3, stride=2, padding=1, ceil_mode=True), (2, 2, 7, 7, 7)))
case("txla_export_joint_conv3d_maxpool3d_k2s2_f32",
     "torch.export joint graph (as above) of Conv3d-ReLU-MaxPool3d(2)-Linear-MSE, x (2,2,6,6,6)")(
    _export_joint(dict(kernel_size=2, stride=2), (2, 2, 6, 6, 6)))


case("neg_txla_max_pool3d_f64", f"{G}, (2,3,6,6,6) f64, k2 s2 padding=1", expected=0,
     negative="f64: the kernel is f32/bf16/f16; the select_and_scatter stays, with a remark",
     remarks=["element type f64"])(
    grad_of(mp3(2, 2, 1), (2, 3, 6, 6, 6), torch.float64))
case("neg_txla_avg_pool3d_f32", "x.grad of sum(F.avg_pool3d(x)**2), (2,3,6,6,6), k2 s2", expected=0,
     forward=False, negative="average pooling: no select_and_scatter")(
    grad_of(lambda x: F.avg_pool3d(x, 2, 2), (2, 3, 6, 6, 6)))


def lower(c) -> str:
    built = c["build"]()
    return built if isinstance(built, str) else xm.get_stablehlo(built)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], CASES, lower, ("torch", "torch-xla")))
