"""A pooled dimension split over devices: which planes each shard needs from its neighbours (arithmetic only).

XLA tiles a dimension of N planes over n devices in shards of ceil(N / n)
planes, shard i holding planes [i*L, (i+1)*L) (the last one padded where n
does not divide N). The pool's output along it, O = (N + 2p - k) // s + 1
windows, is tiled the same way, in shards of W = ceil(O / n) windows. A
shard runs the kernel for the windows it owns, windows [i*W, (i+1)*W), and
for the input planes it owns. That needs no other shard's data where the
windows stay inside the shard, and a few planes of its neighbours' (a halo)
where they cross its borders, provided each shard's windows begin at the
same place relative to its planes: L == W * s (then window i*W starts p
planes before the shard's first plane, on every shard). Otherwise, or where
padding would fill whole shards, `plan_axis` says why no halo serves and the
dimension is made whole instead (bindings/partitioned.py).

For one split dimension (`AxisHalo`):

* the forward (`forward`, `forward_output`) of the shard's windows reads
  input planes [i*L - p, (i+1)*L + k - s - p): `forward_halo` = (p, k - s - p)
  planes from the shards below and above (a negative count: planes of its
  own it does not read);
* a gradient (`backward`, `backward_from_indices`, `backward_from_input`) of
  the shard's input planes needs every window that touches them, including
  `grad_halo` = (a, b) windows of its neighbours, a = ceil((k - p) / s) - 1,
  b = ceil(p / s): each shard sums its own planes' contributions completely,
  in the kernel's window order, as the unsharded kernel does, so nothing is
  summed across devices and the result is the same bits. Those windows read
  `input_halo` = (a*s + p, (b - 1)*s + k - p) input planes around the
  shard's (for the calls that read the input).

Windows aligned with the shards (k <= s, p == 0: k2 s2, (1, 2, 2)) need no
halo at all. Planes and windows outside the volume (below the first, beyond
the last: padding, and the padded tail of uneven shards) are filled by the
caller with values the kernel never selects.
"""

from __future__ import annotations

from dataclasses import dataclass

from pool3d_pass.contract import BACKWARD, BACKWARD_FROM_INDICES, BACKWARD_FROM_INPUT, FORWARD, FORWARD_OUTPUT

AXIS_NAMES = "DHW"


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class AxisHalo:
    """One pooled dimension split in `tiles` shards: its geometry and the halos each call needs."""

    axis: int  # 0, 1, 2: D, H, W
    tiles: int
    extent: int  # the input's planes, N
    windows: int  # the output's, O
    kernel: int
    stride: int
    padding: int

    @property
    def name(self) -> str:
        return AXIS_NAMES[self.axis]

    @property
    def shard_extent(self) -> int:
        """L: input planes per shard (the last shard's tail is padding where the tiles do not divide N)."""
        return _ceil_div(self.extent, self.tiles)

    @property
    def shard_windows(self) -> int:
        """W: windows per shard."""
        return _ceil_div(self.windows, self.tiles)

    @property
    def uneven(self) -> bool:
        return self.shard_extent * self.tiles != self.extent or self.shard_windows * self.tiles != self.windows

    @property
    def reads_past_end(self) -> bool:
        """Whether a window of the volume reads past its last plane (into padding): then the planes
        there (an uneven split's padded tail, a halo from beyond the last shard) must be filled."""
        return (self.windows - 1) * self.stride - self.padding + self.kernel > self.extent

    @property
    def windows_past_end_touch_it(self) -> bool:
        """Whether a window past the volume's last (in an uneven split's padded tail, or a halo window
        from beyond the last shard) covers a plane of the volume: then its gradient must be zero."""
        return self.windows * self.stride - self.padding < self.extent

    @property
    def forward_halo(self) -> tuple[int, int]:
        """Input planes from below and above that the shard's windows read (negative: fewer of its own)."""
        return self.padding, self.kernel - self.stride - self.padding

    @property
    def grad_halo(self) -> tuple[int, int]:
        """Windows of the shards below and above that touch the shard's input planes."""
        return _ceil_div(self.kernel - self.padding, self.stride) - 1, _ceil_div(self.padding, self.stride)

    @property
    def input_halo(self) -> tuple[int, int]:
        """Input planes from below and above that the windows of `grad_halo` and the shard's own read."""
        below, above = self.grad_halo
        return below * self.stride + self.padding, (above - 1) * self.stride + self.kernel - self.padding

    @property
    def grad_extent(self) -> int:
        """The input planes all of `grad_halo`'s and the shard's windows span: the gradient kernel's extent."""
        below, above = self.grad_halo
        return (self.shard_windows + below + above - 1) * self.stride + self.kernel

    def halos(self, call: str) -> dict[str, tuple[int, int]]:
        """Per operand name of `call`, the (below, above) planes it needs from the neighbours (only those
        with any); what a remark says and the exchange moves."""
        if call in (FORWARD, FORWARD_OUTPUT):
            wanted = {"input": self.forward_halo}
        elif call == BACKWARD_FROM_INDICES:
            wanted = {"grad_output": self.grad_halo, "indices": self.grad_halo}
        elif call == BACKWARD:
            wanted = {"grad_output": self.grad_halo, "output": self.grad_halo, "input": self.input_halo}
        elif call == BACKWARD_FROM_INPUT:
            wanted = {"grad_output": self.grad_halo, "input": self.input_halo}
        else:
            raise ValueError(f"unknown call {call!r}")
        return {name: (max(below, 0), max(above, 0)) for name, (below, above) in wanted.items()
                if below > 0 or above > 0}


def plan_axis(axis: int, tiles: int, extent: int, windows: int, kernel: int, stride: int,
              padding: int) -> AxisHalo | str:
    """The halo plan of pooled dimension `axis` split in `tiles` shards, or why no halo exchange serves."""
    plan = AxisHalo(axis, tiles, extent, windows, kernel, stride, padding)
    name, shard, own = plan.name, plan.shard_extent, plan.shard_windows
    if shard != own * stride:
        return (f"{name}: shards of {shard} planes hold {own} windows of stride {stride}, so windows do not start "
                f"at the same place in every shard ({extent} planes, {windows} windows over {tiles} shards)")
    if (tiles - 1) * shard >= extent or (tiles - 1) * own >= windows:
        return f"{name}: {extent} planes over {tiles} shards of {shard} leave a shard with none of the volume"
    return plan


def describe(call: str, plans: list[AxisHalo]) -> str:
    """How `call` runs on each shard of the split pooled dimensions, e.g.
    "D in 4 shards, halo of input 1 plane below"."""
    parts = []
    for plan in plans:
        halos = plan.halos(call)
        text = f"{plan.name} in {plan.tiles} shards" + (" (uneven: the last one padded)" if plan.uneven else "")
        if not halos:
            parts.append(text + ", windows inside each shard: no halo")
            continue
        moved = []
        for operand, (below, above) in halos.items():
            sides = [f"{n} {'plane' if n == 1 else 'planes'} {side}" for n, side in ((below, "below"), (above, "above"))
                     if n]
            moved.append(f"{operand} {' and '.join(sides)}")
        parts.append(text + ", halos of " + "; ".join(moved))
    return "; ".join(parts)
