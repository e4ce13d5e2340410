"""PNG/JPEG images as Tensor inputs (engine.io.image_source, Tensor fill=image): values equal
Pillow's own conversions, the shape is known from the header before running (EXIF rotation
included), bad files are clear errors on ``path``; check/run/export through the CLI agree."""

import io
import json
import os
import struct
import subprocess
import sys
import tracemalloc
import warnings
import zlib
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageOps

from engine.base.errors import InvalidArgumentError
from engine.graph.canvas import Canvas
from engine.graph.canvas_file import save_canvas
from engine.graph.compiler import compile_canvas
from engine.graph.executor import Executor
from engine.io import image_source
from tests.export_support import assert_same_result

RGB = (np.arange(4 * 5 * 3).reshape(4, 5, 3) * 17 % 256).astype(np.uint8)  # H=4, W=5


def write_png(path, array=RGB, mode=None):
    Image.fromarray(array, mode).save(path)
    return path


def png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png_header_only(width: int, height: int) -> bytes:
    """A PNG whose IHDR claims ``width x height`` RGB pixels and whose data is empty."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", ihdr)
            + png_chunk(b"IDAT", zlib.compress(b"")) + png_chunk(b"IEND", b""))


def image_canvas(path, **attrs) -> Canvas:
    c = Canvas()
    c.add_node("Tensor", attrs={"fill": "image", "path": str(path), **attrs}, id="x")
    return c


def run_image(path, **attrs) -> np.ndarray:
    plan = compile_canvas(image_canvas(path, **attrs))
    assert plan.ok, plan.errors
    result = Executor().run(plan)
    assert not result.errors, result.errors
    return result.outputs[("x", "output")]


def check_error(path, **attrs) -> str:
    plan = compile_canvas(image_canvas(path, **attrs))
    [err] = plan.errors["x"]
    assert err.attr == "path"
    return err.message


@pytest.mark.parametrize("color, mode", [("rgb", "RGB"), ("gray", "L")])
@pytest.mark.parametrize("scale", ["unit", "byte"])
def test_values_equal_pillows_conversion(tmp_path, color, mode, scale):
    path = write_png(tmp_path / "a.png")
    want = np.asarray(Image.open(path).convert(mode), np.float64).reshape(1, 4, 5, -1)
    want = want / 255 if scale == "unit" else want
    got = run_image(path, color=color, scale=scale)
    assert got.dtype == np.float32 and got.shape == (1, 4, 5, 3 if color == "rgb" else 1)
    np.testing.assert_array_equal(got, want.astype(np.float32))
    if color == "gray":  # ITU-R 601-2 luma, as Pillow rounds it
        luma = RGB @ np.array([299, 587, 114]) / 1000
        assert np.abs(got[0, :, :, 0] * (255 if scale == "unit" else 1) - luma).max() <= 0.51


def test_nchw_shape_and_the_dtype_attribute(tmp_path):
    path = write_png(tmp_path / "a.png")
    plan = compile_canvas(image_canvas(path, data_format="NCHW", dtype="float64"))
    assert plan.specs[("x", "output")].shape == (1, 3, 4, 5)
    assert plan.specs[("x", "output")].axes == ("N", "C", "H", "W")  # the viewer shows H x W
    assert compile_canvas(image_canvas(path)).specs[("x", "output")].axes == tuple("NHWC")
    assert plan.specs[("x", "output")].dtype == "float64"
    got = run_image(path, data_format="NCHW", dtype="float64")
    nhwc = run_image(path, dtype="float64")
    assert got.dtype == np.float64 and got.flags.c_contiguous
    np.testing.assert_array_equal(got, nhwc.transpose(0, 3, 1, 2))


@pytest.mark.parametrize("orientation, shape", [(1, (1, 4, 5, 3)), (3, (1, 4, 5, 3)),
                                                 (6, (1, 5, 4, 3)), (8, (1, 5, 4, 3))])
def test_exif_rotated_jpeg_shape_from_header_and_values(tmp_path, orientation, shape):
    path = tmp_path / "r.jpg"
    exif = Image.Exif()
    exif[0x0112] = orientation
    Image.fromarray(RGB).save(path, quality=95, exif=exif.tobytes())
    header = image_source.read_header(str(path))
    assert header.orientation == orientation
    assert compile_canvas(image_canvas(path)).specs[("x", "output")].shape == shape
    want = np.asarray(ImageOps.exif_transpose(Image.open(path)).convert("RGB")) / 255
    np.testing.assert_array_equal(run_image(path), want[None].astype(np.float32))


def test_exif_orientation_of_a_png_comes_from_its_exif_chunk(tmp_path):
    path = tmp_path / "r.png"
    exif = Image.Exif()
    exif[0x0112] = 6
    Image.fromarray(RGB).save(path, exif=exif.tobytes())
    assert compile_canvas(image_canvas(path)).specs[("x", "output")].shape == (1, 5, 4, 3)
    want = np.asarray(ImageOps.exif_transpose(Image.open(path)), np.float32)
    np.testing.assert_array_equal(run_image(path, scale="byte")[0], want)


def test_rgba_alpha_is_dropped(tmp_path):
    rgba = np.dstack([RGB, np.full((4, 5), 7, np.uint8)])
    path = write_png(tmp_path / "a.png", rgba)
    got = run_image(path, scale="byte")
    np.testing.assert_array_equal(got[0], RGB.astype(np.float32))
    np.testing.assert_array_equal(
        run_image(path, color="gray", scale="byte")[0, :, :, 0],
        np.asarray(Image.open(path).convert("L")))


def test_palette_png_is_looked_up(tmp_path):
    path = tmp_path / "p.png"
    Image.fromarray(RGB).convert("P", palette=Image.Palette.ADAPTIVE, colors=8).save(path)
    assert Image.open(path).mode == "P"
    want = np.asarray(Image.open(path).convert("RGB"), np.float32)
    np.testing.assert_array_equal(run_image(path, scale="byte")[0], want)


def test_sixteen_bit_gray_png_keeps_its_sixteen_bits(tmp_path):
    """unit divides by 65535, byte by 257 (65535 -> 255.0); rgb repeats the gray value."""
    values = np.array([[0, 1, 257, 65535], [1000, 30000, 40000, 65534]], np.uint16)
    path = tmp_path / "g16.png"
    Image.fromarray(values).save(path)
    assert image_source.read_header(str(path)).wide
    unit = run_image(path, color="gray", dtype="float64")
    np.testing.assert_array_equal(unit[0, :, :, 0], values / 65535)
    byte = run_image(path, color="gray", scale="byte", dtype="float64")
    np.testing.assert_array_equal(byte[0, :, :, 0], values / 257)
    assert byte.max() == 255.0
    rgb = run_image(path, dtype="float64")
    np.testing.assert_array_equal(rgb[0], np.repeat(unit[0], 3, axis=2))


def test_huge_header_is_refused_without_allocating(tmp_path):
    path = tmp_path / "bomb.png"
    path.write_bytes(png_header_only(100_000, 100_000))
    assert "larger than 64 megapixels" in check_error(path)
    path.write_bytes(png_header_only(9000, 8000))  # 72 MP: below Pillow's own limits
    assert "9000 x 8000 = 72.0 megapixels, more than the 64 accepted" in check_error(path)
    path.write_bytes(png_header_only(10_000, 10_000))  # where Pillow only warns
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert "10000 x 10000 = 100.0 megapixels" in check_error(path)


@pytest.mark.parametrize("content, message", [
    (b"", "is not a PNG or JPEG image"),
    (b"GIF89a" + b"\0" * 40, "is not a PNG or JPEG image"),
    (b"\x89PNG\r\n\x1a\n" + b"\0" * 30, "is not a PNG or JPEG image"),
    (png_header_only(0, 0), "is not a PNG or JPEG image"),
    (b"\xff\xd8\xff\xe0" + b"\x13" * 40, "cannot read the image"),
])
def test_corrupt_or_unsupported_files_are_errors_on_path(tmp_path, content, message):
    path = tmp_path / "bad.png"
    path.write_bytes(content)
    text = check_error(path)
    assert text.startswith(f"path {str(path)!r}: ") and message in text


def test_missing_file_folder_and_empty_path(tmp_path):
    assert "no such image file" in check_error(tmp_path / "nope.png")
    assert "not a regular file" in check_error(tmp_path)
    plan = compile_canvas(image_canvas(""))
    assert "choose a PNG or JPEG file" in plan.errors["x"][0].message


def test_truncated_file_is_a_clear_error_at_run_time(tmp_path):
    path = write_png(tmp_path / "t.png", (np.random.default_rng(0).random((64, 64, 3)) * 255)
                     .astype(np.uint8))
    path.write_bytes(path.read_bytes()[:200])
    plan = compile_canvas(image_canvas(path))
    assert plan.ok  # the header is intact: check reads nothing more
    with pytest.raises(InvalidArgumentError, match="cannot decode the PNG image"):
        image_source.read_image(str(path))
    result = Executor().run(plan)
    assert "cannot decode the PNG image" in result.errors["x"]


def test_edited_image_reruns(tmp_path):
    """The cache key holds the file's stamp, as for .npy files."""
    path = write_png(tmp_path / "a.png")
    ex = Executor()
    first = ex.run(ex.compile(image_canvas(path))).outputs[("x", "output")]
    write_png(path, 255 - RGB)
    second = ex.run(ex.compile(image_canvas(path))).outputs[("x", "output")]
    np.testing.assert_array_equal(first + second, np.ones_like(first))


def gradblocks(*args, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "engine.cli", *args], capture_output=True, check=False,
                          text=True, cwd=cwd)


def cli_canvas(tmp_path) -> str:
    """A canvas with a relative image path feeding a conv's filter gradient."""
    write_png(tmp_path / "photo.png")
    c = Canvas()
    c.add_node("Tensor", id="img", attrs={"fill": "image", "path": "photo.png",
                                          "color": "gray"})
    c.add_node("Tensor", id="dy", attrs={"shape": [1, 4, 5, 2]})
    c.add_node("IntVector", id="fs", attrs={"values": [3, 3, 1, 2]})
    c.add_node("Conv2DBackpropFilter", id="dw", attrs={"padding": "SAME"})
    c.connect(("img", "output"), ("dw", "input"))
    c.connect(("fs", "output"), ("dw", "filter_sizes"))
    c.connect(("dy", "output"), ("dw", "out_backprop"))
    save_canvas(c, tmp_path / "c.gbc.json")
    return str(tmp_path / "c.gbc.json")


def test_cli_check_run_and_export_reproduce_the_image(tmp_path):
    canvas = cli_canvas(tmp_path)
    check = gradblocks("check", canvas, cwd="/")
    assert check.returncode == 0, check.stderr
    assert "[1, 4, 5, 1]" in check.stdout and "[3, 3, 1, 2]" in check.stdout
    run = gradblocks("run", canvas, "--out", str(tmp_path / "run.npz"), cwd="/")
    assert run.returncode == 0, run.stderr
    export = gradblocks("export", canvas, "-o", str(tmp_path / "script.py"), cwd="/")
    assert export.returncode == 0, export.stderr
    script = subprocess.run([sys.executable, str(tmp_path / "script.py"),
                             str(tmp_path / "exp.npz")], capture_output=True, text=True, check=False,
                            cwd=str(tmp_path.parent),
                            env={**os.environ, "PYTHONPATH": str(Path.cwd())})
    assert script.returncode == 0, script.stderr
    ran, exported = np.load(tmp_path / "run.npz"), np.load(tmp_path / "exp.npz")
    assert sorted(ran) == sorted(exported)
    want = np.asarray(Image.open(tmp_path / "photo.png").convert("L")) / 255
    np.testing.assert_array_equal(ran["img"][0, :, :, 0], want.astype(np.float32))
    for key in ran:
        assert_same_result(exported[key], ran[key], key)  # the paths may differ: see there


def test_cli_check_names_a_bad_image(tmp_path):
    canvas = cli_canvas(tmp_path)
    (tmp_path / "photo.png").write_bytes(png_header_only(100_000, 100_000))
    check = gradblocks("check", canvas, cwd="/")
    assert check.returncode == 2
    assert "img.path: path " in check.stderr and "64 megapixels" in check.stderr
    assert "Traceback" not in check.stderr
    meta = json.loads((tmp_path / "c.gbc.json").read_text())
    assert meta["nodes"][0]["attrs"]["fill"] == "image"


# -- truncated files and headers that claim more than the file holds (issue 20) ---------------

def encoded(array: np.ndarray, fmt: str = "JPEG", **options) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, fmt, **options)
    return buffer.getvalue()


NOISE = np.random.default_rng(5).integers(0, 256, (96, 128, 3), dtype=np.uint8)


def jpeg_claiming(width: int, height: int) -> bytes:
    """A 16 x 16 JPEG (4:2:0) whose SOF0 says ``width x height``, its scan cut to 20 bytes and
    closed with an end marker: the issue's 745-byte "9000 x 7000" file."""
    small = bytearray(encoded(NOISE[:16, :16]))
    sof = small.index(b"\xff\xc0")
    small[sof + 5:sof + 9] = struct.pack(">HH", height, width)
    sos = small.index(b"\xff\xda")
    header_end = sos + 2 + int.from_bytes(small[sos + 2:sos + 4], "big")
    return bytes(small[:header_end + 20]) + b"\xff\xd9"


def blocks_420(width: int, height: int) -> int:
    """8 x 8 blocks of a 4:2:0 JPEG: luma at full size, two chroma planes at half."""
    def ceil(a, b):
        return -(-a // b)
    return ceil(width, 8) * ceil(height, 8) + 2 * ceil(ceil(width, 2), 8) * ceil(ceil(height, 2), 8)


def test_a_tiny_jpeg_claiming_9000_x_7000_is_refused_by_check_without_decoding(tmp_path):
    path = tmp_path / "claims.jpg"
    data = jpeg_claiming(9000, 7000)
    path.write_bytes(data)
    blocks = blocks_420(9000, 7000)
    assert blocks == 1_477_563
    tracemalloc.start()
    try:
        text = check_error(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert text == (f"path {str(path)!r}: is a truncated JPEG: the file has {len(data):,} bytes "
                    f"but its {blocks:,} blocks of 8 x 8 pixels need at least {blocks // 8:,} "
                    "bytes of data (its header declares 9000 x 7000 pixels; the missing ones "
                    "would be invented): not read")
    assert peak < 8 * 2**20  # nothing of 63 megapixels was allocated
    with pytest.raises(InvalidArgumentError, match="is a truncated JPEG"):
        image_source.read_image(str(path))


def cut_with_end_marker(data: bytes, keep: int) -> bytes:
    return data[:keep] + b"\xff\xd9"


@pytest.mark.parametrize("options", [
    {}, {"progressive": True}, {"restart_marker_blocks": 3}, {"subsampling": 0},
    {"quality": 10}, {"gray": True},
], ids=["baseline", "progressive", "restart-markers", "444", "quality10", "gray"])
def test_a_jpeg_cut_short_and_given_an_end_marker_is_refused_at_run_time(tmp_path, options):
    """Pillow decodes such a file, inventing the rest (gray); the same file complete runs and
    equals Pillow's own decode."""
    array = NOISE[:, :, 0] if options.pop("gray", False) else NOISE
    data = encoded(array, **options)
    whole = tmp_path / "whole.jpg"
    whole.write_bytes(data)
    np.testing.assert_array_equal(run_image(whole, scale="byte", dtype="float64")[0],
                                  np.asarray(Image.open(whole).convert("RGB"), np.float64))
    cut = tmp_path / "cut.jpg"
    cut.write_bytes(cut_with_end_marker(data, len(data) * 2 // 3))
    Image.open(cut).load()  # what made this an attack: Pillow decodes it without a word
    plan = compile_canvas(image_canvas(cut))
    assert plan.ok  # the file is large enough for its size: only decoding can tell
    result = Executor().run(plan)
    assert result.errors["x"] == (
        f"path {str(cut)!r}: is a truncated JPEG: its coded data stops before its last scan "
        f"does (cut short, then given an end marker) (its header declares 128 x 96 pixels; "
        f"the missing ones would be invented): not read")


def test_a_jpeg_cut_short_without_an_end_marker_is_refused_even_when_pillow_is_told_to_load_it(
        tmp_path, monkeypatch):
    from PIL import ImageFile

    monkeypatch.setattr(ImageFile, "LOAD_TRUNCATED_IMAGES", True)  # another library's choice
    data = encoded(NOISE)
    path = tmp_path / "cut.jpg"
    path.write_bytes(data[:len(data) // 2])
    with pytest.raises(InvalidArgumentError, match="cannot decode the JPEG image .*truncated"):
        image_source.read_image(str(path))


def test_a_jpeg_with_bytes_after_its_end_still_runs(tmp_path):
    path = tmp_path / "tail.jpg"
    path.write_bytes(encoded(NOISE) + b"camera data \xff\x00\xff\xd8 after the end")
    assert run_image(path).shape == (1, 96, 128, 3)


def png_of_rows(width: int, height: int, rows: bytes, interlace: int = 0) -> bytes:
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, interlace)
    return (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", ihdr)
            + png_chunk(b"IDAT", zlib.compress(rows)) + png_chunk(b"IEND", b""))


def adam7_rows(image: np.ndarray) -> bytes:
    """The filtered rows (filter 0) of an interlaced RGB PNG of ``image``, pass by pass."""
    out = b""
    for x0, y0, dx, dy in ((0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4),
                           (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)):
        part = image[y0::dy, x0::dx]
        if part.size:
            out += b"".join(b"\x00" + row.tobytes() for row in part)
    return out


def test_a_png_whose_data_ends_before_its_rows_is_refused(tmp_path):
    """A complete zlib stream of 10 rows of 48: Pillow fills the other 38 with black."""
    w, h = 64, 48
    row = b"\x00" + b"\x07" * (w * 3)
    path = tmp_path / "short.png"
    path.write_bytes(png_of_rows(w, h, row * 10))
    Image.open(path).load()  # Pillow says nothing
    assert compile_canvas(image_canvas(path)).ok
    with pytest.raises(InvalidArgumentError) as caught:
        image_source.read_image(str(path))
    assert str(caught.value) == (
        f"path {str(path)!r}: is a truncated PNG: its pixel data holds {10 * (1 + 3 * w):,} "
        f"bytes of rows but {h * (1 + 3 * w):,} are needed (its header declares 64 x 48 "
        f"pixels; the missing ones would be invented): not read")
    path.write_bytes(png_of_rows(w, h, row * h))
    assert run_image(path, scale="byte").max() == 7.0


def test_an_interlaced_png_is_counted_pass_by_pass(tmp_path):
    image = np.random.default_rng(2).integers(0, 256, (13, 11, 3), dtype=np.uint8)
    rows = adam7_rows(image)
    path = tmp_path / "adam7.png"
    path.write_bytes(png_of_rows(11, 13, rows, interlace=1))
    np.testing.assert_array_equal(run_image(path, scale="byte", dtype="float64")[0], image)
    path.write_bytes(png_of_rows(11, 13, rows[:-1], interlace=1))  # one byte short
    with pytest.raises(InvalidArgumentError, match=f"holds {len(rows) - 1:,} bytes of rows but "
                                                   f"{len(rows):,} are needed"):
        image_source.read_image(str(path))


def test_a_png_header_claiming_more_than_deflate_can_hold_is_refused_by_check(tmp_path):
    path = tmp_path / "claims.png"
    path.write_bytes(png_of_rows(8000, 7000, b"\x00" * 100))
    size = path.stat().st_size
    rows = 7000 * (1 + 3 * 8000)
    assert check_error(path) == (
        f"path {str(path)!r}: is a truncated PNG: the file has {size:,} bytes but its "
        f"{rows:,} bytes of pixel rows compress to at least {rows // 1032:,} bytes (deflate's "
        f"largest ratio is 1032:1) (its header declares 8000 x 7000 pixels; the missing ones "
        f"would be invented): not read")


def test_the_most_compressible_real_files_are_not_taken_for_truncated_ones(tmp_path):
    """A uniform picture compressed as hard as its format allows still passes the bounds."""
    png = tmp_path / "flat.png"
    Image.new("RGB", (1500, 1000), (9, 9, 9)).save(png, compress_level=9)
    assert png.stat().st_size * 1032 >= 1000 * (1 + 3 * 1500)
    assert run_image(png, scale="byte").max() == 9.0
    jpeg = tmp_path / "flat.jpg"
    Image.new("L", (1600, 1200), 200).save(jpeg, quality=1)
    assert run_image(jpeg, scale="byte", color="gray").shape == (1, 1200, 1600, 1)


@pytest.mark.parametrize("segment", [b"\xff\xe0\x00\x00", b"\xff\xe1\x00\x01", b"\xff\xff\xff"],
                         ids=["length-0", "length-1", "fill-bytes"])
def test_odd_segments_before_the_frame_neither_hang_nor_hide_the_size_bound(tmp_path, segment):
    """libjpeg skips nothing after a segment length of 0 or 1, and fill bytes before a marker:
    the header walk does the same, so the bound still applies and a good file still runs."""
    claims = jpeg_claiming(9000, 7000)
    path = tmp_path / "odd.jpg"
    path.write_bytes(claims[:2] + segment + claims[2:])
    assert "is a truncated JPEG: the file has" in check_error(path)
    good = encoded(NOISE)
    path.write_bytes(good[:2] + segment + good[2:])
    assert run_image(path).shape == (1, 96, 128, 3)
