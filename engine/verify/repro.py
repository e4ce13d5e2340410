"""``--repro DIR``: for each minimal failure, a canvas and a pytest file that reproduce it.

``DIR/minimal_<verdict>.gbc.json``: Tensor blocks of the canonical TF call's arrays (float64
.npy files beside it, so the reference block computes the exact result), the reference block
(the tf.raw_ops block of the op), the implementation's output as a Tensor from a .npy (in the TF
layout; when it has the reference's shape) wired with the reference into a Compare block (its
output is the error map), and a note with the case and the diagnosis. The canvas names no code:
it only holds values. ``DIR/test_minimal_<verdict>.py`` calls the user's function (or command)
on the case's arguments (``.args.npz``) and checks it against the reference under the sweep's
tolerance. Each set is written all or nothing (:func:`engine.base.atomic.write_file_set`) and
only if ``gradblocks check`` accepts the canvas.
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import numpy as np

from engine.base.atomic import Member, write_file_set
from engine.base.dtypes import RTOL
from engine.graph.canvas import Canvas, dumps
from engine.graph.layer_canvas import check_imported
from engine.verify.conventions import bound, from_tf_layout, reference, to_tf_layout
from engine.verify.report import Minimal, VerifyReport

#: The canvas block type of each tf.raw_ops op.
BLOCK_TYPES = {"Conv2D": "Conv2D", "Conv2DBackpropFilter": "Conv2DBackpropFilter",
               "Conv2DBackpropInput": "Conv2DBackpropInput",
               "DepthwiseConv2dNative": "DepthwiseConv2D",
               "DepthwiseConv2dNativeBackpropFilter": "DepthwiseBackpropFilter",
               "DepthwiseConv2dNativeBackpropInput": "DepthwiseBackpropInput"}
SIZE_ARGS = ("filter_sizes", "input_sizes")
ATTRS = ("strides", "padding", "explicit_paddings", "data_format", "dilations")


def _npy(a: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(a), allow_pickle=False)
    return buf.getvalue()


def _npz(arrays: dict[str, np.ndarray]) -> bytes:
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
    attrs.setdefault("explicit_paddings", [0] * 8)
    c.add_node(BLOCK_TYPES[call.tf_op], (420, 120), attrs, id=op_id,
               title=f"reference {call.tf_op}")
    y = 0
    for name in ("input", "filter", "out_backprop", *SIZE_ARGS):
        if name not in call.tf_args:
            continue
        value = call.tf_args[name]
        if name in SIZE_ARGS:
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
        got = to_tf_layout(f.case.op, f.case.convention, f.got) if f.got.ndim == 4 else f.got
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
            f"({call.tf_args.get('data_format', 'NHWC')}, filters HWIO), float64.")
    c.add_note((780, -120), text[:9000], size=(420.0, 300.0), id="case_note")
    return c, files, paths


_TEST = '''"""Reproduces the minimal {verdict} of gradblocks verify ({convention} {op})."""

import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
DTYPE = {dtype!r}
RTOL = {rtol!r}
TARGET = {target!r}
CMD = {cmd!r}
PATH = {path!r}
OTHER = {other!r}


def _arguments():
    with np.load(os.path.join(HERE, {args!r}), allow_pickle=False) as data:
        arrays = {{k: data[k] for k in data.files}}
    if DTYPE == "bfloat16":
        import ml_dtypes
        dtype = ml_dtypes.bfloat16
    else:
        dtype = np.dtype(DTYPE)
    return {{k: v.astype(dtype) for k, v in arrays.items()}} | {{
        k: tuple(v) if isinstance(v, list) and {torch} else v for k, v in OTHER.items()}}


def _call(kwargs):
    if CMD:
        import shlex
        import tempfile
        with tempfile.TemporaryDirectory() as tmp:
            src, dst = os.path.join(tmp, "in.npz"), os.path.join(tmp, "out.npz")
            members = {{k: (np.asarray(v, np.float32) if DTYPE == "bfloat16" else np.asarray(v))
                       for k, v in kwargs.items() if v is not None}}
            np.savez(src, op={op!r}, convention={convention!r}, dtype=DTYPE, **members)
            subprocess.run([*shlex.split(CMD), src, dst], check=True)
            with np.load(dst, allow_pickle=False) as out:
                return out["output"]
    import importlib
    sys.path.insert(0, PATH)
    module, function = TARGET.split(":")
    fn = importlib.import_module(module)
    for part in function.split("."):
        fn = getattr(fn, part)
    return fn(**kwargs)


def test_minimal_{verdict}():
    expected = np.load(os.path.join(HERE, {ref!r}))
    bound = np.load(os.path.join(HERE, {bound!r}))
    got = np.asarray(_call(_arguments()), np.float64)
    assert got.shape == expected.shape
    assert np.all(np.isfinite(got) | ~np.isfinite(expected))
    assert np.all(np.abs(got - expected) <= RTOL * bound)
'''


def write_repro(report: VerifyReport, folder: str, path: str | None = None) -> list[str]:
    """Write every minimal failure's canvas set into ``folder`` (made if missing); returns the
    canvas and test file paths."""
    os.makedirs(folder, exist_ok=True)
    written = []
    for m in report.minimal_failures:
        f = m.failure
        stem = f"minimal_{f.verdict.verdict}"
        canvas, files, paths = build_canvas(m, stem)
        call = f.call
        conv_arrays = {k: np.asarray(v, np.float64) for k, v in call.kwargs.items()
                       if isinstance(v, np.ndarray)}
        other = {k: (list(v) if isinstance(v, tuple) else v) for k, v in call.kwargs.items()
                 if not isinstance(v, np.ndarray)}
        ref = from_tf_layout(f.case.op, f.case.convention, reference(call))
        bnd = from_tf_layout(f.case.op, f.case.convention, bound(call))
        files[f"{stem}.args.npz"] = _npz(conv_arrays)
        files[f"{stem}.expected.npy"] = _npy(ref)
        files[f"{stem}.bound.npy"] = _npy(bnd)
        cmd = report.target if report.spec_kind == "cmd" else ""
        test = _TEST.format(
            verdict=f.verdict.verdict, convention=f.case.convention, op=f.case.op,
            dtype=f.case.dtype, rtol=RTOL[f.case.dtype], target="" if cmd else report.target,
            cmd=cmd, path=os.path.abspath(path or report.path or os.getcwd()), other=other,
            args=f"{stem}.args.npz", ref=f"{stem}.expected.npy", bound=f"{stem}.bound.npy",
            torch=f.case.convention == "torch")
        files[f"test_{stem}.py"] = test.encode("utf-8")
        text = dumps(canvas).encode("utf-8")
        members = [Member(name, lambda fh, d=data: fh.write(d)) for name, data in files.items()]
        target = str(Path(folder) / f"{stem}.gbc.json")
        def check(temps, canvas=canvas, paths=paths, target=target) -> None:
            check_imported(canvas, {k: temps[n] for k, n in paths.items()},
                           Path(folder).resolve(), target)

        write_file_set(target, lambda fh, t=text: fh.write(t), members, check=check)
        written += [target, str(Path(folder) / f"test_{stem}.py")]
    return written
