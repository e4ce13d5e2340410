"""Upper bounds of the memory one conv kernel call needs besides its operands and its result.

- the finite check reads each operand's exponent bits into a temporary of its size;
- the kernel itself: the largest workspace of the paths the call may take, from the table next to
  the dispatch (:func:`engine.kernels.dispatch.workspace_bytes`, the bounds in
  :mod:`engine.kernels.workspace`), compiled or not, as that is decided at call time;
- when an operand may hold NaN or Inf (:attr:`blocks.spec.TensorSpec.finite`), the NaN/Inf path
  first runs the kernel on finite copies of both operands, then on float32 0/1 indicator arrays
  while an output-sized count and three flag arrays are alive.

Checked against tracemalloc by ``tests/test_memory.py``.
"""

from __future__ import annotations

import math

from engine.base.dtypes import compute_dtype, to_dtype
from engine.kernels import dispatch
from engine.kernels.workspace import nd_workspace_bytes, sizes
from engine.shapes.conv import ConvGeometry, ConvGeometryNd

KINDS = dispatch.KINDS
#: Small temporaries (index lists, reductions, per-call bookkeeping) on top of the arrays.
SLACK = 2**20


def _planes_bytes(g: ConvGeometryNd, kind: str, ct: int) -> int:
    """The 3-D ops' planes path (:mod:`engine.kernels.conv3d_planes`): the widest depth tap's
    2-D call (its workspace, its stacked operand planes, its result), the operands in the
    compute dtype and the result with a sum of two taps."""
    x, w, y = sizes(g)
    result = {"forward": y, "filter": w, "input": x}[kind]
    widest = dispatch.workspace_bytes(g.plane_geometry(g.batch * max(1, g.out_spatial[0])),
                                      kind, ct)
    return widest + ct * ((x + y) + (x + w + y) + 3 * result)


def _kernel_bytes(g: ConvGeometry | ConvGeometryNd, kind: str, ct: int) -> int:
    """The kernel's own workspace: the 2-D dispatch's paths, or the largest of the 3-D ops'
    paths (decided at call time)."""
    from engine.kernels import im2col_nd

    if isinstance(g, ConvGeometry):
        return dispatch.workspace_bytes(g, kind, ct)
    return max(nd_workspace_bytes(g, kind, ct), _planes_bytes(g, kind, ct),
               im2col_nd.workspace_bytes(g, kind, ct))


def conv_workspace(g: ConvGeometry | ConvGeometryNd, kind: str, dtype: str,
                   operands_finite: bool) -> int:
    """Bytes one call of the ``kind`` (forward, filter or input gradient) kernel of geometry
    ``g`` on ``dtype`` operands may need besides its operands and result (an upper bound)."""
    it = to_dtype(dtype).itemsize
    ct = compute_dtype(to_dtype(dtype)).itemsize
    x, w, y = sizes(g)
    a, b = {"forward": (x, w), "filter": (x, y), "input": (w, y)}[kind]
    out = {"forward": y, "filter": w, "input": x}[kind]
    check = max(a, b) * it
    finite_path = _kernel_bytes(g, kind, ct)
    if operands_finite:
        return SLACK + max(check, finite_path)
    copies = (a + b) * it + max(a, b) + finite_path
    indicators = 12 * out + 8 * (a + b) + _kernel_bytes(g, kind, 4)
    return SLACK + max(check, copies, indicators)


def product_bound(a: float, b: float, terms: int) -> float:
    """A bound of ``|sum of terms products|`` given bounds of both factors (inf stays inf)."""
    if a == 0 or b == 0 or terms == 0:
        return 0.0
    return math.inf if math.isinf(a) or math.isinf(b) else a * b * terms * (1 + 1e-6)


def terms_per_output(g: ConvGeometry | ConvGeometryNd, kind: str) -> int:
    """Products summed into one output element."""
    nd = g.nd if isinstance(g, ConvGeometry) else g
    taps = math.prod(nd.filter_spatial)
    if kind == "forward":
        return taps * (1 if nd.depthwise else nd.filter_in_depth)
    if kind == "filter":
        return nd.batch * math.prod(nd.out_spatial)
    return taps * (nd.filter_out if nd.depthwise else nd.filter_out // nd.groups)
