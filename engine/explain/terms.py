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

The 3-D ops (Conv3D and its gradients) are the same sums over one more spatial dimension, the
planes: depth tap ``a``, output plane ``p``, input plane ``d = p*sp + a*dp - pf`` (``pf`` the
padding in front), indices of five entries in the tensors' own layout (NDHWC or NCDHW, the filter
``[a, i, j, q, o]``), the formulas naming the variables in that order:

- Conv3D: ``output[n,p,r,c,o] = sum over a,i,j,q of input[n, d, h, w, g(o)*Q + q] *
  filter[a,i,j,q,o]``.
- Conv3DBackpropFilterV2: ``dw[a,i,j,q,o] = sum over n,p,r,c of input[n, d, h, w, g(o)*Q + q]
  * out_backprop[n,p,r,c,o]``.
- Conv3DBackpropInputV2: ``dx[n,d,h,w,g*Q+q] = sum over a,i,j and o of group g of
  filter[a,i,j,q,o] * out_backprop[n,p,r,c,o]`` over the taps whose ``p``, ``r`` and ``c`` are
  whole numbers in range.

One enumeration serves every rank: per spatial dimension the valid (tap, position) pairs, then
their product (:func:`_dims` gives each dimension's taps, stride, dilation and padding).

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
    filter_indices,
    layout_free,
    op_geometry,
    result_shape,
)
from engine.shapes.conv import ConvGeometryNd, channels_last
from engine.shapes.ops import CONV_OPS, ConvOp

#: The conv block types by type id: their rows of the op table (each names its tf.raw_ops op
#: ``name``, its ``kind``, ``depthwise`` and its two array ``operands``).
OPS: dict[str, ConvOp] = {op.block_type: op for op in CONV_OPS}

#: The names of the filter taps and of the output positions per number of spatial dimensions
#: (planes, rows, columns).
TAP_VARS: dict[int, tuple[str, ...]] = {2: ("i", "j"), 3: ("a", "i", "j")}
OUT_VARS: dict[int, tuple[str, ...]] = {2: ("r", "c"), 3: ("p", "r", "c")}

#: How a formula names the output of each kind of op.
OUTPUT_NAMES = {"forward": "output", "filter": "dw", "input": "dx"}

#: Bytes per term at the peak of :func:`explain_element` and the float64 sum after it: the two
#: (terms, 4) int64 index arrays and their values (72-80 bytes kept) plus the temporaries that
#: build them, with a margin.
TERM_BYTES = 128
#: What each further spatial dimension adds per term (one more int64 in each index array, in the
#: grid and in the temporaries, with a margin): :func:`term_bytes`.
TERM_BYTES_PER_DIM = 48


def term_bytes(rank: int) -> int:
    """Bytes per term of an op with ``rank`` spatial dimensions (:data:`TERM_BYTES` for 2)."""
    return TERM_BYTES + TERM_BYTES_PER_DIM * (rank - 2)

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
    index: np.ndarray  # (terms, rank + 2) int64
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


def _act_text(name: str, n, spatial: Sequence[object], ch, data_format: str) -> str:
    return _fmt(name, (n, *spatial, ch) if channels_last(data_format) else (n, ch, *spatial))


def _pads(g: ConvGeometryNd) -> tuple[int, ...]:
    """The padding before each spatial dimension."""
    return tuple(before for before, _ in g.pads)


def _dims(g: ConvGeometryNd, *fields: Sequence[int]) -> Iterator[tuple[int, ...]]:
    """Per spatial dimension: filter taps, stride, dilation, padding before, then ``fields``."""
    return zip(g.filter_spatial, g.strides, g.dilations, _pads(g), *fields, strict=True)


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


def _forward(g: ConvGeometryNd, idx: tuple[int, ...], form: ConvOp,
             max_terms: int | None = None):
    """Conv2D / Conv3D / depthwise: terms over the taps and, unless depthwise, the group's
    channels q."""
    fmt, taps = g.data_format, TAP_VARS[g.rank]
    n, pos, ch = layout_free(idx, fmt)
    hit = [_taps_reading(p, k, s, d, pad, size)
           for k, s, d, pad, p, size in _dims(g, pos, g.in_spatial)]
    texts = [_lin(v, d, p * s - pad) for v, (_k, s, d, pad, p) in zip(taps, _dims(g, pos))]
    padded_taps = math.prod(g.filter_spatial) - math.prod(len(t) for t, _ in hit)
    tap_domain = ", ".join(f"{v} < {k}" for v, k in zip(taps, g.filter_spatial, strict=True))
    if form.depthwise:
        k, m = divmod(ch, g.filter_out)
        taps_grid = _grid(*(len(t) for t, _ in hit), max_terms=max_terms)
        x_idx = activation_indices(n, [x[a] for (_, x), a in zip(hit, taps_grid)], k, fmt)
        w_idx = filter_indices([t[a] for (t, _), a in zip(hit, taps_grid)], k, m)
        formula = (f"sum over {','.join(taps)} of {_act_text('input', n, texts, k, fmt)} * "
                   f"{_fmt('filter', (*taps, k, m))}")
        return x_idx, w_idx, padded_taps, formula, tap_domain
    q_in = g.filter_in_depth
    base = (ch // (g.filter_out // g.groups)) * q_in
    *grid, q = _grid(*(len(t) for t, _ in hit), q_in, max_terms=max_terms)
    x_idx = activation_indices(n, [x[a] for (_, x), a in zip(hit, grid)], base + q, fmt)
    w_idx = filter_indices([t[a] for (t, _), a in zip(hit, grid)], q, ch)
    formula = (f"sum over {','.join((*taps, 'q'))} of "
               f"{_act_text('input', n, texts, _lin('q', 1, base), fmt)}"
               f" * {_fmt('filter', (*taps, 'q', ch))}")
    return x_idx, w_idx, padded_taps * q_in, formula, f"{tap_domain}, q < {q_in}"


def _filter_grad(g: ConvGeometryNd, idx: tuple[int, ...], form: ConvOp,
                 max_terms: int | None = None):
    """The filter gradients: terms over batch n and the output positions."""
    fmt, outs = g.data_format, OUT_VARS[g.rank]
    *tap, q, o = idx
    hit = [_positions_reading(t, count, s, d, pad, size)
           for _k, s, d, pad, t, count, size in _dims(g, tap, g.out_spatial, g.in_spatial)]
    if form.depthwise:
        x_ch, dy_ch = q, q * g.filter_out + o
    else:
        x_ch, dy_ch = (o // (g.filter_out // g.groups)) * g.filter_in_depth + q, o
    nn, *grid = _grid(g.batch, *(len(r) for r, _ in hit), max_terms=max_terms)
    x_idx = activation_indices(nn, [x[a] for (_, x), a in zip(hit, grid)], x_ch, fmt)
    dy_idx = activation_indices(nn, [r[a] for (r, _), a in zip(hit, grid)], dy_ch, fmt)
    padding_terms = g.batch * (math.prod(g.out_spatial) - math.prod(len(r) for r, _ in hit))
    texts = [_lin(v, s, t * d - pad) for v, (_k, s, d, pad, t) in zip(outs, _dims(g, tap))]
    formula = (f"sum over {','.join(('n', *outs))} of "
               f"{_act_text('input', 'n', texts, x_ch, fmt)} * "
               f"{_act_text('out_backprop', 'n', outs, dy_ch, fmt)}")
    domain = ", ".join(f"{v} < {c}" for v, c in
                       zip(("n", *outs), (g.batch, *g.out_spatial), strict=True))
    return x_idx, dy_idx, padding_terms, formula, domain


def _input_grad(g: ConvGeometryNd, idx: tuple[int, ...], form: ConvOp,
                max_terms: int | None = None):
    """The input gradients: terms over the taps that some output position pairs with this
    input element, and the output channels this input channel feeds."""
    fmt, taps = g.data_format, TAP_VARS[g.rank]
    n, pos, ch = layout_free(idx, fmt)
    hit = [_pairs_hitting(x, k, s, d, pad, count)
           for k, s, d, pad, x, count in _dims(g, pos, g.out_spatial)]
    texts = [_back(x + pad, v, d, s) for v, (_k, s, d, pad, x) in zip(taps, _dims(g, pos))]
    if form.depthwise:
        m_count, q, var = g.filter_out, ch, "m"
        first = ch * g.filter_out
        chan_domain = f"m < {m_count}"
    else:
        m_count = g.filter_out // g.groups
        q, first, var = ch % g.filter_in_depth, (ch // g.filter_in_depth) * m_count, "o"
        chan_domain = f"{first} <= o < {first + m_count}" if first else f"o < {m_count}"
    *grid, m = _grid(*(len(t) for t, _ in hit), m_count, max_terms=max_terms)
    w_idx = filter_indices([t[a] for (t, _), a in zip(hit, grid)], q,
                           m if form.depthwise else first + m)
    w_text = _fmt("filter", (*taps, q, var))
    dy_idx = activation_indices(n, [r[a] for (_, r), a in zip(hit, grid)], first + m, fmt)
    dy_ch = _lin("m", 1, first) if form.depthwise else "o"
    formula = (f"sum over {','.join((*taps, var))} of {w_text} * "
               f"{_act_text('out_backprop', n, texts, dy_ch, fmt)}")
    wholes = [f"{t} is a whole number in [0, {g.out_spatial[0]})" if d == 0 else
              f"{t} one in [0, {g.out_spatial[d]})" for d, t in enumerate(texts)]
    tap_domain = ", ".join(f"{v} < {k}" for v, k in zip(taps, g.filter_spatial, strict=True))
    domain = (f"{tap_domain}, {chan_domain}, where {', '.join(wholes[:-1])} and "
              f"{wholes[-1]}")
    return w_idx, dy_idx, 0, formula, domain
