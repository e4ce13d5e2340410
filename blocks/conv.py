"""The convolution blocks, one per row of the op table (:mod:`engine.shapes.ops`), each
mirroring one ``tf.raw_ops`` op of :mod:`engine.kernels`.

They differ only in data: the op, its ports, whether it is depthwise, and which shape rule of
:mod:`engine.shapes.conv` gives its output. Inference and run share :func:`_conv_args`, so the
shape the app predicts is the shape the kernel returns.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from blocks.spec import (
    INT32_MAX,
    AttrError,
    AttrSpec,
    BlockSpec,
    PortSpec,
    TensorSpec,
    blame,
)
from engine import kernels
from engine.base.dtypes import DTYPES
from engine.base.errors import InvalidArgumentError
from engine.base.literal import literal
from engine.kernels.memory import conv_workspace, product_bound, terms_per_output
from engine.shapes.conv import (
    FORMATS,
    PADDINGS_3D,
    RULES,
    ConvGeometry,
    ConvGeometryNd,
    explicit_pads_nd,
    window_attr_nd,
)
from engine.shapes.ops import CONV_OPS, KINDS, SIZE_PORTS, ConvOp
from engine.shapes.padding import PADDINGS


def conv_attrs(rank: int) -> tuple[AttrSpec, ...]:
    """The attributes of the conv ops over ``rank`` spatial dimensions, as ``tf.raw_ops`` has
    them: strides and dilations of ``rank + 2`` entries in data_format order; EXPLICIT padding
    (and its ``explicit_paddings``) only for the 2-D ops."""
    n, (last, first) = rank + 2, FORMATS[rank]
    ones = [1] * n
    paddings = PADDINGS if rank == 2 else PADDINGS_3D
    layout = ", ".join(activation_axes(last))
    explicit = (
        AttrSpec("explicit_paddings", "int_list", [0] * 2 * n, length=(2 * n,), minimum=0,
                 maximum=INT32_MAX, visible_if=("padding", ("EXPLICIT",)),
                 doc=f"With padding EXPLICIT: the zeros inserted before and after each "
                     f"dimension, as {2 * n} numbers [before, after] x {n} in data_format "
                     "order. Batch and depth pairs must be 0. Ignored for SAME and VALID."),
    ) if "EXPLICIT" in paddings else ()
    return (
        AttrSpec("strides", "int_list", ones, length=(n,), minimum=1, maximum=INT32_MAX,
                 doc="The stride of the sliding window for each dimension of the input, in "
                     "data_format order. The batch and depth entries must be 1."),
        AttrSpec("padding", "enum", "SAME", choices=paddings,
                 doc="The padding algorithm. SAME: output size ceil(input / stride), zeros "
                     "added evenly with the odd one after. VALID: no padding."
                     + (" EXPLICIT: the amounts in explicit_paddings." if explicit else "")),
        *explicit,
        AttrSpec("data_format", "enum", last, choices=(last, first),
                 doc=f"The data layout of input and output: {last} = [{layout}], {first} = "
                     f"[{', '.join(activation_axes(first))}]. Filters are always "
                     f"[{', '.join(filter_axes(rank))}]."),
        AttrSpec("dilations", "int_list", ones, length=(n,), minimum=1, maximum=INT32_MAX,
                 doc="The dilation factor for each dimension of the input, in data_format "
                     "order: filter tap k reads input element k * dilation. Batch and depth "
                     "entries must be 1."),
    )


FILTER_AXES = ("kh", "kw", "in", "out")
DEPTHWISE_FILTER_AXES = ("kh", "kw", "in", "multiplier")


def filter_axes(rank: int, depthwise: bool = False) -> tuple[str, ...]:
    """Axis names of a filter over ``rank`` spatial dimensions (``kd``, ``kh``, ``kw``, then
    in and out, or multiplier for depthwise)."""
    return ("kd", "kh", "kw")[3 - rank:] + (DEPTHWISE_FILTER_AXES if depthwise
                                            else FILTER_AXES)[2:]

CUDNN = AttrSpec("use_cudnn_on_gpu", "bool", True,
                 doc="Accepted for compatibility with TensorFlow; has no effect (GradBlocks "
                     "computes on the CPU).")


def activation_axes(data_format: str) -> tuple[str, ...]:
    """Axis names of an activation tensor in ``data_format`` (its letters: ``NDHWC`` is
    ``("N", "D", "H", "W", "C")``)."""
    return tuple(data_format)


#: The attributes of the 2-D ops.
CONV_ATTRS = conv_attrs(2)

#: The attributes whose entries follow the axes of data_format (explicit_paddings in pairs).
LAYOUT_ATTRS = ("strides", "dilations", "explicit_paddings")


def relayout_attrs(attrs: dict, data_format: str) -> dict:
    """``strides``, ``dilations`` and ``explicit_paddings`` of ``attrs`` (in the order of its
    ``data_format``, NHWC by default) in ``data_format``'s order: the same window on the same
    axes, ``[1, 2, 3, 1]`` NHWC is ``[1, 1, 2, 3]`` NCHW. A value that is not a list of one
    (two) entries per axis is left out."""
    old = activation_axes(attrs.get("data_format", "NHWC"))
    new = activation_axes(data_format)
    if sorted(old) != sorted(new):
        return {}
    perm = [old.index(axis) for axis in new]
    out = {}
    for name in LAYOUT_ATTRS:
        value = attrs.get(name)
        if not isinstance(value, list) or len(value) not in (len(new), 2 * len(new)):
            continue
        if len(value) == len(new):
            out[name] = [value[i] for i in perm]
        else:
            out[name] = [v for i in perm for v in value[2 * i:2 * i + 2]]
    return out


def _other_format(data_format: str) -> str:
    last, first = FORMATS[len(data_format) - 2]
    return first if data_format == last else last


def _depth_misfits(inputs: dict[str, TensorSpec], fmt: str, other: str,
                   depthwise: bool) -> list[tuple[str, int]]:
    """The tensors in data_format whose depth does not fit the filter read in ``fmt`` but does
    read in ``other``: (port, depth in ``other``)."""
    if "filter" in inputs:
        fshape = tuple(inputs["filter"].shape)
    elif "filter_sizes" in inputs and inputs["filter_sizes"].value is not None:
        fshape = tuple(int(v) for v in np.ravel(inputs["filter_sizes"].value))
    else:
        return []
    rank = len(fmt)
    if len(fshape) != rank or fshape[-2] <= 0:
        return []
    fin, fout = fshape[-2], fshape[-1]
    out_depth = fin * fout if depthwise else fout

    def fits(port: str, depth: int) -> bool:
        if port == "out_backprop":
            return depth == out_depth
        return depth == fin if depthwise else depth > 0 and depth % fin == 0

    out = []
    for port in ("input", "input_sizes", "out_backprop"):
        spec = inputs.get(port)
        if spec is None:
            continue
        shape = tuple(spec.shape) if port != "input_sizes" else (
            tuple(int(v) for v in np.ravel(spec.value)) if spec.value is not None else ())
        if len(shape) != rank:
            continue
        here, there = (shape[activation_axes(f).index("C")] for f in (fmt, other))
        if not fits(port, here) and fits(port, there):
            out.append((port, there))
    return out


def _layout_attr_valid(name: str, attrs: dict, data_format: str) -> bool:
    """Whether attribute ``name`` of ``attrs`` is valid read in ``data_format`` order."""
    try:
        if name == "explicit_paddings":
            explicit_pads_nd(attrs["padding"], attrs[name], data_format)
        else:
            window_attr_nd(name, attrs[name], data_format)
    except (InvalidArgumentError, KeyError):
        return False
    return True


def kernel_attrs(attrs: dict, cudnn: bool) -> dict:
    """The kernel's keyword attributes; explicit_paddings only count with padding EXPLICIT (and
    only the 2-D ops, which have them, take them)."""
    out = {k: attrs[k] for k in ("strides", "padding", "data_format", "dilations")}
    if "explicit_paddings" in attrs:
        out["explicit_paddings"] = (attrs["explicit_paddings"] if attrs["padding"] == "EXPLICIT"
                                    else [])
    if cudnn:
        out["use_cudnn_on_gpu"] = attrs["use_cudnn_on_gpu"]
    return out


def float_port(inputs: dict[str, TensorSpec], port: str) -> TensorSpec:
    """The spec of ``port``, a float tensor of one of :data:`DTYPES`; AttrError otherwise."""
    spec = inputs[port]
    if spec.dtype not in DTYPES:
        raise AttrError(port, f"{port} dtype {spec.dtype} is not one of {', '.join(DTYPES)}")
    return spec


def _size_port(inputs: dict[str, TensorSpec], port: str) -> np.ndarray:
    spec = inputs[port]
    if not spec.dtype.startswith("int") or len(spec.shape) != 1:
        raise AttrError(port, f"{port} must be a 1-D integer vector, got {spec.describe()}")
    if spec.value is None:
        raise AttrError(port, f"{port} must be known before running: connect an IntVector or "
                              f"a ShapeOf block")
    return spec.value


def shared_dtype(a: tuple[str, TensorSpec], b: tuple[str, TensorSpec]) -> str:
    """The dtype two ``(port, spec)`` operands share; AttrError on the second when they differ."""
    if a[1].dtype != b[1].dtype:
        raise AttrError(b[0], f"{b[0]} dtype {b[1].dtype} does not match {a[0]} dtype "
                              f"{a[1].dtype}")
    return a[1].dtype


def _port_docs(depthwise: bool, rank: int) -> dict[str, str]:
    """What each tensor port of a conv block holds."""
    dims = ", ".join(("depth", "height", "width")[-rank:])
    return {
        "input": f"{rank + 2}-D input tensor in data_format.",
        "filter": f"{rank + 2}-D filter [{dims}, in_channels, "
                  + ("channel_multiplier]." if depthwise else "out_channels]."),
        "filter_sizes": f"Integer vector: the shape of the filter, [{dims}, in, "
                        + ("multiplier]." if depthwise else "out]."),
        "input_sizes": "Integer vector: the shape of the input, in data_format.",
        "out_backprop": "Gradients w.r.t. the output of the convolution, in data_format.",
    }


class _ConvRules:
    """The rules of the block of one op-table row: its geometry (with a hint when the other
    layout would fit), what it infers, its workspace, its run and its exported line."""

    def __init__(self, row: ConvOp, names: set[str]):
        self.kind, self.depthwise = row.kind, row.depthwise
        self.cudnn, self.ports, self.operands = row.cudnn, row.ports, row.operands
        self.rank, self.rules = row.rank, RULES[row.rank]
        self.kernel: Callable = getattr(kernels, row.kernel)
        self.names = names  # the block's attributes and ports, which an error may blame

    def geometry(self, attrs: dict,
                 inputs: dict[str, TensorSpec]) -> tuple[ConvGeometry | ConvGeometryNd, str]:
        """The kernel's geometry and dtype (raises naming the attribute or port at fault; a
        problem that the other data_format would not have says so, see :meth:`layout_hint`)."""
        try:
            return self.raw_geometry(attrs, inputs)
        except AttrError:
            raise
        except InvalidArgumentError as err:
            hint = self.layout_hint(attrs, inputs, err)
            raise blame(InvalidArgumentError(f"{err}{hint}", err.argument) if hint else err,
                        self.names) from None

    def layout_hint(self, attrs: dict, inputs: dict[str, TensorSpec],
                    err: InvalidArgumentError) -> str:
        """A hint that a tensor or an attribute is still in the other layout: for strides,
        dilations or explicit_paddings at fault, when they are valid read in the other order
        (and what they are in this one); else when the block is valid with its tensors read
        in the other layout (attributes following, :func:`relayout_attrs`), or a tensor's
        depth fits the filter only read that way. "" otherwise."""
        fmt = attrs["data_format"]
        other = _other_format(fmt)
        name = err.argument
        if name in LAYOUT_ATTRS:
            if not _layout_attr_valid(name, attrs, other):
                return ""
            fixed = relayout_attrs({**attrs, "data_format": other}, fmt)[name]
            return (f". {attrs[name]} reads as {other} order; in {fmt} order, {name} is "
                    f"{fixed}")
        moved = {**attrs, **relayout_attrs(attrs, other), "data_format": other}
        if self.valid(moved, inputs):
            laid = " and ".join(p for p in self.ports if p in ("input", "input_sizes",
                                                               "out_backprop"))
            return (f". With data_format {other} this block is valid: are its {laid} still "
                    f"in {other}? (Transpose them, or set data_format back to {other})")
        stuck = _depth_misfits(inputs, fmt, other, self.depthwise)
        if stuck:
            port, depth = stuck[0]
            return (f". Read as {other}, {port} has depth {depth}, which fits the filter: is "
                    f"{port} still in {other}? (Transpose it, or set data_format back to "
                    f"{other})")
        return ""

    def valid(self, attrs: dict, inputs: dict[str, TensorSpec]) -> bool:
        """Whether the kernel would take ``attrs`` and ``inputs``."""
        try:
            self.raw_geometry(attrs, inputs)
        except (InvalidArgumentError, KeyError):
            return False
        return True

    def raw_geometry(self, attrs: dict, inputs: dict[str, TensorSpec]
                     ) -> tuple[ConvGeometry | ConvGeometryNd, str]:
        """The geometry and dtype as the kernel reads them (raises the engine's error)."""
        kw = kernel_attrs(attrs, cudnn=False)
        if self.rank == 2:
            kw["depthwise"] = self.depthwise
        rule = self.rules[self.kind]
        if self.kind == "forward":
            x, w = float_port(inputs, "input"), float_port(inputs, "filter")
            dtype = shared_dtype(("input", x), ("filter", w))
            return rule(x.shape, w.shape, **kw), dtype
        dy = float_port(inputs, "out_backprop")
        if self.kind == "filter":
            x, sizes = float_port(inputs, "input"), _size_port(inputs, "filter_sizes")
            dtype = shared_dtype(("input", x), ("out_backprop", dy))
            return rule(x.shape, sizes, dy.shape, **kw), dtype
        w, sizes = float_port(inputs, "filter"), _size_port(inputs, "input_sizes")
        dtype = shared_dtype(("filter", w), ("out_backprop", dy))
        return rule(sizes, w.shape, dy.shape, **kw), dtype

    def infer(self, attrs: dict, inputs: dict[str, TensorSpec]) -> dict[str, TensorSpec]:
        """The output's spec: shape, dtype, axes and the bound of its values."""
        g, dtype = self.geometry(attrs, inputs)
        a, b = (inputs[p].bound for p in self.operands)
        bound = product_bound(a, b, terms_per_output(g, self.kind))
        if self.kind == "forward":
            shape, axes = g.output_shape, activation_axes(attrs["data_format"])
        elif self.kind == "filter":
            shape, axes = g.filter_shape, filter_axes(self.rank, self.depthwise)
        else:
            shape, axes = g.input_shape, activation_axes(attrs["data_format"])
        return {"output": TensorSpec(shape, dtype, axes, bound=bound)}

    def workspace(self, attrs: dict, inputs: dict[str, TensorSpec],
                  outputs: dict[str, TensorSpec]) -> int:
        """The kernel's workspace bytes for these inputs (:func:`conv_workspace`)."""
        g, dtype = self.geometry(attrs, inputs)
        finite = all(inputs[p].finite for p in self.operands)
        return conv_workspace(g, self.kind, dtype, finite)

    def run(self, attrs: dict, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The kernel's output."""
        args = {p: inputs[p] for p in self.ports}
        return {"output": self.kernel(**args, **kernel_attrs(attrs, self.cudnn))}

    def emit(self, attrs: dict, inputs: dict[str, str], outputs: dict[str, str]) -> list[str]:
        """The exported script's line: the kernel called with the block's arguments."""
        args = [f"{p}={inputs[p]}" for p in self.ports]
        args += [f"{k}={literal(v)}" for k, v in kernel_attrs(attrs, self.cudnn).items()]
        return [f"{outputs['output']} = kernels.{self.kernel.__name__}({', '.join(args)})"]


def _conv_block(row: ConvOp) -> BlockSpec:
    """The block of the op table's ``row``: its ports are the op's tensor arguments (forward:
    input, filter; filter: input, filter_sizes, out_backprop; input: input_sizes, filter,
    out_backprop) and its kernel is ``engine.kernels.<row.kernel>``."""
    ports = row.ports
    attrs = conv_attrs(row.rank) + ((CUDNN,) if row.cudnn else ())
    rules = _ConvRules(row, {a.name for a in attrs} | set(ports))
    kernel = rules.kernel
    if getattr(kernels, kernel.__name__, None) is not kernel:
        raise ValueError(f"{row.block_type}: exported scripts call kernels.{kernel.__name__}, "
                         "which is not this block's kernel")
    axes = filter_axes(row.rank, row.depthwise)
    port_axes = {
        "input": lambda a: activation_axes(a["data_format"]),
        "out_backprop": lambda a: activation_axes(a["data_format"]),
        "filter": lambda a: axes,
    }
    port_docs = _port_docs(row.depthwise, row.rank)
    return BlockSpec(
        type_id=row.block_type, title=row.title, category=row.category, op=row.name,
        doc=row.doc,
        inputs=tuple(PortSpec(p, port_docs[p], port_axes.get(p),
                              kind="int_vector" if p in SIZE_PORTS else "float")
                     for p in ports),
        outputs=(PortSpec("output", "The result, in the input's dtype.", kind="float"),),
        attrs=attrs, infer=rules.infer, run=rules.run, emit=rules.emit,
        imports=("from engine import kernels",), workspace=rules.workspace,
    )


#: One block per row of the op table: the gradients first, then the forward ops.
SPECS = tuple(_conv_block(row) for row in sorted(
    CONV_OPS, key=lambda o: (o.kind == "forward", o.depthwise, KINDS.index(o.kind))))
