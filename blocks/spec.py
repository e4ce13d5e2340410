"""The declarative description of a block type: ports, attributes, inference and run rules.

A :class:`BlockSpec` is data. The GUI builds its node classes and attribute editors from it, the
compiler calls ``infer`` to predict every output's shape and dtype without running anything, the
executor calls ``run``, and the exporter writes what ``emit`` returns into a script.

Contract of the three rules:

- ``infer(attrs, inputs) -> {port: TensorSpec}`` gets validated attributes (defaults filled in,
  ``path`` attributes already resolved against the canvas file's folder) and the
  :class:`TensorSpec` of every connected input. It raises :class:`AttrError` naming the
  attribute (or input port) at fault.
- ``run(attrs, inputs) -> {port: ndarray}`` gets the same attributes and the input arrays.
- ``emit(attrs, inputs, outputs) -> [statement, ...]`` gets the same attributes and the names
  of the script variables holding each input ``{port: var}`` and to assign each output
  ``{port: var}``; it returns Python statements that compute exactly what ``run`` returns.
  Every attribute value enters a statement through :func:`engine.base.literal.literal`, never by
  formatting it directly, and the statements use only the modules named in ``imports``
  (statements such as ``from engine import kernels``) and the variables given.

For the run's memory limit (:mod:`engine.graph.budget`) a spec also declares
``workspace(attrs, inputs, outputs) -> bytes``, an upper bound of the memory ``run`` needs
besides its outputs (default 0), whether its outputs are its inputs' arrays (``passthrough``:
they add no memory), and ``size_attr(attrs)``, the attribute that sets its outputs' sizes (named
when an output is over the limit).

A block that checks something (Compare, GradCheck, AdjointCheck) names the output port holding
its bool verdict in ``verdict``: the canvas badge and ``gradblocks run``'s table show it as
PASS or FAIL.

A block that names a result (Output) declares ``result_name``, the text attribute holding the
name its output is stored under in results files (``gradblocks run --out``, an exported
script): the compiler checks it follows :func:`engine.graph.result_names.result_name_problem` and is
unique per canvas.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from engine.base.dtypes import DTYPES, largest_finite
from engine.base.errors import InvalidArgumentError
from engine.base.names import shown, text_problem

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MAX = 2**63 - 1
#: Longest path a ``path`` attribute may hold.
MAX_PATH = 4096


class AttrError(InvalidArgumentError):
    """A problem with one attribute or input port of a block: ``attr`` names it (or is None)."""

    def __init__(self, attr: str | None, message: str):
        super().__init__(message)
        self.attr = attr
        self.message = message


def _is_int(v: object) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _literal_values(name: str, value: Any) -> list | float:
    """A number or a rectangular nested list of numbers, as floats (NaN and infinities
    allowed; strings, booleans, null and numbers beyond float range are errors). A NumPy
    array of numbers (integers or floats; not a masked one) counts as its nested list."""
    if isinstance(value, np.ndarray) and not isinstance(value, np.ma.MaskedArray) \
            and value.dtype.kind in "iuf":
        value = value.tolist()
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, (list, tuple)):
            stack.extend(v)
        elif isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
            raise AttrError(name, f"{name} must hold numbers only, got {shown(v)}")
        elif isinstance(v, (int, np.integer)) and abs(int(v)) > FLOAT_MAX_INT:
            raise AttrError(name, f"{name}: {shown(v)} is beyond the float range")
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError, RecursionError):
        raise AttrError(name, f"{name} must be a (nested) list of numbers with a "
                              f"rectangular shape, got {shown(value)}") from None
    return arr.tolist()


#: The largest integer a float64 holds without overflowing to infinity.
FLOAT_MAX_INT = int(np.finfo(np.float64).max)


@dataclass(frozen=True)
class AttrSpec:
    """One attribute: its kind, default, allowed values and documentation.

    ``length`` (int_list) is the tuple of allowed lengths (None: any). ``minimum`` and
    ``maximum`` bound int, int_list and float values (inclusive); a float is finite (an int
    given for it is taken as a float), and without a ``minimum`` only finiteness limits it
    from below. ``visible_if`` is
    ``(other_attr, allowed_values)``: the attribute only matters, and is only shown, while the
    other attribute has one of those values; otherwise it is ignored.
    """

    name: str
    kind: str
    default: Any
    doc: str = ""
    choices: tuple = ()
    length: tuple[int, ...] | None = None
    minimum: float | None = None
    visible_if: tuple[str, tuple] | None = None
    maximum: float = INT64_MAX

    def _check_range(self, name: str, values: list[int], listed: bool = False) -> None:
        """Every value within ``[minimum, maximum]`` (the minimum defaults to int64's)."""
        lo = self.minimum if self.minimum is not None else -INT64_MAX - 1
        for v in values:
            if lo <= v <= self.maximum:
                continue
            what = f"{name} {shown(values)}: every entry" if listed else name
            bound = f">= {lo}" if v < lo else f"<= {self.maximum}"
            if self.maximum == INT32_MAX and v > INT32_MAX:
                bound += " (TensorFlow's int32 range)"
            raise AttrError(name, f"{what} must be {bound}, got {shown(v)}")

    def _float(self, name: str, value: Any) -> float:
        """A finite float within ``[minimum, maximum]`` (ints accepted, booleans not)."""
        if isinstance(value, (bool, np.bool_)) or not isinstance(
                value, (int, float, np.integer, np.floating)):
            raise AttrError(name, f"{name} must be a number, got {shown(value)}")
        if _is_int(value) and abs(int(value)) > FLOAT_MAX_INT:
            raise AttrError(name, f"{name}: {shown(value)} is beyond the float range")
        number = float(value)
        if not math.isfinite(number):
            raise AttrError(name, f"{name} must be a finite number, got {shown(value)}")
        if self.minimum is not None and number < self.minimum:
            raise AttrError(name, f"{name} must be >= {self.minimum!r}, got {number!r}")
        if number > self.maximum:
            raise AttrError(name, f"{name} must be <= {self.maximum!r}, got {number!r}")
        return number

    def is_active(self, attrs: Mapping[str, Any]) -> bool:
        """Whether this attribute matters given the other attribute values."""
        if self.visible_if is None:
            return True
        other, allowed = self.visible_if
        return attrs.get(other) in allowed

    def validate(self, value: Any) -> Any:
        """The value normalized to this kind (lists, ints, str), or :class:`AttrError`."""
        name, kind = self.name, self.kind
        if kind in ("enum", "dtype"):
            choices = tuple(DTYPES) if kind == "dtype" else self.choices
            if not isinstance(value, str) or value not in choices:
                raise AttrError(name, f"{name} {shown(value)} is not one of "
                                      f"{', '.join(choices)}")
            return value
        if kind == "bool":
            if not isinstance(value, (bool, np.bool_)):
                raise AttrError(name, f"{name} must be true or false, got {shown(value)}")
            return bool(value)
        if kind == "int":
            if not _is_int(value):
                raise AttrError(name, f"{name} must be an integer, got {shown(value)}")
            self._check_range(name, [int(value)])
            return int(value)
        if kind == "float":
            return self._float(name, value)
        if kind in ("int_list", "shape"):
            if not isinstance(value, (list, tuple)) or not all(map(_is_int, value)):
                raise AttrError(name, f"{name} must be a list of integers, got {shown(value)}")
            if self.length is not None and len(value) not in self.length:
                want = " or ".join(str(n) for n in self.length)
                raise AttrError(name, f"{name} must have {want} elements, got {len(value)}: "
                                      f"{shown(list(value))}")
            if kind == "shape" and any(v < 0 for v in value):
                raise AttrError(name, f"{name} {shown(list(value))}: sizes must be >= 0")
            ints = [int(v) for v in value]
            self._check_range(name, ints, listed=True)
            return ints
        if kind == "text":
            problem = text_problem(value, name)
            if problem:
                raise AttrError(name, problem)
            return value
        if kind == "path":
            if not isinstance(value, str):
                raise AttrError(name, f"{name} must be a string, got {shown(value)}")
            if "\x00" in value or len(value) > MAX_PATH:
                raise AttrError(name, f"{name} must be a file path without NUL of at most "
                                      f"{MAX_PATH} characters, got {shown(value)}")
            return value
        if kind == "values":
            return _literal_values(name, value)
        raise AttrError(name, f"{name} has unknown kind {kind!r}")


@dataclass(frozen=True)
class PortSpec:
    """An input or output port. ``axes(attrs)`` (inputs only, optional) names the axes this
    port expects, e.g. N, H, W, C for an NHWC input; viewers use it for unnamed sources.
    ``kind`` (one of :data:`blocks.port_kinds.PORT_KINDS`) is what an input takes or an output
    gives: "float" tensor, "int_vector", "bool", or "any" (any tensor / same as the input);
    the editor offers only fitting blocks when a wire is dropped on empty canvas."""

    name: str
    doc: str = ""
    axes: Callable[[dict], tuple[str, ...]] | None = field(default=None, compare=False)
    kind: str = "any"


@dataclass(frozen=True)
class TensorSpec:
    """The inferred type of a port: shape, dtype name, axis names for viewers, and the value
    when it is known before running (integer vectors such as filter_sizes)."""

    shape: tuple[int, ...]
    dtype: str
    axes: tuple[str, ...] | None = None
    value: np.ndarray | None = field(default=None, compare=False)
    #: An upper bound of every element's magnitude; ``inf`` when unknown, which includes the
    #: case that some element may be NaN or infinite.
    bound: float = field(default=math.inf, compare=False)

    @property
    def finite(self) -> bool:
        """True when every element is known to be finite."""
        return self.bound <= (largest_finite(self.dtype) if self.dtype in DTYPES else 0.0)

    def describe(self) -> str:
        return f"{list(self.shape)} {self.dtype}"


InferFn = Callable[[dict, dict[str, TensorSpec]], dict[str, TensorSpec]]
RunFn = Callable[[dict, dict[str, np.ndarray]], dict[str, np.ndarray]]
EmitFn = Callable[[dict, dict[str, str], dict[str, str]], list[str]]
WorkspaceFn = Callable[[dict, dict[str, TensorSpec], dict[str, TensorSpec]], int]


def no_workspace(attrs: dict, inputs: dict[str, TensorSpec],
                 outputs: dict[str, TensorSpec]) -> int:
    """The default workspace: ``run`` needs no memory besides its outputs."""
    return 0


@dataclass(frozen=True)
class BlockSpec:
    """One block type (see the module docstring for the ``infer`` / ``run`` / ``emit``
    contract; ``imports`` are the import statements the emitted code needs)."""

    type_id: str
    title: str
    category: str
    op: str
    doc: str
    inputs: tuple[PortSpec, ...]
    outputs: tuple[PortSpec, ...]
    attrs: tuple[AttrSpec, ...]
    infer: InferFn
    run: RunFn
    emit: EmitFn
    imports: tuple[str, ...] = ()
    workspace: WorkspaceFn = no_workspace
    passthrough: bool = False
    size_attr: Callable[[dict], str | None] = field(default=lambda attrs: None, compare=False)
    #: The text attribute naming this block's (single) output in results files, or None.
    result_name: str | None = None
    #: The output a block is pictured by (canvas previews); None: the first output.
    main_output: str | None = None
    #: A boolean scalar output that says whether a check passed (a PASS / FAIL badge); None:
    #: the block is no check.
    verdict: str | None = None
    #: ``(input port, output port)`` of one shape: selecting the block compares the tensor
    #: wired into that input (left) with that output (right) in the viewer, whose difference
    #: panel then maps where they differ (GradCheck: gradient vs its float64 numbers, the
    #: difference being the signed error map); None: the viewer shows one output.
    view_pair: tuple[str, str] | None = None

    def main_output_name(self) -> str | None:
        """The output pictured for this block: ``main_output``, else the first (None: none)."""
        if self.main_output is not None:
            return self.main_output
        return self.outputs[0].name if self.outputs else None

    def defaults(self) -> dict[str, Any]:
        """Every attribute at its default (lists copied)."""
        return {a.name: (list(a.default) if isinstance(a.default, list) else a.default)
                for a in self.attrs}

    def attr(self, name: str) -> AttrSpec:
        """The attribute ``name``; an :class:`AttrError` lists the ones there are."""
        found = self._attr_map.get(name) if type(name) is str else None
        if found is not None:
            return found
        for a in self.attrs:
            if a.name == name:
                return a
        names = ", ".join(a.name for a in self.attrs) or "none"
        raise AttrError(name, f"{self.type_id} has no attribute {name!r} (it has {names})")

    def input_names(self) -> tuple[str, ...]:
        return self._port_names[0]

    def output_names(self) -> tuple[str, ...]:
        return self._port_names[1]

    @functools.cached_property
    def _attr_map(self) -> dict[str, AttrSpec]:
        """Attributes by name, built once (a spec never changes; the first of a name wins, as
        in :meth:`attr`)."""
        found: dict[str, AttrSpec] = {}
        for a in self.attrs:
            found.setdefault(a.name, a)
        return found

    @functools.cached_property
    def _port_names(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """``(inputs, outputs)`` names, computed once (a spec never changes)."""
        return tuple(p.name for p in self.inputs), tuple(p.name for p in self.outputs)

    def resolve_attrs(self, attrs: Mapping[str, Any]) -> tuple[dict[str, Any], list[AttrError]]:
        """Defaults filled in and every given value validated: ``(attrs, problems)``.

        An unknown attribute is a problem; an invalid value is a problem and keeps its default
        in the returned attributes so inference can go on for the rest.
        """
        out = self.defaults()
        problems: list[AttrError] = []
        known = {a.name: a for a in self.attrs}
        for name, value in attrs.items():
            if name not in known:
                problems.append(AttrError(name, f"{self.type_id} has no attribute {name!r} "
                                                f"(it has {', '.join(known) or 'none'})"))
                continue
            try:
                out[name] = known[name].validate(value)
            except AttrError as err:
                problems.append(err)
        return out, problems


def resolve_paths(spec: BlockSpec, attrs: dict[str, Any], base_dir: str | os.PathLike | None) -> dict:
    """``path`` attributes made absolute against the canvas file's folder."""
    if base_dir is None:
        return attrs
    out = dict(attrs)
    for a in spec.attrs:
        if a.kind == "path" and out.get(a.name) and not Path(out[a.name]).is_absolute():
            out[a.name] = str(Path(base_dir) / out[a.name])
    return out


def read_paths(spec: BlockSpec, attrs: dict[str, Any]) -> list[str]:
    """The files a block with (resolved) ``attrs`` reads: its active, non-empty ``path``
    attributes, in spec order. The one rule for caching by file, protecting read files and
    watching them on disk."""
    return [str(attrs[a.name]) for a in spec.attrs
            if a.kind == "path" and a.is_active(attrs) and attrs.get(a.name)]


def blame(err: InvalidArgumentError, names: set[str]) -> AttrError:
    """An engine error as an :class:`AttrError` naming the attribute or port at fault: the
    error's ``argument`` when it is one of ``names``, else none."""
    if isinstance(err, AttrError):
        return err
    return AttrError(err.argument if err.argument in names else None, str(err))
