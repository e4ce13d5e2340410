"""The one-line reproduction of a failure: a command a user can paste into a shell.

- A Python target (``MODULE:FUNCTION`` imported from a folder): ``python -c "..."`` (this
  interpreter) that puts the folder first on ``sys.path``, builds the case's exact arrays, calls
  the function and prints its output as ``.tolist()`` (every digit). The arrays are literal
  values when every array of the call has at most :data:`LITERAL_ELEMENTS` elements; else
  random values drawn as :func:`engine.verify.values.arrays` draws them (one
  ``np.random.default_rng(seed)`` drawing the forward input, the filter and the output
  gradient, in TF layout, in that order) and structured values as their ``arange`` / one-hot
  expressions; then the convention's transpose, the case's dtype and its memory (a strided view
  of a buffer twice as wide, or a read-only view), as the worker passes them.
- A callable run in this process (no module to import): the same Python statements, calling
  ``fn``.
- ``--cmd``: ``COMMAND ARGS IN.npz OUT.npz`` with the path IN.npz was written to
  (:func:`engine.verify.report.VerifyReport.write_inputs`), else ``IN.npz``.
"""

from __future__ import annotations

import shlex
import sys

import numpy as np

from engine.verify.conventions import shapes_nd, torch_axes, torch_kind

#: Arrays of at most this many elements (all of a call's) are written out as literals.
LITERAL_ELEMENTS = 64
_ROLES = ("x", "w", "dy")


def _source(name: str, op: str, convention: str,
            rank: int = 2) -> tuple[str, tuple[int, ...] | None]:
    """The TF-layout array an argument of the convention is made from, and its transpose."""
    if convention == "tf":
        return {"input": "x", "filter": "w", "out_backprop": "dy"}[name], None
    act, weight = torch_axes(rank)
    if name == "weight":
        return "w", weight
    if name == "grad_output" or torch_kind(op) == "transpose":
        return "dy", act
    return "x", act


def _structured(a: np.ndarray) -> str:
    """``a`` (TF layout, float64) as the arange or one-hot expression that makes it."""
    shape = tuple(a.shape)
    if np.array_equal(a.ravel(), np.arange(1, a.size + 1)):
        return f"np.arange(1.0, {a.size + 1}).reshape({shape})"
    return f"np.eye(1, {a.size}).reshape({shape})"


def _memory(expr: str, memory: str, v: np.ndarray) -> str:
    if memory == "noncontiguous" and v.ndim and v.size:
        return f"np.repeat({expr}, 2, axis=-1)[..., ::2]"
    if memory == "readonly":
        return f"np.lib.stride_tricks.as_strided({expr}, writeable=False)"
    return expr


def python_lines(failure, fn: str) -> list[str]:
    """The statements that build ``failure``'s arguments and print ``fn(...)``'s output."""
    case, call = failure.case, failure.call
    arrays = {k: v for k, v in call.kwargs.items() if isinstance(v, np.ndarray)}
    literal = all(v.size <= LITERAL_ELEMENTS for v in arrays.values())
    dtype, rank = case.dtype, case.geometry.rank
    lines = ["import numpy as np"]
    if dtype == "bfloat16":
        lines.append("import ml_dtypes")
    tf_arrays = {"x": call.tf_args.get("input"), "w": call.tf_args.get("filter"),
                 "dy": call.tf_args.get("out_backprop")}
    if not literal:
        needed = [_source(k, case.op, case.convention, rank)[0] for k in arrays]
        last = max(_ROLES.index(r) for r in needed)
        if case.values == "random":
            cg = shapes_nd(case.geometry)
            sizes = (cg.input_shape, cg.filter_shape, cg.output_shape)
            lines.append(f"r = np.random.default_rng({case.seed})")
            lines += [f"{role} = r.standard_normal({tuple(sizes[i])})"
                      for i, role in enumerate(_ROLES[:last + 1])]
        else:
            lines += [f"{role} = {_structured(np.asarray(tf_arrays[role], np.float64))}"
                      for role in _ROLES[:last + 1] if role in needed]
    parts = []
    for k, v in call.kwargs.items():
        if not isinstance(v, np.ndarray):
            parts.append(f"{k}={v!r}")
            continue
        if literal:
            flat = [float(e) for e in np.asarray(v, np.float64).ravel()]
            expr = f"np.array({flat!r}, {dtype!r}).reshape({tuple(v.shape)})"
        else:
            role, axes = _source(k, case.op, case.convention, rank)
            expr = f"{role}.astype({dtype!r})"
            if axes:  # the worker's copy of a transpose is C-contiguous
                expr = f"np.ascontiguousarray({role}.transpose{axes}.astype({dtype!r}))"
        parts.append(f"{k}={_memory(expr, case.memory, v)}")
    lines.append(f"print(np.asarray({fn}({', '.join(parts)})).tolist())")
    return lines


def _shell(code: str) -> str:
    """``code`` as one shell word: in double quotes where that needs no escape."""
    if any(c in code for c in '"$`\\!'):
        return shlex.quote(code)
    return f'"{code}"'


def python_command(failure, target: str, path: str) -> str:
    """``python -c "..."`` calling ``target`` (``MODULE:FUNCTION``) imported from ``path``."""
    module, _, function = target.partition(":")
    head = [f"import sys; sys.path.insert(0, {path!r})", f"import {module} as target"]
    code = "; ".join([*head, *python_lines(failure, f"target.{function}")])
    return f"{shlex.quote(sys.executable)} -c {_shell(code)}"


def inprocess_code(failure, name: str) -> str:
    """The Python statements calling ``fn`` (the callable of this session) on the case."""
    return "; ".join(python_lines(failure, "fn")) + f"  # fn: {name}"


def cmd_command(command: str, inputs: str | None) -> str:
    """``COMMAND ARGS IN.npz OUT.npz``."""
    return f"{command} {shlex.quote(inputs) if inputs else 'IN.npz'} OUT.npz"


def serve_command(command: str, inputs: str | None) -> str:
    """``--cmd-serve``: one request line (the IN folder and OUT.npy) on the command's stdin."""
    request = f"{inputs if inputs else 'IN'} OUT.npy"
    return f"echo {shlex.quote(request)} | {command}"
