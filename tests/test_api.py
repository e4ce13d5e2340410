"""The notebook API (engine.api, engine.new_canvas / engine.load): building in code, the CLI's
check report, results equal to `gradblocks run --out`, save/load, clear errors, escaped HTML,
pictures in the viewer's colours, and the User Guide's example (assets/guide/notebook.md) run
as written."""

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import engine
from engine import api
from engine.base.errors import InvalidArgumentError
from engine.graph.canvas_file import load_canvas
from engine.view.thumbnail import thumbnail
from tests.export_support import assert_same_result

ROOT = Path(__file__).resolve().parent.parent


def build() -> api.NotebookCanvas:
    c = engine.new_canvas()
    c.add("Tensor", id="x", shape=[1, 6, 6, 2], seed=3)
    c.add("IntVector", id="fs", values=[3, 3, 2, 4])
    c.add("Tensor", id="dy", shape=[1, 3, 3, 4], seed=4, title="upstream grad")
    c.add("Conv2DBackpropFilter", id="dw", strides=[1, 2, 2, 1])
    c.connect("x.output", "dw.input")
    c.connect("fs", "dw.filter_sizes")
    c.connect("dy.output", "dw.out_backprop")
    return c


def gradblocks(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "engine.cli", *args], capture_output=True,
                          text=True, check=False)


def test_round_trip_equals_the_cli(tmp_path):
    c = build()
    report = c.check()
    assert report.ok and report.summary() == "ok, 4 block(s)"
    path = c.save(tmp_path / "g.gbc.json")
    cli = gradblocks("check", str(path))
    assert cli.returncode == 0, cli.stderr
    table = cli.stdout.rsplit("\n", 2)[0]
    assert str(report) == f"{table}\nok, 4 block(s)"
    assert "upstream grad  Tensor                output  [1, 3, 3, 4]" in str(report)
    results = c.run()
    assert results["dw"].shape == (3, 3, 2, 4)
    assert results["dw"] is results["dw.output"]
    assert results["upstream grad"] is results["dy.output"]  # by title
    assert sorted(results) == ["dw.output", "dy.output", "fs.output", "x.output"]
    run = gradblocks("run", str(path), "--out", str(tmp_path / "r.npz"))
    assert run.returncode == 0, run.stderr
    saved = np.load(tmp_path / "r.npz")
    assert sorted(saved) == sorted(results.named)
    for key in saved:
        # the CLI and the API may take different kernel paths (compiled once loaded)
        assert_same_result(saved[key], results.named[key], key)
        assert results[key] is results.named[key]  # a stored name is a key too
    loaded = engine.load(path)
    assert loaded.canvas == c.canvas and load_canvas(path) == c.canvas
    again = loaded.run()
    for key in results:
        np.testing.assert_array_equal(again[key], results[key])


def test_mistakes_are_clear_errors_naming_what_is_wrong():
    c = build()
    with pytest.raises(InvalidArgumentError, match=r"unknown block type 'Conv2DBackpropFiltr' "
                                                   r"\(known: .*Conv2DBackpropFilter"):
        c.add("Conv2DBackpropFiltr")
    with pytest.raises(InvalidArgumentError, match=r"block 'g' \(Conv2DBackpropInput\) "
                                                   r"attribute strides: strides must have 4"):
        c.add("Conv2DBackpropInput", id="g", strides=[1, 2])
    with pytest.raises(InvalidArgumentError, match="has no attribute 'stride'"):
        c.add("Conv2DBackpropInput", id="g", stride=[1, 2, 2, 1])
    assert "g" not in c.canvas.nodes  # nothing half-added
    with pytest.raises(InvalidArgumentError) as err:
        c.connect("x.outptu", "dw.input")
    assert str(err.value) == ("'x.outptu': block 'x' (Tensor) has no output port 'outptu'; "
                              "its output ports: output")
    with pytest.raises(InvalidArgumentError, match="its input ports: input, filter_sizes, "
                                                   "out_backprop"):
        c.connect("x", "dw.inptu")
    with pytest.raises(InvalidArgumentError, match="name the input port of block 'dw'"):
        c.connect("x", "dw")
    with pytest.raises(InvalidArgumentError, match=r"no block 'xx' on the canvas \(its "
                                                   r"blocks: x, fs, dy, dw\)"):
        c.connect("xx.output", "dw.input")
    with pytest.raises(InvalidArgumentError, match="block 'dw' .* attribute padding"):
        c.set("dw", padding="SOME")
    results = c.run()
    with pytest.raises(KeyError, match="no result 'dx': the outputs are x.output"):
        results["dx"]


def test_problems_are_reported_by_check_and_raised_by_run():
    c = build()
    c.set("dw", strides=[2, 1, 1, 1])
    report = c.check()
    assert not report.ok and report.summary() == "1 problem"
    assert str(report).startswith("1 problem:\n  dw.strides: strides [2, 1, 1, 1]")
    with pytest.raises(InvalidArgumentError, match=r"cannot run: 1 problem:\n  dw.strides"):
        c.run()


HOSTILE = "<script>alert('x')</script> & <b>"


def test_html_escapes_hostile_titles_and_messages():
    c = build()
    c.canvas.set_title("x", HOSTILE)
    c.add("Output", id="out", name=HOSTILE.replace("/", "|"))
    c.connect("dw", "out.input")
    for html in (c.check()._repr_html_(), c.run()._repr_html_()):
        assert "<script>" not in html and "<b>" not in html
        assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt; &amp; &lt;b&gt;" in html
        assert html.startswith("<table>")
    c.set("dw", strides=[2, 1, 1, 1])
    c.canvas.set_title("dw", "<i>dw</i>")
    html = c.check()._repr_html_()
    assert "<i>" not in html and "&lt;i&gt;dw&lt;/i&gt;.strides: strides [2, 1, 1, 1]" in html


def test_picture_has_the_thumbnail_colours_at_its_scale():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 5, 7, 2)).astype(np.float32)
    image = api.picture(x, ("N", "H", "W", "C"))
    assert isinstance(image, Image.Image) and image.mode == "RGB"
    want = thumbnail(x, ("N", "H", "W", "C"), api.PICTURE_SIZE)
    assert image.size == (want.shape[1], want.shape[0]) == (511, 365)  # 73 px cells
    np.testing.assert_array_equal(np.asarray(image), want[..., :3])
    w = rng.standard_normal((3, 3, 2, 4))
    montage = np.asarray(api.picture(w, ("kh", "kw", "in", "out")))
    want = thumbnail(w, ("kh", "kw", "in", "out"), api.PICTURE_SIZE)
    opaque = want[..., 3] == 255
    assert 0 < opaque.sum() < opaque.size  # tiles and separators
    np.testing.assert_array_equal(montage[opaque], want[opaque][:, :3])
    assert (montage[~opaque] == api.PICTURE_BACKGROUND).all()
    unnamed = thumbnail(x, None, api.PICTURE_SIZE)  # the last two axes, as the viewer's
    np.testing.assert_array_equal(np.asarray(api.picture(x)), unnamed[..., :3])
    # a result keeps its axes: the filter gradient is a montage, as in the viewer
    results = build().run()
    dw = results["dw"]
    np.testing.assert_array_equal(
        np.asarray(results.picture("dw")),
        np.asarray(api.picture(dw, ("kh", "kw", "in", "out"))))
    with pytest.raises(InvalidArgumentError, match="empty tensor"):
        api.picture(np.zeros((0, 3)))


def test_import_engine_stays_light():
    code = ("import sys, engine; assert 'engine.api' not in sys.modules; "
            "assert 'PIL' not in sys.modules; c = engine.new_canvas(); "
            "assert 'engine.api' in sys.modules; "
            "assert not [m for m in sys.modules if m.startswith(('PySide6', 'pyqtgraph'))]; "
            "print(type(c).__name__)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "NotebookCanvas\n"
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        engine.nope  # noqa: B018


def guide_example() -> tuple[str, str]:
    """The notebook page's code block and the output block after it (its only two blocks)."""
    page = (ROOT / "assets" / "guide" / "notebook.md").read_text(encoding="utf-8")
    code, shown = re.findall(r"```(?:python)?\n(.*?)```", page, re.DOTALL)
    return code, shown


def test_guide_example_runs_as_shown(tmp_path, monkeypatch, capsys):
    code, shown = guide_example()
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "notebook.md", "exec"), {})  # noqa: S102 - our own guide's example
    assert capsys.readouterr().out == shown
    assert (tmp_path / "grad.gbc.json").exists() and (tmp_path / "ramp.png").exists()


def test_problem_counts_are_words_not_parentheses():
    """One rule (engine.base.names.counted) for every count of problems: "1 problem",
    "2 problems", never "problem(s)"."""
    from engine.graph.canvas import CanvasError

    assert str(CanvasError([("a.b", "bad")], "f.gbc.json")).startswith(
        "f.gbc.json: 1 problem in the canvas:\n  a.b: bad")
    assert str(CanvasError([("a", "x"), ("b", "y")])).startswith("2 problems in the canvas:")
