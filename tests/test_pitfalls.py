"""The pitfalls gallery: the committed canvases are the generator's, each one run with
``gradblocks run`` shows what its note says, it ships in the wheel and opens from
File > Examples > Pitfalls."""

from __future__ import annotations

import fnmatch
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
from PySide6 import QtCore
from PySide6.QtTest import QTest

from engine.graph.canvas_file import load_canvas
from tests.pitfall_canvases import PITFALLS, PITFALLS_DIR, rendered

ROOT = Path(__file__).resolve().parents[1]


def test_the_committed_gallery_is_what_the_generator_builds():
    on_disk = {p.name: p.read_text(encoding="utf-8") for p in PITFALLS_DIR.glob("*.gbc.json")}
    assert on_disk == rendered(), "run: python -m tests.pitfall_canvases"


def run(stem: str, tmp_path: Path) -> tuple[dict[str, str], dict[str, np.ndarray]]:
    """``gradblocks run --out`` on a gallery canvas: {block title: verdict} from the table's
    verdict column, and the stored outputs."""
    out = tmp_path / "out.npz"
    proc = subprocess.run([sys.executable, "-m", "engine.cli", "run", "--out", str(out),
                           str(PITFALLS_DIR / f"{stem}.gbc.json")],
                          capture_output=True, text=True, check=False, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    header = lines[0]
    col = header.index("verdict")
    verdicts = {}
    for line in lines[1:]:
        mark = line[col:col + 7].strip()
        if mark in ("PASS", "FAIL"):
            verdicts[line[:header.index("type")].strip()] = mark
    with np.load(out) as data:
        return verdicts, {k: data[k] for k in data.files}


def test_depthwise_dilations_the_dilated_gradients_are_right_and_tf_s_are_not(tmp_path):
    verdicts, values = run("depthwise_dilations", tmp_path)
    assert verdicts == {"GradCheck dW dilated": "PASS", "GradCheck dW TF": "FAIL",
                        "dW: dilated vs TF": "FAIL",
                        "GradCheck dX dilated": "PASS", "GradCheck dX TF": "FAIL",
                        "dX: dilated vs TF": "FAIL"}
    assert values["GradCheck dW TF.max_rel_error"] > 0.1
    assert values["GradCheck dX TF.max_rel_error"] > 0.1
    assert values["dW dilated"].shape == values["dW as TF returns it"].shape == (3, 3, 2, 1)
    assert values["dX dilated"].shape == values["dX as TF returns it"].shape == (1, 8, 8, 2)


def test_same_padding_pad_after_is_tf_s_and_pad_before_differs(tmp_path):
    verdicts, values = run("same_padding_odd_pad", tmp_path)
    assert verdicts == {"SAME is pad after": "PASS", "after vs before": "FAIL"}
    assert values["after vs before.max_rel_error"] > 0.1


def test_both_input_sizes_fit_out_backprop_and_each_gradient_checks(tmp_path):
    verdicts, values = run("ambiguous_input_sizes", tmp_path)
    assert verdicts == {"GradCheck 7x7": "PASS", "GradCheck 8x8": "PASS"}
    dx7, dx8 = values["dX 7x7"], values["dX 8x8"]
    assert dx7.shape == (1, 7, 7, 2) and dx8.shape == (1, 8, 8, 2)
    # 7x7 pads one row and column on top/left, 8x8 none: dX7[1:] is not dX8[:6]
    assert not np.allclose(dx7[:, :6, :6], dx8[:, :6, :6])


def test_half_precision_errors_grow_as_the_mantissa_shrinks(tmp_path):
    verdicts, values = run("half_precision", tmp_path)
    assert verdicts == {"GradCheck float32": "PASS", "GradCheck bfloat16": "PASS",
                        "GradCheck float16": "PASS"}
    rel = {d: float(values[f"GradCheck {d}.max_rel_error"])
           for d in ("float32", "bfloat16", "float16")}
    assert rel["float32"] < 1e-6                 # "about 1e-7"
    assert 1e-4 < rel["float16"] < 1e-3          # "a few 1e-4"
    assert 1e-3 < rel["bfloat16"] < 1e-2         # "a few 1e-3"
    assert values["dW float16"].dtype == np.float16


def test_checkerboard_of_one_two_four_for_a_3x3_stride_2_kernel(tmp_path):
    verdicts, values = run("checkerboard_stride", tmp_path)
    assert verdicts == {"GradCheck 3x3 stride 2": "PASS"}
    dx3 = values["dX 3x3 stride 2"][0, :, :, 0]
    inner = dx3[2:14, 2:14]
    assert set(np.unique(inner)) == {1.0, 2.0, 4.0}
    assert inner[0, 0] == 4 and inner[0, 1] == 2 and inner[1, 1] == 1  # alternating
    dx4 = values["dX 4x4 stride 2"][0, :, :, 0]
    assert set(np.unique(dx4[1:15, 1:15])) == {4.0}  # divisible kernel: flat inside


def test_nhwc_and_nchw_give_the_same_gradients(tmp_path):
    verdicts, values = run("nhwc_vs_nchw", tmp_path)
    assert verdicts == {"dW: NHWC vs NCHW": "PASS", "dX: NHWC vs NCHW": "PASS"}
    assert values["dW: NHWC vs NCHW.max_abs_error"] == 0


def test_every_gallery_canvas_has_a_note_frames_and_a_check():
    assert len(PITFALLS) == 6
    for stem in PITFALLS:
        canvas = load_canvas(PITFALLS_DIR / f"{stem}.gbc.json")
        (note,) = canvas.notes.values()
        assert note.pos == (0.0, 0.0) and "F5" in note.text, stem
        assert canvas.frames, stem
        assert {"Compare", "GradCheck"} & {n.type for n in canvas.nodes.values()}, stem


def _overlap(a, b) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def test_gallery_blocks_do_not_overlap_and_sit_inside_a_frame(window):
    """The layout on the real canvas view: every block's item inside some frame, no two
    blocks overlapping, the note above everything else."""
    for stem in PITFALLS:
        window.files.open_path(PITFALLS_DIR / f"{stem}.gbc.json", as_example=True)
        canvas = window.doc.canvas
        rects = {}
        for cid in canvas.nodes:
            r = window.adapter.node(cid).view.sceneBoundingRect()
            rects[cid] = (r.left(), r.top(), r.right(), r.bottom())
        frames = [(f.pos[0], f.pos[1], f.pos[0] + f.size[0], f.pos[1] + f.size[1])
                  for f in canvas.frames.values()]
        (note,) = canvas.notes.values()
        for cid, r in rects.items():
            assert any(f[0] <= r[0] and f[1] <= r[1] and r[2] <= f[2] and r[3] <= f[3]
                       for f in frames), (stem, cid, r)
            assert r[1] > note.pos[1] + note.size[1], (stem, cid)
        ids = sorted(rects)
        for i, a in enumerate(ids):
            for b in ids[i + 1:]:
                assert not _overlap(rects[a], rects[b]), (stem, a, b)


def test_the_gallery_ships_in_the_wheel():
    """Every file under assets/examples matches a package-data pattern of assets.examples."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = config["tool"]["setuptools"]["package-data"]["assets.examples"]
    base = ROOT / "assets" / "examples"
    shipped = [p.relative_to(base).as_posix() for p in base.rglob("*.gbc.json")]
    assert any(s.startswith("pitfalls/") for s in shipped)
    for name in shipped:
        assert any(fnmatch.fnmatch(name, pat) and name.count("/") == pat.count("/")
                   for pat in patterns), name


def _click(menu, action) -> None:
    QTest.mouseClick(menu, QtCore.Qt.LeftButton, pos=menu.actionGeometry(action).center())


def test_file_examples_pitfalls_opens_a_gallery_canvas(qtbot, window):
    file_menu = window.examples_menu.menuAction().associatedObjects()[0]
    file_menu.popup(window.mapToGlobal(QtCore.QPoint(0, 0)))
    qtbot.waitUntil(file_menu.isVisible)
    _click(file_menu, window.examples_menu.menuAction())
    qtbot.waitUntil(window.examples_menu.isVisible)
    _click(window.examples_menu, window.pitfalls_menu.menuAction())
    qtbot.waitUntil(window.pitfalls_menu.isVisible)
    names = [a.text() for a in window.pitfalls_menu.actions()]
    assert names == sorted(PITFALLS)
    target = next(a for a in window.pitfalls_menu.actions() if a.text() == "same_padding_odd_pad")
    _click(window.pitfalls_menu, target)
    qtbot.waitUntil(lambda: "after_vs_before" in window.doc.canvas.nodes)
    path = PITFALLS_DIR / "same_padding_odd_pad.gbc.json"
    assert window.doc.canvas.to_json() == load_canvas(path).to_json()
    assert window.session.plan.errors == {}
    assert "(example)" in window.windowTitle() and window.doc.path is None
    (note,) = window.doc.canvas.notes.values()
    assert "SAME_LOWER" in note.text
    shown = window.adapter.item(note.id)
    assert shown.view.isVisible() and shown.view.scene() is window.adapter.viewer.scene()
