"""GradBlocks from Python, for notebooks: build or load a canvas, check it, run it, save it.

::

    import engine
    c = engine.new_canvas()
    c.add("Tensor", id="x", shape=[1, 8, 8, 3])
    c.add("Conv2DBackpropFilter", id="dw", strides=[1, 2, 2, 1])
    c.connect("x.output", "dw.input")
    ...
    c.check()            # the table `gradblocks check` prints (HTML in Jupyter)
    results = c.run()    # results["dw"], results["dw.output"]: NumPy arrays
    c.save("grad.gbc.json")
    engine.load("grad.gbc.json")

Every mistake is an :class:`~engine.base.errors.InvalidArgumentError` naming what is wrong: an
unknown block type (the known ones listed), a bad attribute (block and attribute named), a bad
port reference (the block's ports listed), an argument of the wrong type (one line: the
argument, what it must be, what it is; never a NumPy or Pillow traceback). ``check`` never
raises for a canvas's problems: its report lists them, and its warnings (a GradCheck estimated
to run for more than a minute); ``run`` raises with the problems' lines.

The arrays a run returns are read-only views of the executor's cache (``flags.writeable`` is
False and cannot be set back): writing into one raises NumPy's ``assignment destination is
read-only`` instead of changing what the next run returns; copy one (``np.array(r["dw"])``) to
change it.

Relative ``path`` attributes (.npy files, images) are relative to the canvas file's folder once
the canvas was loaded or saved, before that to the working directory.

:func:`picture` (:mod:`engine.view.picture`) is a tensor as a Pillow image: the viewer's
default slice or filter montage in its colour map (:func:`engine.view.thumbnail.thumbnail`),
which Jupyter shows inline. It takes a
NumPy array or a (nested) list of bool, integer or float numbers; masked arrays are refused (their
mask would be ignored: pass ``a.filled(value)``), as are complex, object, text, date and
structured arrays, ragged lists and sizes outside 1..:data:`MAX_PICTURE_SIDE`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from blocks.registry import get_spec
from blocks.spec import AttrError, BlockSpec
from engine.base.arguments import bad, string
from engine.base.errors import InvalidArgumentError
from engine.base.names import counted, id_problem
from engine.graph.budget import limit_bytes
from engine.graph.canvas import Canvas
from engine.graph.canvas_file import load_canvas, save_canvas
from engine.graph.compiler import DEFAULT_MEMORY_LIMIT, Plan, place
from engine.graph.executor import Executor, RunResult
from engine.graph.report import check_rows, html_table, problem_lines, run_rows, text_table
from engine.graph.result_names import result_keys
from engine.verify.api import assert_conformant, verify  # noqa: F401  (re-exported)
from engine.view.picture import (  # noqa: F401  (re-exported: engine.api.picture)
    MAX_PICTURE_SIDE,
    PICTURE_BACKGROUND,
    PICTURE_SIZE,
    picture,
)

#: Blocks placed per row when the caller gives no position.
_PER_ROW = 4


class UnknownResultError(InvalidArgumentError, KeyError):
    """A result key no output has (the message lists the keys)."""

    def __str__(self) -> str:
        return self.args[0]


def _listed(names) -> str:
    return ", ".join(names) or "none"


def _path_argument(value: object, name: str = "path") -> Path:
    """``value`` as a Path: a str, bytes or os.PathLike, not empty, without NUL characters."""
    if not isinstance(value, (str, bytes, os.PathLike)):
        raise bad(name, "a file path (str or os.PathLike)", value)
    try:
        text = os.fsdecode(os.fspath(value))
    except (TypeError, UnicodeError):
        raise bad(name, "a file path (str or os.PathLike)", value) from None
    if not text or "\0" in text:
        raise bad(name, "a non-empty file path without NUL characters", text)
    return Path(text)


def _key_argument(key: object) -> str:
    """A result key: a str (anything else is an :class:`UnknownResultError`, a KeyError)."""
    if not isinstance(key, str):
        err = bad("key", "a result key (a string such as 'dw' or 'dw.output')", key)
        raise UnknownResultError(str(err), argument="key")
    return key


class CheckReport:
    """What ``gradblocks check`` reports: the table of every output's shape and dtype, or the
    problems (one line each). ``str()`` is the CLI's text, ``_repr_html_`` an HTML table."""

    def __init__(self, plan: Plan):
        self.plan = plan
        self.problems = problem_lines(plan)
        self.rows = check_rows(plan) if not self.problems else []
        #: ``label.attr: message`` of every warning (a run that will take long), one a line.
        self.warnings = [str(w) for ws in plan.warnings.values() for w in ws]

    @property
    def ok(self) -> bool:
        return not self.problems

    def summary(self) -> str:
        if self.ok:
            return f"ok, {len(self.plan.steps)} block(s)"
        return counted(len(self.problems), "problem")

    def __str__(self) -> str:
        notes = [f"warning: {w}" for w in self.warnings]
        if self.ok:
            return "\n".join([text_table(self.rows), *notes, self.summary()])
        return "\n".join([f"{self.summary()}:", *(f"  {p}" for p in self.problems), *notes])

    __repr__ = __str__

    def _repr_html_(self) -> str:
        notes = [f"warning: {w}" for w in self.warnings]
        if self.ok:
            return html_table(self.rows, caption=self.summary(), notes=notes)
        return html_table([["problem"], *([p] for p in self.problems)],
                          caption=self.summary(), notes=notes)


class Results(Mapping):
    """The arrays a run made, by ``"node.port"`` (what iteration gives). A key may also be a
    node id (its main output: the pictured one, else the first), a block's label (its title,
    see :mod:`engine.graph.labels`) with or without ``.port``, or a name ``gradblocks run --out``
    stores (an Output block's name): see :attr:`named`."""

    def __init__(self, plan: Plan, result: RunResult):
        self.plan, self.result = plan, result
        self._arrays = {f"{n}.{p}": _read_only_view(a) for (n, p), a in result.outputs.items()}
        self._steps = {s.node_id: s for s in plan.steps}
        self._by_label = {plan.label(n): n for n in self._steps}
        keys = result_keys(plan.steps, plan.labels)
        self.named: dict[str, np.ndarray] = {
            key: self._arrays[f"{ref[0]}.{ref[1]}"] for ref, key in keys.items()
            if ref in result.outputs}
        """The arrays under the keys ``gradblocks run --out`` writes."""

    def _ref(self, key: str) -> str | None:
        """``"node.port"`` for ``key`` (see the class docstring), or None."""
        if key in self._arrays:
            return key
        node, _, port = key.partition(".")
        for candidate, rest in ((key, ""), (node, port)):
            node_id = candidate if candidate in self._steps else self._by_label.get(candidate)
            if node_id is None:
                continue
            spec = self._steps[node_id].spec
            port_name = rest or spec.main_output_name()
            ref = f"{node_id}.{port_name}"
            if ref in self._arrays:
                return ref
        return None

    def axes(self, key: str) -> tuple[str, ...] | None:
        """The axis names the compiler gave the output ``key`` (e.g. kh, kw, in, out)."""
        ref = self._ref(_key_argument(key))
        if ref is None:
            self[key]  # the error listing the keys
            return None
        node_id, _, port = ref.partition(".")
        spec = self.plan.specs.get((node_id, port))
        return spec.axes if spec is not None else None

    def picture(self, key: str, size: tuple[int, int] = PICTURE_SIZE):
        """:func:`picture` of the output ``key`` with its axis names (a filter gradient is a
        montage, as in the viewer)."""
        return picture(self[key], self.axes(key) if self._ref(_key_argument(key)) else None, size)

    def __getitem__(self, key: str) -> np.ndarray:
        ref = self._ref(_key_argument(key))
        if ref is not None:
            return self._arrays[ref]
        if key in self.named:
            return self.named[key]
        raise UnknownResultError(f"no result {key!r}: the outputs are {_listed(self._arrays)}"
                                 + (f"; stored names {_listed(self.named)}" if self.named
                                    else ""))

    def __iter__(self) -> Iterator[str]:
        return iter(self._arrays)

    def __len__(self) -> int:
        return len(self._arrays)

    def table(self) -> list[list[str]]:
        """The rows of ``gradblocks run``'s table."""
        return run_rows(self.plan, self.result)

    def __repr__(self) -> str:
        return text_table(self.table())

    def _repr_html_(self) -> str:
        return html_table(self.table(), caption=f"{len(self.plan.steps)} block(s) ran")


class NotebookCanvas:
    """A canvas built and run from Python (see the module docstring). ``canvas`` is the
    :class:`engine.graph.canvas.Canvas` itself; ``base_dir`` the folder relative paths start
    from."""

    def __init__(self, canvas: Canvas | None = None, base_dir: str | os.PathLike | None = None,
                 memory_limit: int = DEFAULT_MEMORY_LIMIT):
        if canvas is not None and not isinstance(canvas, Canvas):
            raise bad("canvas", "None or an engine.graph.canvas.Canvas", canvas)
        self.canvas = canvas if canvas is not None else Canvas()
        self.base_dir = _path_argument(base_dir, "base_dir") if base_dir is not None else None
        try:
            limit = limit_bytes(memory_limit)
        except (TypeError, ValueError):
            raise bad("memory_limit", "a positive number of bytes", memory_limit) from None
        self.executor = Executor(memory_limit=limit)

    # -- building ------------------------------------------------------------------------------
    def _spec_of(self, node_id: str) -> BlockSpec:
        if not isinstance(node_id, str):
            raise bad("id", "a block id (a string)", node_id)
        node = self.canvas.nodes.get(node_id)
        if node is None:
            raise InvalidArgumentError(f"no block {node_id!r} on the canvas (its blocks: "
                                       f"{_listed(self.canvas.nodes)})", argument="id")
        return get_spec(node.type)

    def _attr_error(self, node_id: str, type_id: str, err: AttrError) -> InvalidArgumentError:
        message = re.sub(r"\s*\n\s*", " ", err.message)  # a NumPy repr spans lines
        return InvalidArgumentError(f"block {node_id!r} ({type_id}) attribute {err.attr}: "
                                    f"{message}", argument=err.attr)

    def _check_attrs(self, node_id: str, spec: BlockSpec, attrs: dict[str, Any]) -> None:
        """Validate every attribute (a masked array is refused by name: its mask would be
        lost) before anything changes."""
        for name, value in attrs.items():
            if isinstance(value, np.ma.MaskedArray):
                raise InvalidArgumentError(
                    f"block {node_id!r} ({spec.type_id}) attribute {name}: a masked array is "
                    f"refused (its mask would be ignored): pass a list", argument=name)
            try:
                spec.attr(name).validate(value)
            except AttrError as err:
                raise self._attr_error(node_id, spec.type_id, err) from None

    def add(self, type_id: str, id: str | None = None, *, title: str | None = None,
            pos: tuple[float, float] | None = None, **attrs: Any) -> str:
        """Add a block of ``type_id`` with these attributes (validated now); returns its id."""
        string("type_id", type_id, "a block type name (a string such as 'Conv2D')")
        try:
            spec = get_spec(type_id)  # an unknown type lists the known ones
        except InvalidArgumentError as err:
            err.argument = err.argument or "type_id"
            raise
        if id is not None and id_problem(id):
            raise InvalidArgumentError(f"id: {id_problem(id)}", argument="id")
        node_id = id if id is not None else self.canvas.new_id(type_id)
        self._check_attrs(node_id, spec, attrs)
        n = len(self.canvas.nodes)
        if pos is None:
            pos = (260.0 * (n % _PER_ROW), 180.0 * (n // _PER_ROW))
        self.canvas.add_node(type_id, pos=pos, attrs=attrs, id=node_id, title=title)
        return node_id

    def set(self, node_id: str, **attrs: Any) -> None:
        """Change attributes of a block (each validated; none changes when one is bad)."""
        spec = self._spec_of(node_id)
        self._check_attrs(node_id, spec, attrs)
        for name, value in attrs.items():
            self.canvas.set_attr(node_id, name, value)

    def _port(self, ref: str, output: bool) -> tuple[str, str]:
        """``"node.port"`` (or ``"node"``: its main output / its only input) as a port key."""
        name = "src" if output else "dst"
        string(name, ref, f"an {'output' if output else 'input'} port written 'block.port' or "
               "'block' (a string)")
        node_id, dot, port = ref.partition(".")
        spec = self._spec_of(node_id)
        ports = spec.output_names() if output else spec.input_names()
        kind = "output" if output else "input"
        if not dot:
            if output and spec.main_output_name():
                return node_id, str(spec.main_output_name())
            if len(ports) == 1:
                return node_id, ports[0]
            choices = _listed(f"{node_id}.{p}" for p in ports)
            raise InvalidArgumentError(f"{name} {ref!r}: name the {kind} port of block "
                                       f"{node_id!r} ({spec.type_id}): {choices}", argument=name)
        if port not in ports:
            raise InvalidArgumentError(
                f"{ref!r}: block {node_id!r} ({spec.type_id}) has no {kind} port {port!r}; its "
                f"{kind} ports: {_listed(ports)}", argument="port")
        return node_id, port

    def connect(self, src: str, dst: str) -> None:
        """Wire output ``src`` (``"x.output"`` or ``"x"``) to input ``dst`` (``"dw.input"``),
        replacing any wire into ``dst``."""
        self.canvas.connect(self._port(src, True), self._port(dst, False))

    # -- checking and running ------------------------------------------------------------------
    def plan(self) -> Plan:
        return self.executor.compile(self.canvas, self.base_dir)

    def check(self) -> CheckReport:
        """The report ``gradblocks check`` prints (never raises for the canvas's problems)."""
        return CheckReport(self.plan())

    def run(self) -> Results:
        """Run every block (cached outputs reused); a problem or a failed block raises an
        InvalidArgumentError listing them."""
        plan = self.plan()
        if plan.errors:
            report = CheckReport(plan)
            raise InvalidArgumentError(f"cannot run: {report}")
        result = self.executor.run(plan)
        if result.errors:
            lines = [f"  {place(plan.label(n))}: {m}" for n, m in result.errors.items()]
            raise InvalidArgumentError("\n".join([f"{len(lines)} block(s) failed:", *lines]))
        return Results(plan, result)

    # -- files ---------------------------------------------------------------------------------
    def save(self, path: str | os.PathLike) -> Path:
        """Write the canvas to ``path`` (atomically); relative paths then start from its
        folder. A path that cannot be written (a folder, a missing folder, a full disk) is an
        InvalidArgumentError naming it; the file there before, if any, is unchanged."""
        path = _path_argument(path)
        try:
            save_canvas(self.canvas, path)
        except OSError as err:
            raise InvalidArgumentError(f"path {str(path)!r}: cannot write the canvas: "
                                       f"{err.strerror or err}", argument="path") from None
        self.base_dir = path.resolve().parent
        return path

    def __repr__(self) -> str:
        return f"<GradBlocks canvas: {len(self.canvas.nodes)} block(s), " \
               f"{len(self.canvas.edges)} wire(s)>"


def new_canvas() -> NotebookCanvas:
    """An empty canvas to build in code."""
    return NotebookCanvas()


def load(path: str | os.PathLike) -> NotebookCanvas:
    """The canvas file ``path`` (a CanvasError lists every problem of a bad file)."""
    path = _path_argument(path)
    return NotebookCanvas(load_canvas(path), path.resolve().parent)


def _read_only_view(array: np.ndarray) -> np.ndarray:
    """A view of ``array`` that cannot be written nor made writeable (its base is read-only:
    the executor's cache, :mod:`engine.graph.executor`)."""
    if not isinstance(array, np.ndarray):
        return array
    view = array.view()
    view.flags.writeable = False
    return view
