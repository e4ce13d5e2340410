"""``--repro DIR``: for each failure group, a canvas and a pytest file that reproduce it.

``DIR/<stem>.gbc.json`` (the group's stem: ``minimal_<verdict>``, then ``minimal_<verdict>_2``
... for more groups of one verdict): Tensor blocks of the canonical TF call's arrays (float64
.npy files beside it, so the reference block computes the exact result), the reference block
(the tf.raw_ops block of the op), the implementation's output as a Tensor from a .npy (in the TF
layout; when it has the reference's shape) wired with the reference into a Compare block (its
output is the error map), and a note with the case and the diagnosis, as tall as its text
(:func:`note_size`). The canvas names no code: it only holds values. ``DIR/test_<stem>.py``
(:func:`test_text`) calls the user's function on the case's arguments (``<stem>.args.npz``) or
runs the command on ``<stem>.in.npz`` (the file the sweep gave it) and checks the result
against the reference under the sweep's tolerance. Each set is written all or nothing
(:func:`engine.base.atomic.write_file_set`) and only if ``gradblocks check`` accepts the
canvas.
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from engine.base.atomic import Member, bytes_writer, write_file_set
from engine.base.dtypes import RTOL
from engine.base.names import escaped
from engine.graph.canvas import Canvas
from engine.graph.canvas_file import dumps
from engine.graph.layer_canvas import check_imported
from engine.shapes.ops import CONV_OPS, SIZE_PORTS, op_named
from engine.verify.conventions import bound, from_tf_layout, reference, to_tf_layout
from engine.verify.report import Minimal, VerifyReport
from engine.verify.sweep import RERUNS

#: The canvas block type of each tf.raw_ops op.
#: The block type of each tf.raw_ops op (the op table's).
BLOCK_TYPES = {op.name: op.block_type for op in CONV_OPS}
ATTRS = ("strides", "padding", "explicit_paddings", "data_format", "dilations")


def _npy(a: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(a), allow_pickle=False)
    return buf.getvalue()


def _npz(arrays: dict[str, Any]) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def build_canvas(m: Minimal, stem: str) -> tuple[Canvas, dict[str, bytes], dict[str, str]]:
    """The canvas, its .npy files (name -> bytes) and node id -> file name."""
    f = m.failure
    call = f.call
    c = Canvas()
    files: dict[str, bytes] = {}
    paths: dict[str, str] = {}
    op_id = "reference"
    attrs = {k: call.tf_args[k] for k in ATTRS if k in call.tf_args}
    rank = op_named(call.tf_op).rank
    if rank == 2:  # the 3-D blocks have no explicit_paddings
        attrs.setdefault("explicit_paddings", [0] * 8)
    c.add_node(BLOCK_TYPES[call.tf_op], (420, 120), attrs, id=op_id,
               title=f"reference {call.tf_op}")
    y = 0
    for name in ("input", "filter", "out_backprop", *SIZE_PORTS):
        if name not in call.tf_args:
            continue
        value = call.tf_args[name]
        if name in SIZE_PORTS:
            c.add_node("IntVector", (0, y), {"values": [int(v) for v in value]}, id=name,
                       title=name)
        else:
            file = f"{stem}.{name}.npy"
            files[file] = _npy(np.asarray(value, np.float64))
            paths[name] = file
            c.add_node("Tensor", (0, y), {"fill": "file", "path": file, "dtype": "float64"},
                       id=name, title=f"{name} {list(np.shape(value))} ({f.case.values})")
        c.connect((name, "output"), (op_id, name))
        y += 170
    ref = reference(call)
    if f.got is not None:
        got = to_tf_layout(f.case.op, f.case.convention, f.got) if f.got.ndim == rank + 2 \
            else f.got
        file = f"{stem}.got.npy"
        files[file] = _npy(np.asarray(got, np.float64))
        paths["got"] = file
        c.add_node("Tensor", (420, 330), {"fill": "file", "path": file, "dtype": "float64"},
                   id="got", title=f"implementation output {list(np.shape(got))}")
        if tuple(np.shape(got)) == ref.shape:
            c.add_node("Compare", (780, 200), id="compare", title="got - reference (error map)")
            c.connect(("got", "output"), ("compare", "a"))
            c.connect((op_id, "output"), ("compare", "b"))
    case_text = json.dumps(f.to_json()["case"])
    text = (f"minimal {f.verdict.verdict}: {f.verdict.message}\n\ncase ({f.case.convention} "
            f"{f.case.op}): {case_text}\n\ndiagnosis: {m.diagnosis.id or '(no known mistake)'}"
            f": {m.diagnosis.text}\n\nArrays here are in TensorFlow's layout "
            f"({call.tf_args['data_format']}, filters {'HWIO' if rank == 2 else 'DHWIO'}), "
            "float64.")
    c.add_note((1160, 0), text[:9000], size=note_size(text[:9000]), id="case_note")  # beside
    # the blocks (Compare ends near 1100): a long note covers none of them
    return c, files, paths


#: The note's width, and what it takes to show its text wrapped (scene units: a 10 pt font
#: draws some 7 units a character and 16 a line; a line is counted at fewer characters and
#: more height, so the text is never cut however the font measures).
NOTE_WIDTH, NOTE_CHARS, NOTE_LINE, NOTE_MARGIN = 520.0, 60, 19.0, 24.0


def note_size(text: str) -> tuple[float, float]:
    """The size of a note that shows all of ``text`` (the app wraps it at words)."""
    import textwrap

    lines = sum(max(1, len(textwrap.wrap(p, NOTE_CHARS, break_long_words=True)))
                for p in text.split("\n"))
    return NOTE_WIDTH, NOTE_MARGIN + lines * NOTE_LINE


_CHECK = """def _check(got):
    expected = np.load(os.path.join(HERE, {ref!r}))
    bound = np.load(os.path.join(HERE, {bound!r}))
    assert got.shape == expected.shape
    assert np.all(np.isfinite(got) | ~np.isfinite(expected))
    assert np.all(np.abs(got - expected) <= RTOL * bound)
"""

_PYTHON_CALL = """def _call():
    with np.load(os.path.join(HERE, {args!r}), allow_pickle=False) as data:
        arrays = {{k: data[k].astype({dtype!r}) for k in data.files}}
{memory}    sys.path.insert(0, {path!r})
    fn = importlib.import_module({module!r}).{function}
    return np.asarray(fn(**arrays, **OTHER), np.float64)
"""

_MEMORY = {
    "noncontiguous": """    arrays = {k: np.repeat(v, 2, axis=-1)[..., ::2] if v.size else v  # strided views
              for k, v in arrays.items()}
""",
    "readonly": """    for v in arrays.values():
        v.flags.writeable = False
"""}

_CMD_CALL = """def _call():
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out.npz")
        subprocess.run([*shlex.split({cmd!r}), os.path.join(HERE, {inputs!r}), out],
                       check=True)
        with np.load(out, allow_pickle=False) as data:
            return np.asarray(data["output"], np.float64)
"""

_TESTS = {
    "nondeterministic": """def test_{stem}():
    runs = [_call() for _ in range({reruns})]
    for got in runs[1:]:
        assert got.shape == runs[0].shape and np.array_equal(got, runs[0], equal_nan=True)
    _check(runs[0])
""",
    "timeout": """def test_{stem}():
    done = []
    worker = threading.Thread(target=lambda: done.append(_call()), daemon=True)
    worker.start()
    worker.join({timeout!r})
    assert done, "no result within {timeout:g} s"
    _check(done[0])
"""}
_TEST = """def test_{stem}():
    _check(_call())
"""


def test_text(report: VerifyReport, m: Minimal) -> str:
    """The pytest file of group ``m``: it calls the target on the minimal case (the
    ``.args.npz`` arrays, or for ``--cmd`` the ``.in.npz`` file) and checks the result against
    the reference under the sweep's tolerance; a nondeterministic group also checks that
    :data:`~engine.verify.sweep.RERUNS` runs agree, a timeout that the call ends in time."""
    f = m.failure
    verdict, stem, cmd = f.verdict.verdict, m.stem, report.spec_kind == "cmd"
    imports = ["import os", "import shlex" if cmd else "",
               "import subprocess" if cmd else "", "import tempfile" if cmd else "",
               "import importlib" if not cmd else "", "import sys" if not cmd else "",
               "import threading" if verdict == "timeout" else ""]
    imports = sorted(filter(None, imports), key=lambda s: s.split()[1])
    if cmd:
        call = _CMD_CALL.format(cmd=report.target, inputs=f"{stem}.in.npz")
    else:
        module, _, function = report.target.partition(":")
        other = {k: v for k, v in f.call.kwargs.items() if not isinstance(v, np.ndarray)}
        call = _PYTHON_CALL.format(args=f"{stem}.args.npz", dtype=f.case.dtype,
                                   memory=_MEMORY.get(f.case.memory, ""), path=report.path,
                                   module=module, function=function)
    test = _TESTS.get(verdict, _TEST).format(stem=stem, reruns=RERUNS,
                                              timeout=report.case_timeout)
    third = ["import ml_dtypes  # noqa: F401 - the bfloat16 dtype"] \
        if f.case.dtype == "bfloat16" else []
    title = f"the minimal {verdict} of gradblocks verify ({f.case.convention} {f.case.op})"
    head = [f'"""Reproduces {title}."""', f"# {escaped(f.verdict.message)}", "", *imports, "", *third,
            "import numpy as np", "", "HERE = os.path.dirname(os.path.abspath(__file__))",
            f"RTOL = {RTOL[f.case.dtype]!r}"]
    if not cmd:
        head.append(f"OTHER = {other!r}")
    checks = _CHECK.format(ref=f"{stem}.expected.npy", bound=f"{stem}.bound.npy")
    return "\n".join(head) + f"\n\n\n{call}\n\n{checks}\n\n{test}"


def write_repro(report: VerifyReport, folder: str) -> list[str]:
    """Write every group's canvas set into ``folder`` (made if missing); returns the canvas and
    test file paths. A callable run in this process (no module a test can import) gets the
    canvas alone."""
    from engine.verify.case_io import npz_arguments

    os.makedirs(folder, exist_ok=True)
    written = []
    for m in report.minimal_failures:
        f = m.failure
        stem = m.stem
        canvas, files, paths = build_canvas(m, stem)
        call = f.call
        ref = from_tf_layout(f.case.op, f.case.convention, reference(call))
        bnd = from_tf_layout(f.case.op, f.case.convention, bound(call))
        files[f"{stem}.expected.npy"] = _npy(ref)
        files[f"{stem}.bound.npy"] = _npy(bnd)
        if report.spec_kind == "cmd":
            files[f"{stem}.in.npz"] = _npz(npz_arguments(call.kwargs, {
                "op": f.case.op, "convention": f.case.convention, "dtype": f.case.dtype}))
        else:
            files[f"{stem}.args.npz"] = _npz({k: np.asarray(v, np.float64)
                                              for k, v in call.kwargs.items()
                                              if isinstance(v, np.ndarray)})
        tests = []
        if report.spec_kind not in ("inprocess", "serve"):  # serve: its IN folder and command
            files[f"test_{stem}.py"] = test_text(report, m).encode("utf-8")
            tests = [str(Path(folder) / f"test_{stem}.py")]
        text = dumps(canvas).encode("utf-8")
        members = [Member.of_bytes(name, data) for name, data in files.items()]
        target = str(Path(folder) / f"{stem}.gbc.json")

        def check(temps, canvas=canvas, paths=paths, target=target) -> None:
            check_imported(canvas, {k: temps[n] for k, n in paths.items()},
                           Path(folder).resolve(), target)

        write_file_set(target, bytes_writer(text), members, check=check)
        written += [target, *tests]
    return written
