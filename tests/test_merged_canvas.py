"""Several layers of a model in one canvas, a frame per layer (engine.graph.merged_canvas),
headless: the files written, `gradblocks check` on them, each frame holding exactly its layer's
blocks, each layer's results the same arrays as its single import's (and its forward the model's
own arithmetic in float64), names from the file escaped and made into distinct ids, a re-write
removing only its own old arrays, and refusals that write nothing."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import engine
from engine.graph.canvas_file import load_canvas
from engine.graph.layer_canvas import read_model, write_layer_canvas
from engine.graph.merged_canvas import BLOCK_BOX, SEPARATOR, write_merged_canvas
from engine.io.models.model_import import ModelImportError
from tests import keras_files as kf
from tests import model_files as mf

pytest.importorskip("onnx")
pytest.importorskip("h5py")

ROOT = Path(__file__).parents[1]
#: float32 conv against the float64 definition (sums of at most a few hundred products).
FORWARD_TOL = 1e-4
RESULTS = ("forward", "grad_filter", "grad_input")


def gb(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "engine.cli", *map(str, args)], check=False,
                          capture_output=True, text=True, cwd=ROOT, timeout=300)


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("models")
    return {"onnx": mf.write_onnx(folder / "small.onnx"), "h5": kf.write_h5(folder / "f.h5")}


def layers_of(path: Path, *names: str):
    found = read_model(str(path))
    return [found.find(n, str(path)) for n in names] if names else found.layers


def inside(box, rect) -> bool:
    x, y, w, h = box
    fx, fy, fw, fh = rect
    return fx <= x and fy <= y and x + w <= fx + fw and y + h <= fy + fh


def meets(box, rect) -> bool:
    x, y, w, h = box
    fx, fy, fw, fh = rect
    return x < fx + fw and fx < x + w and y < fy + fh and fy < y + h


def test_merged_canvas_checks_frames_hold_their_layers_and_results_match(models, tmp_path):
    names = ("conv_grouped", "conv_dw_lower", "conv_valid")
    layers = layers_of(models["onnx"], *names)
    out = tmp_path / "merged.gbc.json"
    done = write_merged_canvas(layers, str(out), protected=(str(models["onnx"]),))
    # files: the arrays named <stem>.<block id>.<hash12>.npy beside the canvas, the canvas last
    assert done.files[-1] == str(out)
    assert sorted(Path(f).name for f in done.files[:-1]) == sorted(
        p.name for p in tmp_path.glob("merged.*.npy"))
    assert {Path(f).name.split(".")[1] for f in done.files[:-1]} == {
        f"{n}{SEPARATOR}filter" for n in names} | {"conv_grouped__bias"}
    check = gb("check", out)
    assert check.returncode == 0, check.stdout + check.stderr
    assert check.stdout.splitlines()[-1].endswith(f"ok, {len(load_canvas(out).nodes)} block(s)")

    canvas = load_canvas(out)
    assert [f.title for f in canvas.frames.values()] == [
        "conv_grouped (grouped)", "conv_dw_lower (depthwise)", "conv_valid (Conv2D)"]
    merged = engine.load(out).run()
    for layer, placed in zip(layers, done.layers, strict=True):
        single_path = tmp_path / f"single_{layer.name}.gbc.json"
        single = write_layer_canvas(layer, str(single_path))
        # the same blocks, types, attributes and wiring as the layer's own import
        assert set(placed.ids) == set(single.canvas.nodes) | set(single.canvas.notes)
        for import_id, node in single.canvas.nodes.items():
            twin = canvas.nodes[placed.ids[import_id]]
            if node.attrs.get("fill") != "file":
                assert (twin.type, twin.attrs) == (node.type, node.attrs)
        assert {(placed.ids[e.src[0]], e.src[1], placed.ids[e.dst[0]], e.dst[1])
                for e in single.canvas.edges} == {
            (*e.src, *e.dst) for e in canvas.edges if e.src[0].startswith(layer.name + "__")}
        # the frame holds exactly this layer's blocks (at the app's largest block size)
        f = canvas.frames[placed.frame]
        rect = (*f.pos, *f.size)
        for node in canvas.nodes.values():
            box = (*node.pos, *BLOCK_BOX)
            mine = node.id in placed.ids.values()
            assert inside(box, rect) if mine else not meets(box, rect), (node.id, f.id)
        # its results: the same arrays as the single import's
        alone = engine.load(single_path).run()
        for result in RESULTS:
            np.testing.assert_array_equal(merged[placed.ids[result]], alone[result])
        x = merged[placed.ids["input"]]
        np.testing.assert_allclose(merged[placed.ids["forward"]],
                                   mf.onnx_forward(layer.name, x), rtol=FORWARD_TOL,
                                   atol=FORWARD_TOL)


def test_keras_layers_with_notes_transposed_and_nhwc(models, tmp_path):
    """Every conv layer of the functional Keras file (depthwise, separable, transposed
    convs, activation notes), batch 2, NCHW: one canvas that `check` accepts, every layer's
    results those of its single import at the same batch and layout."""
    layers = layers_of(models["h5"])
    out = tmp_path / "k.gbc.json"
    done = write_merged_canvas(layers, str(out), batch=2, layout="NCHW")
    assert gb("check", out).returncode == 0
    canvas = load_canvas(out)
    assert len(canvas.frames) == len(layers) == 6
    assert {n.id for n in canvas.notes.values()} == {
        "c1__note_1", "dw__note_1", "sep__note_1", "sep__note_2", "tconv__note_1",
        "tconv_valid__note_1"}
    assert "sep__pointwise_grad_input" in canvas.nodes
    merged = engine.load(out).run()
    for layer, placed in zip(layers, done.layers, strict=True):
        assert canvas.nodes[placed.ids["input"]].attrs["shape"][:2] == [2, layer.in_channels]
        path = tmp_path / "one.gbc.json"
        write_layer_canvas(layer, str(path), batch=2, layout="NCHW")
        alone = engine.load(path).run()
        for result in RESULTS:
            np.testing.assert_array_equal(merged[placed.ids[result]], alone[result])


def test_names_from_the_file_make_escaped_titles_and_distinct_ids(models, tmp_path):
    base = layers_of(models["onnx"], "conv_upper")[0]
    hostile = [dataclasses.replace(base, name=n)
               for n in ("a/b", "a.b", "a_b", "\x1b[31mred\x07", "x" * 300)]
    out = tmp_path / "h.gbc.json"
    done = write_merged_canvas(hostile, str(out))
    prefixes = [p.frame[: -len(SEPARATOR + "frame")] for p in done.layers]
    assert prefixes == ["a_b", "a_b_2", "a_b_3", "_x1b_31mred_x07", "x" * 37 + "___"]
    canvas = load_canvas(out)
    titles = [f.title for f in canvas.frames.values()]
    assert titles[3] == "\\x1b[31mred\\x07 (Conv2D)"
    assert titles[4] == "x" * 97 + "... (Conv2D)"
    assert all(t.isprintable() for t in titles)
    assert gb("check", out).returncode == 0


def test_rewrite_removes_only_its_own_old_arrays(models, tmp_path):
    layers = layers_of(models["onnx"], "conv_grouped", "conv_upper", "conv_valid")
    out = tmp_path / "m.gbc.json"
    write_merged_canvas(layers, str(out))
    mine = tmp_path / "m.conv_valid__filter.notmine.npy"
    mine.write_bytes(b"user data")
    first = {p.name for p in tmp_path.glob("m.*.npy")}
    write_merged_canvas(layers[:2], str(out))
    left = {p.name for p in tmp_path.glob("m.*.npy")}
    gone = first - left
    assert len(gone) == 1 and next(iter(gone)).startswith("m.conv_valid__filter.")
    assert mine.read_bytes() == b"user data"
    assert gb("check", out).returncode == 0


def test_refusals_write_nothing(models, tmp_path):
    onnx = str(models["onnx"])
    layers = layers_of(models["onnx"], "conv_grouped", "conv_valid")
    with pytest.raises(ModelImportError, match="no conv layer chosen"):
        write_merged_canvas([], str(tmp_path / "e.gbc.json"))
    unsized = dataclasses.replace(layers[1], input_hw=None)
    with pytest.raises(ModelImportError, match="layer 'conv_valid': the model does not say"):
        write_merged_canvas([layers[0], unsized], str(tmp_path / "u.gbc.json"))
    with pytest.raises(ModelImportError, match="the model being read"):
        write_merged_canvas(layers, onnx, protected=(onnx,))
    (tmp_path / "dir.gbc.json").mkdir()
    with pytest.raises(ModelImportError, match="folder"):
        write_merged_canvas(layers, str(tmp_path / "dir.gbc.json"))
    huge = dataclasses.replace(layers[0], input_hw=(40_000, 40_000))
    with pytest.raises(ModelImportError, match="layer 'conv_grouped'"):
        write_merged_canvas([huge, layers[1]], str(tmp_path / "big.gbc.json"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dir.gbc.json"]
    assert Path(onnx).read_bytes()[:2] != b"{\n"  # the model is untouched
