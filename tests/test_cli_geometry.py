"""``gradblocks geometry``, run as a user runs it (a subprocess): PNG stills, GIF animations,
the overlap map and one-line errors."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from engine.explain.geometry_render import CURRENT, TAP_ON, TOUCHED
from engine.graph.canvas_file import load_canvas, save_canvas

ROOT = Path(__file__).parents[1]
EXAMPLES = ROOT / "assets" / "examples"
BACKPROP_FILTER = EXAMPLES / "conv2d_backprop_filter.gbc.json"  # input 6x6, filter 3x3, s 2


def geometry(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "engine.cli", "geometry", *map(str, args)],
                          capture_output=True, text=True, check=False, cwd=ROOT, timeout=300)


def pixels(path) -> np.ndarray:
    with Image.open(path) as im:
        return np.asarray(im.convert("RGB"))


def count(image: np.ndarray, colour) -> int:
    return int(np.all(image[:-40] == colour, axis=-1).sum())  # above the legend


def test_gif_has_one_frame_per_filter_tap(tmp_path):
    out = tmp_path / "dw.gif"
    proc = geometry(BACKPROP_FILTER, "grad_filter", "-o", out)
    assert proc.returncode == 0, proc.stderr
    assert "9 frame(s)" in proc.stdout
    with Image.open(out) as im:
        assert im.format == "GIF" and im.n_frames == 9 and im.is_animated
        assert im.info.get("loop") == 0 and im.info.get("duration", 0) >= 100
        size = im.size
        frames = []
        for k in range(im.n_frames):
            im.seek(k)
            frames.append(np.asarray(im.convert("RGB")))
    assert size[0] >= 720
    # tap (0, 0) with SAME top 0 / left 0 on 6x6, stride 2: 3x3 input elements pair 3x3 dy
    cell_px = count(frames[0], TOUCHED) / 9
    assert cell_px > 0
    # tap (2, 2) reads row/col 6 = padding for the last out_backprop row/col: 2x2 real pairs
    assert count(frames[8], TOUCHED) == pytest.approx(4 * cell_px)
    assert count(frames[0], TAP_ON) == count(frames[8], TAP_ON) > 0
    assert not np.array_equal(frames[0], frames[8])


def test_png_still_of_a_chosen_frame_and_the_overlap_map(tmp_path):
    first, other, overlap = tmp_path / "a.png", tmp_path / "b.png", tmp_path / "c.png"
    assert geometry(BACKPROP_FILTER, "grad_filter", "-o", first).returncode == 0
    proc = geometry(BACKPROP_FILTER, "Conv2DBackpropFilter", "-o", other, "--frame", "8")
    assert proc.returncode == 0, proc.stderr
    proc = geometry(BACKPROP_FILTER, "grad_filter", "-o", overlap, "--overlap")
    assert proc.returncode == 0, proc.stderr
    a, b, c = pixels(first), pixels(other), pixels(overlap)
    with Image.open(first) as im:
        assert im.format == "PNG" and getattr(im, "n_frames", 1) == 1
    assert count(a, TOUCHED) == pytest.approx(9 / 4 * count(b, TOUCHED))
    assert count(c, TOUCHED) == 0 and count(c, CURRENT) == 0  # the map, not a frame


def test_forward_gif_over_output_positions(tmp_path):
    out = tmp_path / "fwd.gif"
    proc = geometry(EXAMPLES / "training_step.gbc.json", "forward", "-o", out)
    assert proc.returncode == 0, proc.stderr
    frames, of = proc.stdout.split(": ")[1].split(" frame(s) of ")
    with Image.open(out) as im:
        assert im.n_frames == int(frames) == int(of) > 1


@pytest.mark.parametrize("args, message", [
    (["nope", "-o", "{tmp}/x.png"], "no block 'nope'"),
    (["input", "-o", "{tmp}/x.png"], "is a Tensor block, not a conv block"),
    (["grad_filter", "-o", "{tmp}/x.jpg"], "must be .png (a still) or .gif"),
    (["grad_filter", "-o", "{tmp}/missing/x.png"], "its folder does not exist"),
    (["grad_filter", "-o", "{tmp}"], "is a folder"),
    (["grad_filter", "-o", "{tmp}/x.gif", "--frame", "1"], "are for a .png still"),
    (["grad_filter", "-o", "{tmp}/x.png", "--frame", "9"], "has 9 frame(s), 0 to 8"),
    (["grad_filter", "-o", "{tmp}/x.png", "--frame", "-1"], "-1 is negative"),
])
def test_errors_are_one_line_and_exit_2(tmp_path, args, message):
    folder = tmp_path / "out.png"
    folder.mkdir()
    args = [a.replace("{tmp}", str(folder if a == "{tmp}" else tmp_path)) for a in args]
    proc = geometry(BACKPROP_FILTER, *args)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert not (tmp_path / "x.png").exists() and not (tmp_path / "x.gif").exists()


def test_invalid_canvas_is_exit_2_without_writing(tmp_path):
    canvas = load_canvas(BACKPROP_FILTER)
    canvas.set_attr("grad_filter", "strides", [1, 2, 2, 2])
    path = tmp_path / "bad.gbc.json"
    save_canvas(canvas, path)
    proc = geometry(path, "grad_filter", "-o", tmp_path / "x.png")
    assert proc.returncode == 2
    assert "strides" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "x.png").exists()


def test_unwritable_file_is_exit_1_and_keeps_the_old_file(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    old = folder / "x.png"
    old.write_bytes(b"old")
    folder.chmod(0o500)
    try:
        proc = geometry(BACKPROP_FILTER, "grad_filter", "-o", old)
    finally:
        folder.chmod(0o700)
    if proc.returncode == 0:
        pytest.skip("running as root: the folder is writable anyway")
    assert proc.returncode == 1 and "cannot write" in proc.stderr
    assert old.read_bytes() == b"old"


def test_an_empty_output_has_no_frames_but_an_overlap_map(tmp_path):
    """No out_backprop rows (SAME on 0 input rows): no positions to step through."""
    canvas = load_canvas(EXAMPLES / "conv2d_backprop_input.gbc.json")
    canvas.set_attr("grad_input", "padding", "SAME")
    canvas.set_attr("input_sizes", "values", [2, 0, 7, 3])
    canvas.set_attr("out_backprop", "shape", [2, 0, 4, 5])
    path = tmp_path / "empty.gbc.json"
    save_canvas(canvas, path)
    proc = geometry(path, "grad_input", "-o", tmp_path / "x.png")
    assert proc.returncode == 2 and "has no frames (no output positions)" in proc.stderr
    proc = geometry(path, "grad_input", "-o", tmp_path / "x.png", "--overlap")
    assert proc.returncode == 0, proc.stderr
    proc = geometry(path, "grad_input", "-o", tmp_path / "x.gif")
    assert proc.returncode == 0, proc.stderr
    with Image.open(tmp_path / "x.gif") as im:
        assert getattr(im, "n_frames", 1) == 1  # the overlap map alone
