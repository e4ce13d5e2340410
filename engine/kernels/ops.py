"""The six TensorFlow conv ops, exact to ``tf.raw_ops`` semantics, in vectorized NumPy.

Argument names, order and meaning are TensorFlow's. With ``in_pad`` the input zero-padded per
``padding`` (:mod:`engine.shapes.padding`), strides ``s``, dilations ``d`` and NHWC indices
(NCHW arrays are read and written in their own layout)::

    Conv2D:   out[n,r,c,o]  = sum_{i,j,q} in_pad[n, r*sr + i*dr, c*sc + j*dc, g(o)*Q + q] w[i,j,q,o]
    Depthwise: out[n,r,c,k*M+m] = sum_{i,j} in_pad[n, r*sr + i*dr, c*sc + j*dc, k] w[i,j,k,m]

with ``Q`` the filter's in_channels and ``g(o)`` the group of output channel ``o``
(``groups = in_depth / Q``). The backprop ops are the adjoints: ``*_backprop_filter`` returns
``d<out, dy>/dw`` and ``*_backprop_input`` returns ``d<out, dy>/d input``.

dtypes: float16, bfloat16, float32, float64; the result has the input's dtype and half types
accumulate in float32. Every invalid call raises :class:`~engine.base.errors.InvalidArgumentError`
(see :mod:`engine.shapes.conv`). ``use_cudnn_on_gpu`` is accepted and has no effect.

NaN and Inf: padding contributes nothing. An output element is NaN/Inf exactly when a term of
its defining sum over real (unpadded) elements is (:mod:`engine.kernels.nonfinite`).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar, cast

import numpy as np

from engine.base.dtypes import compute_dtype, float_array, same_dtype
from engine.base.errors import InvalidArgumentError
from engine.kernels import path_record
from engine.kernels.nonfinite import all_finite, nonfinite_safe
from engine.shapes.conv import RULES, ConvGeometry
from engine.shapes.memo import memoized
from engine.shapes.ops import op_named

IntSeq = Sequence[int] | np.ndarray

#: The compute path of this thread's last kernel call, e.g. ``"numpy gather"``.
last_path = path_record.last

__all__ = [
    "conv2d",
    "conv2d_backprop_filter",
    "conv2d_backprop_input",
    "depthwise_conv2d_native",
    "depthwise_conv2d_native_backprop_filter",
    "depthwise_conv2d_native_backprop_input",
    "last_path",
]


F = TypeVar("F", bound=Callable[..., np.ndarray])

def memory_guard(kernel: F) -> F:
    """A result or workspace too large for this machine is an :class:`InvalidArgumentError`
    saying how large (NumPy's MemoryError, or its "array is too big" ValueError for sizes
    beyond the address space), never a bare NumPy error."""
    @functools.wraps(kernel)
    def guarded(*args, **kwargs):
        path_record.record("")  # engine.kernels.dispatch records the path it takes
        try:
            return kernel(*args, **kwargs)
        except MemoryError as err:
            raise InvalidArgumentError(f"not enough memory for {kernel.__name__}: {err}") from None
        except ValueError as err:
            too_big = ("array is too big", "Maximum allowed dimension exceeded")
            if isinstance(err, InvalidArgumentError) or not any(t in str(err) for t in too_big):
                raise
            raise InvalidArgumentError(
                f"{kernel.__name__}: the result or its workspace is larger than this machine "
                f"can address ({err})") from None
    return guarded  # type: ignore[return-value]


def vouching_guess(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether this call will probably vouch for a finite result (see
    :func:`vouch_finite_result`), so :func:`~engine.kernels.nonfinite.nonfinite_safe` runs it
    before (and usually instead of) scanning both inputs for NaN/Inf: a scan costs about as much as
    a depthwise kernel, and 5-25% of a conv gradient."""
    from engine.kernels import accel, gemm

    return gemm.propagates_nonfinite() or (  # the work is not known yet: a guess
        a.dtype == b.dtype and accel.may_run_compiled())


def vouch_finite_result(kernel: F) -> F:
    """Vouch for a finite result (:func:`engine.kernels.path_record.vouch_finite`). Every path of
    these kernels computes each term as an explicit product added into its sum: NumPy's loops, the
    compiled loops, Winograd's transforms (a non-finite tile element reaches every output it is
    a term of) and BLAS, when :func:`engine.kernels.gemm.propagates_nonfinite` (the multiplications
    by padding zeros the layouts add can only turn a result non-finite, never finite). The
    compiled depthwise loops vouch by themselves while computing (no extra pass)."""
    @functools.wraps(kernel)
    def vouching(*args, **kwargs):
        from engine.kernels import dispatch, gemm

        out = kernel(*args, **kwargs)
        decided = path_record.vouched_finite() or path_record.last() == dispatch.NUMBA.name
        if (not decided and gemm.propagates_nonfinite()
                and path_record.result_scan_pays(out.size) and all_finite(out)):
            path_record.vouch_finite()
        return out
    return vouching  # type: ignore[return-value]


def _nhwc(a: np.ndarray, data_format: str) -> np.ndarray:
    """A view of ``a`` in NHWC order."""
    return a if data_format == "NHWC" else a.transpose(0, 2, 3, 1)


def _empty(g: ConvGeometry) -> bool:
    """True when the sum over output positions has no terms (or no channels to sum into);
    the call then runs no kernel (:func:`last_path` says ``empty``)."""
    from engine.kernels import dispatch

    if dispatch.empty(g):
        path_record.record(dispatch.EMPTY.name)
        return True
    return False


def _input_grad_buffer(g: ConvGeometry, dtype: np.dtype):
    """The input gradient's result maker for the dispatch: ``out(zero)`` gives the result in
    ``g.data_format`` and ``dtype`` and its NHWC view, zeroed unless the kernel writes every
    element itself (``zero=False``)."""
    from engine.kernels.buffers import zeroed

    def out(zero: bool) -> tuple[np.ndarray, np.ndarray]:
        res = zeroed(g.input_shape, dtype) if zero else np.empty(g.input_shape, dtype)
        return res, _nhwc(res, g.data_format)
    return out


def _input_result(done: tuple[np.ndarray, bool], g: ConvGeometry, dtype: np.dtype) -> np.ndarray:
    """The dispatch's input gradient as the op's result (NHWC in the compute dtype unless
    already the result buffer)."""
    from engine.kernels import dispatch

    dx, final = done
    return dx if final else dispatch.from_nhwc(dx, g.data_format, dtype)


# The signatures, TensorFlow's (names, order, defaults): one per kind of op, with
# ``use_cudnn_on_gpu`` last where TensorFlow's op takes it (:attr:`ConvOp.cudnn`).

class Forward(Protocol):
    def __call__(self, input: np.ndarray, filter: np.ndarray, strides: IntSeq, padding: str,
                 explicit_paddings: IntSeq = (), data_format: str = "NHWC",
                 dilations: IntSeq = (1, 1, 1, 1)) -> np.ndarray: ...


class ForwardCudnn(Protocol):
    def __call__(self, input: np.ndarray, filter: np.ndarray, strides: IntSeq, padding: str,
                 explicit_paddings: IntSeq = (), data_format: str = "NHWC",
                 dilations: IntSeq = (1, 1, 1, 1), use_cudnn_on_gpu: bool = True
                 ) -> np.ndarray: ...


class FilterGrad(Protocol):
    def __call__(self, input: np.ndarray, filter_sizes: IntSeq, out_backprop: np.ndarray,
                 strides: IntSeq, padding: str, explicit_paddings: IntSeq = (),
                 data_format: str = "NHWC", dilations: IntSeq = (1, 1, 1, 1)) -> np.ndarray: ...


class FilterGradCudnn(Protocol):
    def __call__(self, input: np.ndarray, filter_sizes: IntSeq, out_backprop: np.ndarray,
                 strides: IntSeq, padding: str, explicit_paddings: IntSeq = (),
                 data_format: str = "NHWC", dilations: IntSeq = (1, 1, 1, 1),
                 use_cudnn_on_gpu: bool = True) -> np.ndarray: ...


class InputGrad(Protocol):
    def __call__(self, input_sizes: IntSeq, filter: np.ndarray, out_backprop: np.ndarray,
                 strides: IntSeq, padding: str, explicit_paddings: IntSeq = (),
                 data_format: str = "NHWC", dilations: IntSeq = (1, 1, 1, 1)) -> np.ndarray: ...


class InputGradCudnn(Protocol):
    def __call__(self, input_sizes: IntSeq, filter: np.ndarray, out_backprop: np.ndarray,
                 strides: IntSeq, padding: str, explicit_paddings: IntSeq = (),
                 data_format: str = "NHWC", dilations: IntSeq = (1, 1, 1, 1),
                 use_cudnn_on_gpu: bool = True) -> np.ndarray: ...




def _finish(kind: str, run: Callable, g: ConvGeometry, a: np.ndarray, b: np.ndarray,
            dtype: np.dtype) -> np.ndarray:
    """The dispatch ``run`` of a ``kind`` call on its operands ``a``, ``b`` (in argument
    order), as the op's result in ``g.data_format`` and ``dtype``."""
    from engine.kernels import dispatch

    ctype = compute_dtype(dtype)
    if kind == "forward":  # a input, b filter
        return dispatch.from_nhwc(run(g, _nhwc(a, g.data_format), b, ctype), g.data_format,
                                  dtype)
    if kind == "filter":  # a input, b out_backprop
        dw = run(g, _nhwc(a, g.data_format), _nhwc(b, g.data_format), ctype)
        return dw.astype(dtype, copy=False)
    # a filter, b out_backprop; no copy for NHWC in the compute dtype
    done = run(g, _nhwc(b, g.data_format), a, ctype, _input_grad_buffer(g, dtype))
    return _input_result(done, g, dtype)


def _conv_op(name: str, shape: type, doc: str) -> Any:
    """The kernel of the op table's row ``name`` (:data:`engine.shapes.ops.CONV_OPS`) with the
    signature of ``shape.__call__`` (whose tensor arguments must be the row's ports, and which
    takes ``use_cudnn_on_gpu`` exactly when the row says) and docstring ``doc``: array operands
    checked and of one dtype, the geometry checked, an empty call answered with zeros, else the
    dispatch's result; under the memory guard and the NaN/Inf contract."""
    op = op_named(name)
    params = list(inspect.signature(shape.__call__).parameters.values())[1:]  # no self
    names = tuple(p.name for p in params)
    if names[:len(op.ports)] != op.ports or ("use_cudnn_on_gpu" in names) != op.cudnn:
        raise TypeError(f"{shape.__name__} is not the signature of {name}: {names}")
    signature = inspect.Signature(params, return_annotation="np.ndarray")
    attrs = names[len(op.ports):len(op.ports) + 5]  # strides ... dilations, not use_cudnn_on_gpu
    a_name, b_name = op.operands
    #: the 2-D rule of the row's kind (its arguments: the op's tensor arguments in order, an
    #: array operand by its shape, a size argument as given; then the attributes)
    geometry = cast(Callable[..., ConvGeometry], memoized(RULES[2][op.kind]))

    def kernel(*args: object, **kwargs: object) -> np.ndarray:
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError as err:  # a wrong call, named as Python names it
            raise TypeError(f"{op.kernel}() {err}") from None
        bound.apply_defaults()
        given = bound.arguments
        a, b = float_array(a_name, given[a_name]), float_array(b_name, given[b_name])
        dtype = same_dtype(**{a_name: a, b_name: b})
        operands = {a_name: a, b_name: b}
        g = geometry(*(operands[p].shape if p in operands else given[p] for p in op.ports),
                     *(given[p] for p in attrs), depthwise=op.depthwise)
        if _empty(g):
            return np.zeros(getattr(g, f"{op.result}_shape"), dtype)
        from engine.kernels import dispatch  # the paths load on the first call

        return _finish(op.kind, dispatch.kernel(op.kind, op.depthwise), g, a, b, dtype)

    kernel.__name__ = kernel.__qualname__ = op.kernel
    kernel.__doc__ = doc
    kernel.__module__ = __name__
    kernel.__signature__ = signature  # type: ignore[attr-defined]
    safe = nonfinite_safe(a_name, b_name, vouching=vouching_guess)(vouch_finite_result(kernel))
    return memory_guard(safe)  # typed by the name's annotation: ``shape``


_DEPTHWISE_DILATIONS = """
    Dilations are honoured (TensorFlow's CPU kernel ignores them; this follows the math).
    """

conv2d: ForwardCudnn = _conv_op("Conv2D", ForwardCudnn, """tf.raw_ops.Conv2D: ``out[n,r,c,o] = sum \
in_pad[n, r*sr+i*dr, c*sc+j*dc, q] w[i,j,q,o]``.""")
conv2d_backprop_filter: FilterGradCudnn = _conv_op("Conv2DBackpropFilter", FilterGradCudnn, """\
tf.raw_ops.Conv2DBackpropFilter: ``dw[i,j,q,o] = sum_{n,r,c} in_pad[n, r*sr+i*dr,
    c*sc+j*dc, g(o)*Q+q] * dy[n,r,c,o]``, shaped ``filter_sizes``.""")
conv2d_backprop_input: InputGradCudnn = _conv_op("Conv2DBackpropInput", InputGradCudnn, """\
tf.raw_ops.Conv2DBackpropInput: ``dx[n,h,v,g*Q+q] = sum over (r,i) with
    r*sr+i*dr-pad_top = h and (c,j) with c*sc+j*dc-pad_left = v of
    sum_o dy[n,r,c,o] w[i,j,q,o]`` (``o`` in group ``g``), shaped ``input_sizes``.""")
depthwise_conv2d_native: Forward = _conv_op("DepthwiseConv2dNative", Forward, """\
tf.raw_ops.DepthwiseConv2dNative: ``out[n,r,c,k*M+m] = sum_{i,j} in_pad[n, r*sr+i*dr,
    c*sc+j*dc, k] * w[i,j,k,m]``.""")
depthwise_conv2d_native_backprop_filter: FilterGrad = _conv_op(
    "DepthwiseConv2dNativeBackpropFilter", FilterGrad, """\
tf.raw_ops.DepthwiseConv2dNativeBackpropFilter: ``dw[i,j,k,m] = sum_{n,r,c}
    in_pad[n, r*sr+i*dr, c*sc+j*dc, k] * dy[n,r,c,k*M+m]``, shaped ``filter_sizes``.
""" + _DEPTHWISE_DILATIONS)
depthwise_conv2d_native_backprop_input: InputGrad = _conv_op(
    "DepthwiseConv2dNativeBackpropInput", InputGrad, """\
tf.raw_ops.DepthwiseConv2dNativeBackpropInput: the adjoint of
    :func:`depthwise_conv2d_native` in its input, shaped ``input_sizes``.
""" + _DEPTHWISE_DILATIONS)
