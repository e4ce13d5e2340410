"""Element provenance: the terms of the sum that defines one output element of a conv op.

Every conv op is a bilinear form (:mod:`engine.kernels.nonfinite`): an output element is a sum of
products ``a[u] * b[v]`` of one element of each of the block's two array inputs. This module
lists those pairs for one output element, straight from the op definitions below, with the
geometry (output size, padding) from :mod:`engine.shapes.conv` / :mod:`engine.shapes.padding`.

Notation (layout-free; NCHW arrays are indexed in their own order N, C, H, W in every result):
``sr, sc`` strides, ``dr, dc`` dilations, ``pt, pl`` the padding before rows and columns
(SAME: TensorFlow's split, the odd pad after), ``Q`` the filter's in_channels, ``O`` its
out_channels, ``G = in_depth / Q`` groups with ``O / G`` output channels each, ``M`` the depthwise
channel multiplier, ``g(o) = o // (O / G)`` the group of output channel ``o``. Input row
``h = r*sr + i*dr - pt`` is what filter tap row ``i`` reads for output row ``r`` (columns alike);
a row outside ``[0, in_rows)`` is padding.

- Conv2D: ``output[n,r,c,o] = sum over i,j,q of input[n, h, w, g(o)*Q + q] * filter[i,j,q,o]``.
- DepthwiseConv2dNative: ``output[n,r,c,k*M+m] = sum over i,j of input[n,h,w,k] *
  filter[i,j,k,m]``.
- Conv2DBackpropFilter: ``dw[i,j,q,o] = sum over n,r,c of input[n, h, w, g(o)*Q + q] *
  out_backprop[n,r,c,o]``.
- DepthwiseConv2dNativeBackpropFilter: ``dw[i,j,k,m] = sum over n,r,c of input[n,h,w,k] *
  out_backprop[n,r,c,k*M+m]``.
- Conv2DBackpropInput: ``dx[n,h,w,g*Q+q] = sum over i,j and o of group g of
  filter[i,j,q,o] * out_backprop[n,r,c,o]`` over the taps with ``r = (h + pt - i*dr) / sr`` and
  ``c = (w + pl - j*dc) / sc`` whole numbers in ``[0, out_rows) x [0, out_cols)``.
- DepthwiseConv2dNativeBackpropInput: ``dx[n,h,w,k] = sum over i,j,m of filter[i,j,k,m] *
  out_backprop[n,r,c,k*M+m]``, ``r`` and ``c`` as above.

Padding terms contribute nothing (the NaN/Inf contract) and are counted, not listed:
``padding_terms`` is the number of product terms of the sum over taps whose input element would
be padding (Conv2D: one per such tap and input channel of the group; the filter gradients: one
per such (n, r, c)). The input-gradient ops only have terms at real input elements: 0.

Terms are enumerated with array operations (per spatial dimension the valid (tap, position)
pairs, then their product with the channel or batch range), never a loop over a tensor. Listing
them takes at most :data:`TERM_BYTES` per term; the count is known before anything that size is
allocated, so a caller can refuse an element whose list would not fit (``max_terms``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from engine.base.dtypes import dtype_name, float_array
from engine.base.errors import InvalidArgumentError
from engine.explain.element_index import (
    activation_indices,
    check_index,
    layout_free,
    op_geometry,
    result_shape,
)
from engine.shapes.conv import ConvGeometry
from engine.shapes.ops import CONV_OPS, ConvOp

#: The conv block types by type id: their rows of the op table (each names its tf.raw_ops op
#: ``name``, its ``kind``, ``depthwise`` and its two array ``operands``).
OPS: dict[str, ConvOp] = {op.block_type: op for op in CONV_OPS if op.rank == 2}

#: How a formula names the output of each kind of op.
OUTPUT_NAMES = {"forward": "output", "filter": "dw", "input": "dx"}

#: Bytes per term at the peak of :func:`explain_element` and the float64 sum after it: the two
#: (terms, 4) int64 index arrays and their values (72-80 bytes kept) plus the temporaries that
#: build them, with a margin.
TERM_BYTES = 128
#: Terms converted to Python floats at a time (the exact sum, the JSON of ``gradblocks explain``).
CHUNK_TERMS = 1 << 16


class TooManyTerms(InvalidArgumentError):
    """The element's sum has more terms than the caller allows; ``terms`` says how many."""

    def __init__(self, terms: int, max_terms: int):
        super().__init__(f"its sum has {terms} terms, more than the {max_terms} allowed",
                         "index")
        self.terms = terms


@dataclass(frozen=True)
class Factor:
    """One operand of every term: ``index[t]`` (in the array's own layout) and its value."""

    port: str
    index: np.ndarray  # (terms, 4) int64
    values: np.ndarray  # (terms,) in the array's dtype


@dataclass(frozen=True)
class Explanation:
    """The defining sum of ``output[index]`` of a ``type_id`` block.

    Term ``t`` is ``factors[0].values[t] * factors[1].values[t]``; ``formula`` is the sum with
    the actual indices and ``domain`` the ranges of its summation variables.
    """

    type_id: str
    index: tuple[int, ...]
    output_shape: tuple[int, ...]
    dtype: str
    factors: tuple[Factor, Factor]
    padding_terms: int
    formula: str
    domain: str

    @property
    def terms(self) -> int:
        return len(self.factors[0].values)

    @property
    def products(self) -> np.ndarray:
        """The products in float64 (exact for half types and float32)."""
        a, b = (f.values.astype(np.float64) for f in self.factors)
        with np.errstate(invalid="ignore", over="ignore"):
            return a * b

    @property
    def sum(self) -> float:
        """The float64 sum of the products: correctly rounded when they are all finite and it is
        within float64's range, else IEEE's (NaN, or an infinity)."""
        p = self.products
        if np.all(np.isfinite(p)):
            try:
                return math.fsum(itertools.chain.from_iterable(_chunks(p)))
            except OverflowError:  # a partial sum beyond float64: np.sum gives the infinity
                pass
        with np.errstate(invalid="ignore", over="ignore"):
            return float(np.sum(p))


def _chunks(values: np.ndarray) -> Iterator[list]:
    """``values`` (along its first axis) as Python lists of at most :data:`CHUNK_TERMS`."""
    for start in range(0, len(values), CHUNK_TERMS):
        yield values[start:start + CHUNK_TERMS].tolist()


def _grid(*sizes: int, max_terms: int | None = None) -> tuple[np.ndarray, ...]:
    """Flat C-order coordinates of every point of a ``sizes`` grid (one point per term):
    :class:`TooManyTerms` before anything is allocated when there are more than ``max_terms``."""
    terms = math.prod(sizes)
    if max_terms is not None and terms > max_terms:
        raise TooManyTerms(terms, max_terms)
    return tuple(a.ravel() for a in np.indices(sizes, dtype=np.int64))


def _taps_reading(pos: int, taps: int, stride: int, dil: int, pad: int, size: int):
    """Forward: taps ``t`` whose input position ``pos*stride + t*dil - pad`` is real, and those
    positions."""
    t = np.arange(taps, dtype=np.int64)
    x = pos * stride + t * dil - pad
    ok = (x >= 0) & (x < size)
    return t[ok], x[ok]


def _positions_reading(tap: int, count: int, stride: int, dil: int, pad: int, size: int):
    """Filter gradient: output positions ``r`` whose tap ``tap`` reads a real input position
    ``r*stride + tap*dil - pad``, and those positions."""
    r = np.arange(count, dtype=np.int64)
    x = r * stride + tap * dil - pad
    ok = (x >= 0) & (x < size)
    return r[ok], x[ok]


def _pairs_hitting(x: int, taps: int, stride: int, dil: int, pad: int, count: int):
    """Input gradient: taps ``t`` and output positions ``r`` with ``r*stride + t*dil - pad = x``."""
    t = np.arange(taps, dtype=np.int64)
    num = x + pad - t * dil
    ok = (num >= 0) & (num % stride == 0) & (num // stride < count)
    return t[ok], num[ok] // stride


def _lin(var: str, coef: int, const: int) -> str:
    """``coef*var + const`` as short text: ``r+1``, ``2*r-1``, ``i``, ``3``."""
    if coef == 0:
        return str(const)
    text = var if coef == 1 else f"-{var}" if coef == -1 else f"{coef}*{var}"
    return text if const == 0 else f"{text}{const:+d}"


def _back(const: int, var: str, coef: int, stride: int) -> str:
    """``(const - coef*var) / stride`` as short text: ``4-i``, ``(3-2*i)/2``."""
    term = var if coef == 1 else f"{coef}*{var}"
    text = f"{const}-{term}" if const else f"-{term}"
    return text if stride == 1 else f"({text})/{stride}"


def _fmt(name: str, parts: Sequence[object]) -> str:
    return f"{name}[{', '.join(str(p) for p in parts)}]"


def _act_text(name: str, n, h, w, ch, data_format: str) -> str:
    return _fmt(name, (n, h, w, ch) if data_format == "NHWC" else (n, ch, h, w))


def explain_element(type_id: str, attrs: Mapping[str, object],
                    inputs: Mapping[str, np.ndarray], index: Sequence[object],
                    max_terms: int | None = None) -> Explanation:
    """The terms of ``output[index]`` of a block of ``type_id`` (one of :data:`OPS`) with
    attributes ``attrs`` (the conv attributes, as the block has them) and inputs ``inputs``
    (every input port's array; the size vectors included).

    Raises :class:`InvalidArgumentError` for an unknown type, invalid inputs or attributes (as
    the kernel would) or an index that is not an element of the output; :class:`TooManyTerms`
    (before listing them) when the sum has more than ``max_terms`` terms.
    """
    form = OPS.get(type_id)
    if form is None:
        raise InvalidArgumentError(
            f"{type_id} is not a conv block: explain takes {', '.join(OPS)}", "type")
    arrays = {p: float_array(p, inputs[p]) for p in form.operands}
    g = op_geometry(form, attrs, inputs)
    idx = check_index(index, result_shape(form, g))
    a_port, b_port = form.operands
    a, b = arrays[a_port], arrays[b_port]
    if a.dtype != b.dtype:
        raise InvalidArgumentError(
            f"{b_port} dtype {dtype_name(b.dtype)} does not match {a_port} dtype "
            f"{dtype_name(a.dtype)}", b_port)
    build = {"forward": _forward, "filter": _filter_grad, "input": _input_grad}[form.kind]
    a_idx, b_idx, padding_terms, formula, domain = build(g, idx, form, max_terms)
    out_name = OUTPUT_NAMES[form.kind]
    factors = (Factor(a_port, a_idx, a[tuple(a_idx.T)]), Factor(b_port, b_idx, b[tuple(b_idx.T)]))
    return Explanation(type_id, idx, result_shape(form, g), dtype_name(a.dtype), factors,
                       padding_terms, f"{_fmt(out_name, idx).replace(' ', '')} = {formula}",
                       domain)


def _forward(g: ConvGeometry, idx: tuple[int, ...], form: ConvOp,
             max_terms: int | None = None):
    """Conv2D / depthwise: terms over taps (i, j) and, for Conv2D, the group's channels q."""
    fmt = g.data_format
    n, r, c, ch = layout_free(idx, fmt)
    ti, rows = _taps_reading(r, g.filter_rows, g.stride_rows, g.dilation_rows,
                             g.pad_top, g.in_rows)
    tj, cols = _taps_reading(c, g.filter_cols, g.stride_cols, g.dilation_cols,
                             g.pad_left, g.in_cols)
    row_t = _lin("i", g.dilation_rows, r * g.stride_rows - g.pad_top)
    col_t = _lin("j", g.dilation_cols, c * g.stride_cols - g.pad_left)
    padded_taps = g.filter_rows * g.filter_cols - len(ti) * len(tj)
    if form.depthwise:
        k, m = divmod(ch, g.filter_out)
        a, b = _grid(len(ti), len(tj), max_terms=max_terms)
        x_idx = activation_indices(n, rows[a], cols[b], k, fmt)
        w_idx = activation_indices(ti[a], tj[b], k, m, "NHWC")
        formula = (f"sum over i,j of {_act_text('input', n, row_t, col_t, k, fmt)} * "
                   f"{_fmt('filter', ('i', 'j', k, m))}")
        domain = f"i < {g.filter_rows}, j < {g.filter_cols}"
        return x_idx, w_idx, padded_taps, formula, domain
    q_in = g.filter_in_depth
    base = (ch // (g.filter_out // g.groups)) * q_in
    a, b, q = _grid(len(ti), len(tj), q_in, max_terms=max_terms)
    x_idx = activation_indices(n, rows[a], cols[b], base + q, fmt)
    w_idx = activation_indices(ti[a], tj[b], q, ch, "NHWC")
    formula = (f"sum over i,j,q of {_act_text('input', n, row_t, col_t, _lin('q', 1, base), fmt)}"
               f" * {_fmt('filter', ('i', 'j', 'q', ch))}")
    domain = f"i < {g.filter_rows}, j < {g.filter_cols}, q < {q_in}"
    return x_idx, w_idx, padded_taps * q_in, formula, domain


def _filter_grad(g: ConvGeometry, idx: tuple[int, ...], form: ConvOp,
                 max_terms: int | None = None):
    """The filter gradients: terms over batch n and output positions (r, c)."""
    fmt = g.data_format
    i, j, q, o = idx
    rs, rows = _positions_reading(i, g.out_rows, g.stride_rows, g.dilation_rows,
                                  g.pad_top, g.in_rows)
    cs, cols = _positions_reading(j, g.out_cols, g.stride_cols, g.dilation_cols,
                                  g.pad_left, g.in_cols)
    if form.depthwise:
        x_ch, dy_ch = q, q * g.filter_out + o
    else:
        x_ch, dy_ch = (o // (g.filter_out // g.groups)) * g.filter_in_depth + q, o
    nn, a, b = _grid(g.batch, len(rs), len(cs), max_terms=max_terms)
    x_idx = activation_indices(nn, rows[a], cols[b], x_ch, fmt)
    dy_idx = activation_indices(nn, rs[a], cs[b], dy_ch, fmt)
    padding_terms = g.batch * (g.out_rows * g.out_cols - len(rs) * len(cs))
    row_t = _lin("r", g.stride_rows, i * g.dilation_rows - g.pad_top)
    col_t = _lin("c", g.stride_cols, j * g.dilation_cols - g.pad_left)
    formula = (f"sum over n,r,c of {_act_text('input', 'n', row_t, col_t, x_ch, fmt)} * "
               f"{_act_text('out_backprop', 'n', 'r', 'c', dy_ch, fmt)}")
    domain = f"n < {g.batch}, r < {g.out_rows}, c < {g.out_cols}"
    return x_idx, dy_idx, padding_terms, formula, domain


def _input_grad(g: ConvGeometry, idx: tuple[int, ...], form: ConvOp,
                max_terms: int | None = None):
    """The input gradients: terms over the taps (i, j) that some output position (r, c) pairs
    with this input element, and the output channels this input channel feeds."""
    fmt = g.data_format
    n, h, w, ch = layout_free(idx, fmt)
    ti, rs = _pairs_hitting(h, g.filter_rows, g.stride_rows, g.dilation_rows, g.pad_top,
                            g.out_rows)
    tj, cs = _pairs_hitting(w, g.filter_cols, g.stride_cols, g.dilation_cols, g.pad_left,
                            g.out_cols)
    row_t = _back(h + g.pad_top, "i", g.dilation_rows, g.stride_rows)
    col_t = _back(w + g.pad_left, "j", g.dilation_cols, g.stride_cols)
    if form.depthwise:
        m_count, q, var = g.filter_out, ch, "m"
        first = ch * g.filter_out
        chan_domain = f"m < {m_count}"
    else:
        m_count = g.filter_out // g.groups
        q, first, var = ch % g.filter_in_depth, (ch // g.filter_in_depth) * m_count, "o"
        chan_domain = f"{first} <= o < {first + m_count}" if first else f"o < {m_count}"
    a, b, m = _grid(len(ti), len(tj), m_count, max_terms=max_terms)
    if form.depthwise:
        w_idx = activation_indices(ti[a], tj[b], q, m, "NHWC")
        w_text = _fmt("filter", ("i", "j", q, "m"))
    else:
        w_idx = activation_indices(ti[a], tj[b], q, first + m, "NHWC")
        w_text = _fmt("filter", ("i", "j", q, "o"))
    dy_idx = activation_indices(n, rs[a], cs[b], first + m, fmt)
    dy_ch = _lin("m", 1, first) if form.depthwise else "o"
    formula = (f"sum over i,j,{var} of {w_text} * "
               f"{_act_text('out_backprop', n, row_t, col_t, dy_ch, fmt)}")
    domain = (f"i < {g.filter_rows}, j < {g.filter_cols}, {chan_domain}, where {row_t} is a "
              f"whole number in [0, {g.out_rows}) and {col_t} one in [0, {g.out_cols})")
    return w_idx, dy_idx, 0, formula, domain
