"""A stand-in for the few PyTorch calls the exported ``--to pytorch`` scripts make, for running
those scripts where torch cannot be installed (tests/test_export_conv3d.py puts
``tests/fake_torch`` first on the script's PYTHONPATH). It is NOT PyTorch: it follows PyTorch's
documented semantics of these calls, computed with JAX:

- ``torch.nn.functional.conv2d`` / ``conv3d``: cross-correlation of a channels-first input
  (NCHW, NCDHW) with an OIHW (OIDHW) weight, ``stride``, ``dilation``, ``groups``, zero
  padding (the scripts pad with ``F.pad``); input and weight must have the same dtype;
- ``F.pad(x, pad)``: ``pad`` in pairs from the last dimension backwards, zeros;
- ``Tensor.permute``, ``reshape``, ``contiguous``, ``to``, ``detach``, ``float``, ``numpy``,
  ``shape``, ``dtype``; ``torch.from_numpy``, ``torch.zeros(..., requires_grad=True)``;
- ``torch.autograd.grad(output, leaf, grad_output)``: the vector-Jacobian product, by
  ``jax.vjp`` of the function from the leaf to the output, recorded as the ops ran.

What it checks is the scripts' own glue (layouts, weight permutation, padding order, groups,
depthwise reshapes), not PyTorch's kernels.
"""

from __future__ import annotations

from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)  # float64 stays float64

float16, bfloat16, float32, float64 = (jnp.dtype(n) for n in
                                       ("float16", "bfloat16", "float32", "float64"))


class Tensor:
    """A JAX array and, when it depends on a leaf made with ``requires_grad``, the function
    from that leaf's value to this value."""

    def __init__(self, value, leaf: Tensor | None = None, fn=None):
        self.value, self.leaf, self.fn = value, leaf, fn

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.value.shape)

    @property
    def dtype(self):
        return self.value.dtype

    def to(self, dtype) -> Tensor:
        return apply(lambda v: v.astype(dtype), self)

    def permute(self, *dims: int) -> Tensor:
        if sorted(dims) != list(range(self.value.ndim)):
            raise RuntimeError(f"permute: dims {dims} for a {self.value.ndim}-D tensor")
        return apply(lambda v: jnp.transpose(v, dims), self)

    def reshape(self, *shape: int) -> Tensor:
        return apply(lambda v: v.reshape(shape), self)

    def contiguous(self) -> Tensor:
        return self

    def __getitem__(self, key) -> Tensor:
        """Basic slicing (slices per dimension), as torch's."""
        if not all(isinstance(k, slice) for k in (key if isinstance(key, tuple) else (key,))):
            raise TypeError(f"the stand-in torch slices only, got {key!r}")
        return apply(lambda v: v[key], self)

    def detach(self) -> Tensor:
        return Tensor(self.value)

    def float(self) -> Tensor:
        return self.to(float32)

    def numpy(self) -> np.ndarray:
        if self.leaf is not None and self.leaf is not self:
            raise RuntimeError("Can't call numpy() on Tensor that requires grad")
        return np.asarray(self.value)


def apply(f, *args) -> Tensor:
    """``f`` of the tensors' values, recording how the result depends on their leaf."""
    leaves = {id(t.leaf): t.leaf for t in args if t.leaf is not None}
    if len(leaves) > 1:
        raise NotImplementedError("the fake records one leaf per computation")
    value = f(*(t.value for t in args))
    if not leaves:
        return Tensor(value)
    leaf = next(iter(leaves.values()))
    return Tensor(value, leaf, lambda v: f(*(t.fn(v) if t.leaf is leaf else t.value
                                             for t in args)))


def from_numpy(a: np.ndarray) -> Tensor:
    return Tensor(jnp.asarray(a))


def zeros(shape, dtype=float32, requires_grad: bool = False) -> Tensor:
    t = Tensor(jnp.zeros(tuple(shape), dtype))
    if requires_grad:
        t.leaf, t.fn = t, (lambda v: v)
    return t


def _grad(output: Tensor, inputs: Tensor, grad_outputs: Tensor) -> tuple[Tensor]:
    if output.leaf is not inputs:
        raise RuntimeError("One of the differentiated Tensors appears to not have been used")
    if grad_outputs.shape != output.shape or grad_outputs.dtype != output.dtype:
        raise RuntimeError(f"Mismatch in shape or dtype: grad_output {grad_outputs.shape} "
                           f"{grad_outputs.dtype}, output {output.shape} {output.dtype}")
    _, vjp = jax.vjp(output.fn, inputs.value)
    return (Tensor(vjp(grad_outputs.value)[0]),)


autograd = SimpleNamespace(grad=_grad)


def pad(x: Tensor, amounts) -> Tensor:
    """``F.pad``: pairs (before, after) from the last dimension backwards, zeros."""
    pairs = [(0, 0)] * x.value.ndim
    for i in range(len(amounts) // 2):
        pairs[x.value.ndim - 1 - i] = (amounts[2 * i], amounts[2 * i + 1])
    return apply(lambda v: jnp.pad(v, pairs), x)


def _conv(rank: int):
    layout = ("NCHW", "OIHW", "NCHW") if rank == 2 else ("NCDHW", "OIDHW", "NCDHW")

    def conv(input: Tensor, weight: Tensor, bias=None, stride=1, padding=0, dilation=1,
             groups: int = 1) -> Tensor:
        if bias is not None or padding != 0:
            raise NotImplementedError("the scripts pass no bias and pad with F.pad")
        if input.value.ndim != rank + 2 or weight.value.ndim != rank + 2:
            raise RuntimeError(f"conv{rank}d: expected {rank + 2}-D input and weight")
        if input.dtype != weight.dtype:
            raise RuntimeError(f"Input type ({input.dtype}) and weight type ({weight.dtype}) "
                               "should be the same")
        if input.shape[1] != weight.shape[1] * groups or weight.shape[0] % groups:
            raise RuntimeError(f"conv{rank}d: weight {weight.shape}, groups {groups} and "
                               f"input {input.shape} do not fit")
        each = (lambda v: (v,) * rank if isinstance(v, int) else tuple(v))
        return apply(lambda x, w: jax.lax.conv_general_dilated(
            x, w, window_strides=each(stride), padding=[(0, 0)] * rank,
            rhs_dilation=each(dilation), dimension_numbers=layout, feature_group_count=groups,
            precision=jax.lax.Precision.HIGHEST), input, weight)

    return conv


conv2d, conv3d = _conv(2), _conv(3)
