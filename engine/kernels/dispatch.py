"""The one decision per kernel call: which path computes it, and the table of paths.

Each path is one row of :data:`PATHS`: the name :func:`engine.kernels.last_path` reports (and the
benchmarks and reports show), whether it is compiled, and its workspace bound
(:mod:`engine.kernels.workspace`; :func:`engine.kernels.memory.conv_workspace` takes the largest
over :func:`route`, the paths a call may take). :func:`route` is the rule, for ``kind`` forward,
filter or input gradient:

======================  =========================================  ==========================
call                    compiled path (when :func:`compiled`)      NumPy path
======================  =========================================  ==========================
no terms                ``empty``                                  ``empty``
extreme geometry        ``numpy tap-spans``                        ``numpy tap-spans``
depthwise               ``numba``                                  ``numpy tiles``
3x3 stride-1 conv,      ``winograd`` (a non-finite result, or the  the rows below
many channels           NaN/Inf path: the next row)
3x3 stride-2 input      ``winograd phases`` (as ``winograd``)      the rows below
gradient, many
channels
conv forward            ``numba im2col`` (< 16 channels per group)  ``numpy im2col`` /
                        / ``numba tiles``                          ``numpy per-tap``
conv filter gradient    ``numba im2col`` (< 16 channels per        ``numpy im2col`` /
                        group) / ``numba tiles``                   ``numpy per-tap``
conv input gradient     ``numba col2im`` (< 16 channels, written   ``numpy col2im`` /
                        in place) / ``numba tiles``                ``numpy gather`` /
                                                                   ``numpy per-tap``
======================  =========================================  ==========================

:func:`compiled` asks :func:`engine.kernels.accel.use_compiled` once per call, with the call's
work (its products), so ``GRADBLOCKS_KERNELS`` and the size rule are decided there and nowhere
else (the path is a function of the call, never of what is loaded); the compiled modules are handed what they need (the decision, the chunk
size). The NumPy paths (:mod:`engine.kernels.compute`, :mod:`engine.kernels.sparse`) import
nothing compiled.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType

import numpy as np

from engine.kernels import accel, compute, depthwise_tiles, path_record, sparse, workspace
from engine.kernels._compiled import winograd, winograd_phases
from engine.kernels.layout import PhaseLayout
from engine.kernels.nonfinite import exact_required
from engine.shapes.conv import ConvGeometry


@dataclass(frozen=True)
class Path:
    """One compute path: its name, whether it is compiled, and its workspace bound
    ``workspace(g, kind, compute_itemsize)`` in bytes."""

    name: str
    compiled: bool
    workspace: Callable[[ConvGeometry, str, int], int]


EMPTY = Path("empty", False, workspace.nothing)
TAP_SPANS = Path("numpy tap-spans", False, workspace.tap_spans)
NUMBA = Path("numba", True, workspace.compiled_depthwise)
NUMPY_TILES = Path("numpy tiles", False, workspace.depthwise_tiles)
WINOGRAD = Path("winograd", True, workspace.winograd_tiles)
WINOGRAD_PHASES = Path("winograd phases", True, workspace.winograd_phase_tiles)
NUMBA_TILES = Path("numba tiles", True, workspace.phase_layout)
NUMBA_IM2COL = Path("numba im2col", True, workspace.im2col)
NUMBA_COL2IM = Path("numba col2im", True, workspace.phase_layout)
NUMPY_IM2COL = Path("numpy im2col", False, workspace.phase_layout)
NUMPY_PER_TAP = Path("numpy per-tap", False, workspace.phase_layout)
NUMPY_COL2IM = Path("numpy col2im", False, workspace.phase_layout)
NUMPY_GATHER = Path("numpy gather", False, workspace.phase_layout)
#: Every path, by name.
PATHS = {p.name: p for p in (EMPTY, TAP_SPANS, NUMBA, NUMPY_TILES, WINOGRAD, WINOGRAD_PHASES,
                             NUMBA_TILES, NUMBA_IM2COL, NUMBA_COL2IM, NUMPY_IM2COL, NUMPY_PER_TAP,
                             NUMPY_COL2IM, NUMPY_GATHER)}
KINDS = ("forward", "filter", "input")
#: Products per second of the NumPy paths at the fast end of the benchmark cases (float32, 2
#: cores), so :func:`numpy_seconds` rather under- than overestimates (the rule of
#: :data:`engine.kernels.accel.COMPILED_FROM_SECONDS`).
NUMPY_PRODUCTS_PER_S = {"conv": 1.2e10, "depthwise": 8e8}


def products(g: ConvGeometry) -> int:
    """Multiply-adds of any of the three ops of ``g`` (the work :func:`compiled` weighs)."""
    return (g.batch * g.out_rows * g.out_cols * g.filter_rows * g.filter_cols
            * g.filter_in_depth * g.filter_out)


def numpy_seconds(g: ConvGeometry) -> float:
    """An estimate of the NumPy kernels' time for a call of ``g`` (see
    :data:`NUMPY_PRODUCTS_PER_S`)."""
    return products(g) / NUMPY_PRODUCTS_PER_S["depthwise" if g.depthwise else "conv"]


def empty(g: ConvGeometry) -> bool:
    """True when the sum over output positions has no terms (or no channels to sum into)."""
    return g.batch == 0 or g.out_rows == 0 or g.out_cols == 0 or g.out_depth == 0


def compiled(g: ConvGeometry, ctype: np.dtype) -> bool:
    """Whether this call runs compiled (float32/float64 compute; see the module doc)."""
    return accel.use_compiled(ctype, numpy_seconds(g))


def _conv_path(g: ConvGeometry, kind: str, compiled_: bool, col2im: bool,
               lay: PhaseLayout | None) -> Path:
    few = compute.few_channels(g.filter_in_depth)
    if kind == "forward":
        return (NUMBA_IM2COL if few else NUMBA_TILES) if compiled_ else (
            NUMPY_IM2COL if few else NUMPY_PER_TAP)
    if kind == "filter":
        return (NUMBA_IM2COL if few else NUMBA_TILES) if compiled_ else (
            NUMPY_IM2COL if few else NUMPY_PER_TAP)
    if compiled_ and (col2im if few else True):
        return NUMBA_COL2IM if few else NUMBA_TILES
    strategy = compute.input_strategy(lay or PhaseLayout.of(g), g.filter_in_depth)
    return PATHS[f"numpy {strategy}"]


def route(g: ConvGeometry, kind: str, compiled_: bool, exact: bool = False, col2im: bool = True,
          lay: PhaseLayout | None = None) -> tuple[Path, ...]:
    """The path of a ``kind`` call of ``g`` when it runs compiled (``compiled_``) or not, then
    the one it falls back to (either Winograd on a non-finite result). ``exact``: the NaN/Inf
    path's call (no Winograd); ``col2im``: the few-channel input gradient's result can be written in
    place (:func:`engine.kernels.tiled.col2im_in_place`)."""
    if empty(g):
        return (EMPTY,)
    if sparse.select(g) is not None:
        return (TAP_SPANS,)
    if g.depthwise:
        return (NUMBA if compiled_ else NUMPY_TILES,)
    rest = _conv_path(g, kind, compiled_, col2im, lay)
    if compiled_ and not exact and winograd.applies(g):
        return WINOGRAD, rest
    if compiled_ and not exact and kind == "input" and winograd_phases.applies(g):
        return WINOGRAD_PHASES, rest
    return (rest,)


def workspace_bytes(g: ConvGeometry, kind: str, ct: int) -> int:
    """The largest workspace of the paths a ``kind`` call of ``g`` may take (compiled or not,
    whatever is ready at call time), ``ct`` the compute itemsize."""
    paths = {p for c in (False, True) for p in route(g, kind, c)}
    return max(p.workspace(g, kind, ct) for p in paths)


def from_nhwc(y: np.ndarray, data_format: str, dtype: np.dtype) -> np.ndarray:
    """NHWC ``y`` as a C-contiguous array of ``dtype`` in ``data_format``. After a compiled
    call an NCHW result in the compute dtype is copied by the compiled layout copy
    (:mod:`engine.kernels._compiled.transpose`: both cores, 8x8 vector blocks; NumPy's strided
    copy runs on one core at a third of its speed), else by NumPy."""
    if data_format == "NCHW":
        last = path_record.last()
        path = PATHS.get(last) if last is not None else None
        if path is not None and path.compiled and y.dtype == dtype and y.flags.c_contiguous:
            from engine.kernels._compiled import transpose

            out = np.empty((y.shape[0], y.shape[3], y.shape[1], y.shape[2]), dtype)
            transpose.to_nchw(y, out)
            return out
        y = y.transpose(0, 3, 1, 2)
    return np.asarray(y.astype(dtype, order="C", copy=False), order="C")


def _record(path: Path) -> Path:
    path_record.record(path.name)
    return path


def _group_slices(g: ConvGeometry):
    """Channel slices ``(input, output)`` of each group."""
    q, o = g.filter_in_depth, g.filter_out // g.groups
    for k in range(g.groups):
        yield slice(k * q, (k + 1) * q), slice(k * o, (k + 1) * o)


def _winograd_ran(path: Path) -> None:
    """Record a Winograd path (its result was found finite already: no second scan when
    BLAS propagates NaN/Inf, see :func:`engine.kernels.gemm.propagates_nonfinite`)."""
    from engine.kernels import gemm

    _record(path)
    if gemm.propagates_nonfinite():
        path_record.vouch_finite()


#: A result buffer maker of the input gradients: ``out(zero)`` gives the result (in the op's
#: layout and dtype) and its NHWC view, zeroed when ``zero``.
ResultBuffer = Callable[[bool], tuple[np.ndarray, np.ndarray]]


def _numba() -> ModuleType:
    """The compiled depthwise kernels, once :func:`compiled` said a call runs them (so they
    loaded)."""
    module = accel.compiled()
    assert module is not None
    return module


def _tiled() -> ModuleType:
    """The compiled per-tap conv ops (:mod:`engine.kernels.tiled`, over
    :mod:`engine.kernels._compiled.conv_tiles`), loaded by the first call that runs them."""
    from engine.kernels import tiled

    return tiled


def _conv(kind: str, g: ConvGeometry, a: np.ndarray, b: np.ndarray, ctype: np.dtype,
          out: ResultBuffer | None = None) -> tuple[np.ndarray, bool]:
    """Forward (``a`` x, ``b`` w), filter (x, dy) or input gradient (dy, w) of a conv call
    (not depthwise, not empty) in ``ctype``: ``(result, final)``, ``final`` when the result is
    the input gradient's ``out`` buffer, else an NHWC array in ``ctype``."""
    if (sp := sparse.select(g)) is not None:
        _record(TAP_SPANS)
        op = {"forward": sparse.conv2d, "filter": sparse.conv2d_backprop_filter,
              "input": sparse.conv2d_backprop_input}[kind]
        return op(g, *sp, a, b, ctype), False
    on = compiled(g, ctype)
    first = route(g, kind, on, exact_required())[0]
    try_ = {"forward": winograd.try_conv2d, "filter": winograd.try_backprop_filter,
            "input": winograd.try_backprop_input}[kind]
    if (y := try_(g, a, b, ctype, first is WINOGRAD)) is not None:  # records winograd.used()
        _winograd_ran(WINOGRAD)
        return y, False
    if kind == "input" and (y := winograd_phases.try_backprop_input(
            g, a, b, ctype, first is WINOGRAD_PHASES)) is not None:  # records its used()
        _winograd_ran(WINOGRAD_PHASES)
        return y, False
    lay = PhaseLayout.of(g)
    if kind == "input":
        assert out is not None  # conv2d_backprop_input passes its buffer
        result, view = out(False)  # each group's call zeroes what it does not write
        col2im = on and _tiled().col2im_in_place(view[..., :g.filter_in_depth], ctype,
                                                 g.filter_in_depth)
        mod = _tiled() if _record(_conv_path(g, kind, on, col2im, lay)).compiled else compute
        finite = [mod.conv2d_backprop_input(lay, a[..., so], b[..., so], ctype, view[..., si],
                                            False) for si, so in _group_slices(g)]
        if mod is not compute and all(finite):  # every product computed, every row finite
            path_record.vouch_finite()
        return result, True
    mod = _tiled() if _record(_conv_path(g, kind, on, False, lay)).compiled else compute
    op = mod.conv2d if kind == "forward" else mod.conv2d_backprop_filter
    parts = [op(lay, a[..., si], b[..., so], ctype) for si, so in _group_slices(g)]
    return (parts[0] if len(parts) == 1 else np.concatenate(parts, axis=3)), False


def conv2d(g: ConvGeometry, x: np.ndarray, w: np.ndarray, ctype: np.dtype) -> np.ndarray:
    """Conv2D of NHWC ``x``: NHWC result in ``ctype`` (not empty)."""
    return _conv("forward", g, x, w, ctype)[0]


def conv2d_backprop_filter(g: ConvGeometry, x: np.ndarray, dy: np.ndarray,
                           ctype: np.dtype) -> np.ndarray:
    """Conv2DBackpropFilter of NHWC ``x`` and ``dy`` in ``ctype`` (not empty)."""
    return _conv("filter", g, x, dy, ctype)[0]


def conv2d_backprop_input(g: ConvGeometry, dy: np.ndarray, w: np.ndarray, ctype: np.dtype,
                          out: ResultBuffer) -> tuple[np.ndarray, bool]:
    """Conv2DBackpropInput of NHWC ``dy`` (not empty): ``(result, final)`` as :func:`_conv`."""
    return _conv("input", g, dy, w, ctype, out)


def depthwise_conv2d(g: ConvGeometry, x: np.ndarray, w: np.ndarray,
                     ctype: np.dtype) -> np.ndarray:
    """DepthwiseConv2dNative of NHWC ``x``: NHWC result in ``ctype`` (not empty)."""
    if (sp := sparse.select(g)) is not None:
        _record(TAP_SPANS)
        return sparse.depthwise_conv2d(g, *sp, x, w, ctype)
    if compiled(g, ctype):
        _record(NUMBA)  # before the call: the compiled kernel may vouch for its result
        return _numba().depthwise_conv2d(g, x, w, ctype, accel.CHUNK_BYTES)
    _record(NUMPY_TILES)
    return depthwise_tiles.depthwise_conv2d(PhaseLayout.of(g), x, w, ctype)


def depthwise_conv2d_backprop_filter(g: ConvGeometry, x: np.ndarray, dy: np.ndarray,
                                     ctype: np.dtype) -> np.ndarray:
    """DepthwiseConv2dNativeBackpropFilter of NHWC ``x`` and ``dy`` in ``ctype``."""
    if (sp := sparse.select(g)) is not None:
        _record(TAP_SPANS)
        return sparse.depthwise_conv2d_backprop_filter(g, *sp, x, dy, ctype)
    if compiled(g, ctype):
        _record(NUMBA)
        return _numba().depthwise_conv2d_backprop_filter(g, x, dy, ctype, accel.CHUNK_BYTES)
    _record(NUMPY_TILES)
    return depthwise_tiles.depthwise_conv2d_backprop_filter(PhaseLayout.of(g), x, dy, ctype)


def depthwise_conv2d_backprop_input(g: ConvGeometry, dy: np.ndarray, w: np.ndarray,
                                    ctype: np.dtype, out: ResultBuffer) -> tuple[np.ndarray, bool]:
    """DepthwiseConv2dNativeBackpropInput of NHWC ``dy``: ``(result, final)`` as
    :func:`_conv` (the tap-span path's result is NHWC in ``ctype``)."""
    if (sp := sparse.select(g)) is not None:
        _record(TAP_SPANS)
        return sparse.depthwise_conv2d_backprop_input(g, *sp, dy, w, ctype), False
    if compiled(g, ctype):
        _record(NUMBA)
        result, view = out(False)  # every element is written
        _numba().depthwise_conv2d_backprop_input(g, dy, w, ctype, view, accel.CHUNK_BYTES)
        return result, True
    _record(NUMPY_TILES)
    result, view = out(True)
    depthwise_tiles.depthwise_conv2d_backprop_input(PhaseLayout.of(g), dy, w, ctype, view)
    return result, True


_KERNELS: dict[tuple[str, bool], Callable[..., object]] = {
    ("forward", False): conv2d, ("filter", False): conv2d_backprop_filter,
    ("input", False): conv2d_backprop_input, ("forward", True): depthwise_conv2d,
    ("filter", True): depthwise_conv2d_backprop_filter,
    ("input", True): depthwise_conv2d_backprop_input,
}


def kernel(kind: str, depthwise: bool) -> Callable[..., object]:
    """The dispatch function of a ``kind`` op (:data:`KINDS`), depthwise or not: forward
    ``(g, x, w, ctype)``, filter gradient ``(g, x, dy, ctype)``, input gradient
    ``(g, dy, w, ctype, out)`` (NHWC arrays)."""
    return _KERNELS[kind, depthwise]
