"""Issue 31 point 6: terminal safety everywhere. Every command-line surface that echoes text a
user typed or a file holds (import's --attrs, weight and layer names, a canvas's titles, ids,
attribute values and paths, explain, geometry, guide topics, verify's options, unknown
commands...) is run as a subprocess with text holding ESC (a colour sequence), BEL, CR and
U+202E (right-to-left override): none of them may reach stdout or stderr raw; their escaped
forms (``\\x1b``, ``\\x07``, ``\\r``, ``\\u202e``, :func:`engine.base.names.escaped`) may."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).parents[1]
EXAMPLE = ROOT / "assets" / "examples" / "conv2d_backprop_filter.gbc.json"
#: Text holding each character a terminal acts on: a colour escape, a bell, a carriage return
#: and the right-to-left override.
EVIL = "a\x1b[31mb\x07c\rd\u202ee"
RAW = {"ESC": b"\x1b", "BEL": b"\x07", "CR": b"\r", "RLO": "\u202e".encode()}


def gradblocks(*args: object, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONIOENCODING": "utf-8", "QT_QPA_PLATFORM": "",
           "DISPLAY": "", "WAYLAND_DISPLAY": ""}
    return subprocess.run([sys.executable, "-m", "engine.cli", *map(str, args)], cwd=cwd,
                          capture_output=True, check=False, timeout=300, env=env)


def assert_safe(proc: subprocess.CompletedProcess) -> None:
    """No raw ESC, BEL, CR or U+202E on stdout or stderr, and something was said."""
    out = proc.stdout + proc.stderr
    assert out.strip(), proc
    leaks = [name for name, raw in RAW.items() if raw in out]
    assert not leaks, (leaks, out.decode("utf-8", "backslashreplace"))


def canvas_file(folder: Path, name: str = "c.gbc.json", **changes) -> Path:
    """The example canvas with ``changes`` applied: title, id, padding, path (a Tensor reading
    a .npy file)."""
    data = json.loads(EXAMPLE.read_text(encoding="utf-8"))
    nodes = {n["id"]: n for n in data["nodes"]}
    if "title" in changes:
        nodes["grad_filter"]["title"] = changes["title"]
    if "padding" in changes:
        nodes["grad_filter"]["attrs"]["padding"] = changes["padding"]
    if "path" in changes:
        fill = "file" if changes["path"].endswith(".npy") else "image"
        nodes["input"]["attrs"] = {"fill": fill, "path": changes["path"]}
    if "id" in changes:
        old = "grad_filter"
        nodes[old]["id"] = changes["id"]
        for edge in data["edges"]:
            for end in ("src", "dst"):
                if edge[end][0] == old:
                    edge[end][0] = changes["id"]
    path = folder / name
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def _failing_canvas(folder: Path) -> Path:
    """A canvas whose image input (a PNG cut short in its pixel data) fails at run time, its
    block titled with U+202E."""
    from PIL import Image

    png = folder / "cut.png"
    Image.fromarray(np.random.default_rng(0).integers(0, 255, (64, 64, 3), np.uint8)).save(png)
    png.write_bytes(png.read_bytes()[:-200])
    data = json.loads(EXAMPLE.read_text(encoding="utf-8"))
    data["nodes"] = [{"id": "input", "type": "Tensor", "title": "in\u202eput", "pos": [0, 0],
                      "attrs": {"fill": "image", "path": "cut.png"}}]
    data["edges"] = []
    path = folder / "failing.gbc.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("evil")
    w = np.ones((2, 1, 3, 3), np.float32)
    np.savez(d / "w.npz", **{"conv1.weight": w})
    np.savez(d / "evil_names.npz", **{f"{EVIL}.weight": w, EVIL: np.ones((2, 2), np.float32)})
    return {"dir": d, "weights": d / "w.npz", "evil_weights": d / "evil_names.npz",
            **_onnx_models(d)}


def _onnx_models(d: Path) -> dict[str, Path]:
    """``layers.onnx``: a Conv node and a Relu named EVIL; ``fed.onnx``: a Conv whose weight
    is a graph input (fed with --weights)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 5, 5])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    w = numpy_helper.from_array(np.ones((2, 1, 3, 3), np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"], name=EVIL, pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["c"], ["y"], name=f"relu{EVIL}")],
        "g", [x], [y], [w])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]),
              d / "layers.onnx")
    wi = helper.make_tensor_value_info("w", TensorProto.FLOAT, [2, 1, 3, 3])
    graph = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["y"], name="conv")],
                              "g", [x, wi], [y])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]),
              d / "fed.onnx")
    np.savez(d / "fed_evil.npz", **{EVIL: np.ones((2, 1, 3, 3), np.float32)})
    np.savez(d / "fed_bad.npz", w=np.ones((2, 1, 3), np.float32))
    return {"layers_onnx": d / "layers.onnx", "fed_onnx": d / "fed.onnx",
            "fed_evil": d / "fed_evil.npz", "fed_bad": d / "fed_bad.npz"}


# (case id, a function of the files giving the arguments)
IMPORT_CASES = [
    ("attrs-padding", lambda f: ["import", f["weights"], "--list", "--attrs",
                                 f"padding={EVIL}"]),
    ("attrs-strides", lambda f: ["import", f["weights"], "--list", "--attrs",
                                 f"strides={EVIL}"]),
    ("attrs-name", lambda f: ["import", f["weights"], "--list", "--attrs", f"{EVIL}=1"]),
    ("attrs-word", lambda f: ["import", f["weights"], "--list", "--attrs", EVIL]),
    ("attrs-weights-layout", lambda f: ["import", f["weights"], "--list", "--attrs",
                                        f"weights={EVIL}"]),
    ("weight-names-list", lambda f: ["import", f["evil_weights"], "--list"]),
    ("weight-names-layer", lambda f: ["import", f["evil_weights"], "--layer", EVIL, "-o",
                                      f["dir"] / "out1.gbc.json"]),
    ("unknown-layer", lambda f: ["import", f["weights"], "--layer", EVIL, "-o",
                                 f["dir"] / "out2.gbc.json"]),
    ("onnx-layer-names-list", lambda f: ["import", f["layers_onnx"], "--list"]),
    ("onnx-layer-import", lambda f: ["import", f["layers_onnx"], "--layer", EVIL, "-o",
                                     f["dir"] / "out3.gbc.json"]),
    ("onnx-layer-not-conv", lambda f: ["import", f["layers_onnx"], "--layer", f"relu{EVIL}",
                                       "-o", f["dir"] / "out4.gbc.json"]),
    ("onnx-all", lambda f: ["import", f["layers_onnx"], "--all", "-o", f["dir"] / "all"]),
    ("onnx-weights-names", lambda f: ["import", f["fed_onnx"], "--list", "--weights",
                                      f["fed_evil"]]),
    ("onnx-weights-path", lambda f: ["import", f["fed_onnx"], "--list", "--weights",
                                     f["dir"] / f"{EVIL}.npz"]),
    ("model-path", lambda f: ["import", f["dir"] / f"{EVIL}.npz", "--list"]),
    ("model-path-onnx", lambda f: ["import", f["dir"] / f"{EVIL}.onnx", "--list"]),
    ("output-path", lambda f: ["import", f["weights"], "--layer", "conv1", "-o",
                               f["dir"] / EVIL / "c.gbc.json"]),
    ("input-path", lambda f: ["import", f["weights"], "--layer", "conv1", "-o",
                              f["dir"] / "out5.gbc.json", "--input", f["dir"] / f"{EVIL}.npy"]),
    ("input-size", lambda f: ["import", f["weights"], "--list", "--input-size", EVIL]),
]


@pytest.mark.parametrize("case, args", IMPORT_CASES, ids=[c for c, _ in IMPORT_CASES])
def test_import_never_prints_a_raw_control_character(files, case, args):
    assert_safe(gradblocks(*args(files)))


CANVAS_CHANGES = {
    "title": {"title": EVIL},
    "title-rlo": {"title": "grad \u202e filter"},  # a valid title: the table shows it
    "id": {"id": EVIL},
    "padding": {"padding": EVIL},
    "npy-path": {"path": f"{EVIL}.npy"},
    "image-path": {"path": f"{EVIL}.png"},
    "title-rlo-problem": {"title": "grad \u202e filter", "padding": "nope"},
}


@pytest.mark.parametrize("command", ["check", "run"])
@pytest.mark.parametrize("change", list(CANVAS_CHANGES))
def test_check_and_run_of_a_hostile_canvas_never_print_a_raw_control_character(
        tmp_path, command, change):
    path = canvas_file(tmp_path, **CANVAS_CHANGES[change])
    assert_safe(gradblocks(command, path))


CANVAS_CASES = [
    ("check-missing-file", lambda d: ["check", d / f"{EVIL}.gbc.json"]),
    ("check-file-name", lambda d: ["check", canvas_file(d, f"{EVIL}.gbc.json")]),
    ("run-file-name", lambda d: ["run", canvas_file(d, f"{EVIL}.gbc.json")]),
    ("check-file-name-rlo-problem", lambda d: ["check", canvas_file(d, f"{EVIL}.gbc.json",
                                                                    padding="nope")]),
    ("run-out", lambda d: ["run", canvas_file(d), "--out", d / EVIL / "r.npz"]),
    ("run-out-ok", lambda d: ["run", canvas_file(d), "--out", d / f"{EVIL}.npz"]),
    ("export-output", lambda d: ["export", canvas_file(d), "-o", d / EVIL / "s.py"]),
    ("export-output-ok", lambda d: ["export", canvas_file(d), "-o", d / f"{EVIL}.py"]),
    ("memory-limit", lambda d: ["check", canvas_file(d), "--memory-limit-gib", EVIL]),
    ("explain-node", lambda d: ["explain", canvas_file(d), EVIL, "0,0,0,0"]),
    ("explain-port", lambda d: ["explain", canvas_file(d), f"grad_filter.{EVIL}", "0,0,0,0"]),
    ("explain-index", lambda d: ["explain", canvas_file(d), "grad_filter", EVIL]),
    ("explain-title", lambda d: ["explain", canvas_file(d, title="t\u202eu"), "grad_filter",
                                 "0,0,0,0"]),
    ("explain-limit", lambda d: ["explain", canvas_file(d), "grad_filter", "0,0,0,0",
                                 "--limit", EVIL]),
    ("geometry-node", lambda d: ["geometry", canvas_file(d), EVIL, "-o", d / "g.png"]),
    ("geometry-output", lambda d: ["geometry", canvas_file(d), "grad_filter", "-o",
                                   d / EVIL / "g.png"]),
    ("geometry-suffix", lambda d: ["geometry", canvas_file(d), "grad_filter", "-o",
                                   d / f"g.{EVIL}"]),
    ("geometry-frame", lambda d: ["geometry", canvas_file(d), "grad_filter", "-o",
                                  d / "g.gif", "--frame", EVIL]),
    ("run-failure-title", lambda d: ["run", _failing_canvas(d)]),
    ("geometry-title-written", lambda d: ["geometry", canvas_file(d, title="g\u202eh"),
                                          "grad_filter", "-o", d / f"{EVIL}.png"]),
    ("crosscheck-with", lambda d: ["crosscheck", canvas_file(d), "--with", EVIL]),
    ("crosscheck-python", lambda d: ["crosscheck", canvas_file(d), "--python", EVIL]),
    ("unrecognized-argument", lambda d: ["check", canvas_file(d), EVIL]),
]


@pytest.mark.parametrize("case, args", CANVAS_CASES, ids=[c for c, _ in CANVAS_CASES])
def test_canvas_commands_never_print_a_raw_control_character(tmp_path, case, args):
    assert_safe(gradblocks(*args(tmp_path)))


OTHER_CASES = [
    ("unknown-command", [f"chek{EVIL}"]),
    ("unknown-command-near", ["chek\u202e"]),
    ("unknown-option", ["check", f"--{EVIL}"]),
    ("help-topic", ["help", EVIL]),
    ("guide-topic", ["guide", EVIL]),
    ("guide-extra", ["guide", "cli", EVIL]),
    ("guide-extra-option", ["guide", "cli", f"--{EVIL}"]),
    ("verify-op", ["verify", "m:f", "--convention", "tf", "--op", EVIL]),
    ("verify-convention", ["verify", "m:f", "--convention", EVIL, "--op", "Conv2D"]),
    ("verify-target", ["verify", EVIL, "--convention", "tf", "--op", "Conv2D"]),
    ("verify-target-module", ["verify", f"{EVIL}:f", "--convention", "tf", "--op", "Conv2D"]),
    ("verify-dtype", ["verify", "m:f", "--convention", "tf", "--op", "Conv2D", "--dtype", EVIL]),
    ("verify-support", ["verify", "m:f", "--convention", "tf", "--op", "Conv2D", "--support",
                        EVIL]),
    ("verify-support-value", ["verify", "m:f", "--convention", "tf", "--op", "Conv2D",
                              "--support", f"padding={EVIL}"]),
    ("verify-cases", ["verify", "m:f", "--convention", "tf", "--op", "Conv2D", "--cases", EVIL]),
    ("verify-seed", ["verify", "m:f", "--convention", "tf", "--op", "Conv2D", "--seed", EVIL]),
    ("verify-timeout", ["verify", "m:f", "--convention", "tf", "--op", "Conv2D",
                        "--case-timeout", EVIL]),
    ("verify-path", ["verify", "m:f", "--convention", "tf", "--op", "Conv2D", "--path", EVIL]),
    ("verify-json", ["verify", "m:f", "--convention", "tf", "--op", "Conv2D", "--json",
                     f"{EVIL}/r.json"]),
    ("verify-repro", ["verify", "m:f", "--convention", "tf", "--op", "Conv2D", "--repro",
                      f"{EVIL}/r"]),
    ("verify-cmd", ["verify", "--cmd", EVIL, "--convention", "tf", "--op", "Conv2D"]),
    ("verify-cmd-path", ["verify", "--cmd", f"./{EVIL}", "--convention", "tf", "--op",
                         "Conv2D"]),
    ("verify-cmd-serve", ["verify", "--cmd-serve", f"'{EVIL}", "--convention", "tf", "--op",
                          "Conv2D"]),
    ("app-canvas", [f"{EVIL}.gbc.json"]),
]


@pytest.mark.parametrize("case, args", OTHER_CASES, ids=[c for c, _ in OTHER_CASES])
def test_other_commands_never_print_a_raw_control_character(tmp_path, case, args):
    assert_safe(gradblocks(*args, cwd=ROOT))


def test_the_escaped_forms_are_what_is_shown():
    """Escaping keeps the text readable: the user sees where each character was."""
    proc = gradblocks("guide", EVIL)
    text = proc.stderr.decode()
    assert proc.returncode == 2 and "a\\x1b[31mb\\x07c\\rd\\u202ee" in text, text
