"""``gradblocks import``, run as a user runs it (subprocesses): --list, each layer imported and
run, its ``forward`` checked against the model's own arithmetic (tests/model_files.py), and
every refusal a one-line error naming the layer (exit 2)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from engine.kernels.accel import COMPILE_NOTE
from tests import model_files as mf
from tests.cli_support import one_error

ROOT = Path(__file__).parents[1]
ONNX_LAYERS = ("conv_grouped", "conv_dw_lower", "conv_upper", "conv_valid")
KERAS_LAYERS = ("conv_same", "dw", "grouped", "cfirst")
IDS = {"input", "filter", "forward", "out_backprop", "grad_filter", "grad_input",
       "filter_sizes", "input_sizes"}


def gb(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "engine.cli", *map(str, args)],
                          capture_output=True, text=True, check=False, cwd=ROOT, timeout=300)


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("models")
    return {"onnx": mf.write_onnx(d / "small.onnx"), "keras": mf.write_keras(d / "small.keras"),
            "h5": mf.write_h5(d / "small.h5")}


def imported(canvas: Path) -> dict[str, np.ndarray]:
    """Run the canvas with ``gradblocks run --out``; every output by node id."""
    out = canvas.with_suffix(".npz")
    proc = gb("run", canvas, "--out", out)
    assert proc.returncode == 0, proc.stderr
    titles = {n["id"]: n["title"] for n in json.loads(canvas.read_text())["nodes"]}
    with np.load(out) as z:
        return {node: z[title] for node, title in titles.items()}


def array_file(canvas: Path, node_id: str = "filter") -> Path:
    """The .npy file the canvas's ``node_id`` Tensor reads: ``<stem>.<id>.<hash12>.npy`` beside
    it (named by its content)."""
    nodes = {n["id"]: n for n in json.loads(canvas.read_text())["nodes"]}
    name = nodes[node_id]["attrs"]["path"]
    stem = canvas.name.removesuffix(".gbc.json")
    assert re.fullmatch(rf"{re.escape(stem)}\.{node_id}\.[0-9a-f]{{12}}\.npy", name), name
    return canvas.parent / name




def adjoint_agrees(r: dict[str, np.ndarray]) -> None:
    """<forward(x), dy> = <x, grad_input> = <w, grad_filter>: the gradients match forward."""
    dot = lambda a, b: float(np.sum(a.astype(np.float64) * b))
    lhs = dot(r["forward"], r["out_backprop"])
    assert dot(r["input"], r["grad_input"]) == pytest.approx(lhs, rel=1e-4, abs=1e-3)
    assert dot(r["filter"], r["grad_filter"]) == pytest.approx(lhs, rel=1e-4, abs=1e-3)


def test_list_onnx_prints_every_conv_layer_and_why_one_cannot_be_imported(models):
    proc = gb("import", models["onnx"], "--list")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].split() == ["name", "op", "kernel", "strides", "dilations", "padding",
                                "groups", "in", "out"]
    assert lines[1].split() == ["conv_grouped", "grouped", "3x3", "2,1", "1,2", "pads",
                                "1,2,0,1", "2", "4", "6"]
    assert lines[2].split() == ["conv_dw_lower", "depthwise", "2x3", "2,2", "1,1",
                                "SAME_LOWER", "4", "4", "8"]
    assert lines[3].split() == ["conv_upper", "Conv2D", "3x3", "2,2", "1,1", "SAME", "1", "4",
                                "3"]
    assert lines[4].split() == ["conv_valid", "Conv2D", "1x2", "1,1", "1,3", "VALID", "1", "4",
                                "2"]
    assert lines[5].split() == ["conv3d", "Conv3D", "2x2x2", "1,1,1", "1,1,1", "pads",
                                "1,1,1,1,1,1", "1", "1", "2"]  # a Pad and a VALID Conv3D
    assert lines[6].startswith("cannot import: layer 'conv_same_dilated': auto_pad SAME_UPPER "
                               "with dilations")
    assert len(lines) == 7


@pytest.mark.parametrize("fmt", ["keras", "h5"])
def test_list_keras_both_file_layouts(models, fmt):
    proc = gb("import", models[fmt], "--list")
    assert proc.returncode == 0, proc.stderr
    rows = [line.split() for line in proc.stdout.splitlines()]
    assert rows[1:5] == [
        ["conv_same", "Conv2D", "3x3", "2,2", "1,1", "SAME", "1", "3", "4"],
        ["dw", "depthwise", "3x2", "1,1", "2,1", "VALID", "3", "3", "6"],
        ["grouped", "grouped", "2x2", "1,2", "1,1", "SAME", "2", "4", "6"],
        ["cfirst", "Conv2D", "2x3", "1,1", "1,1", "SAME", "1", "3", "2"],
    ]
    assert rows[5] == ["c3d", "Conv3D", "1x1x1", "1,1,1", "1,1,1", "VALID", "1", "1", "1"]


@pytest.mark.parametrize("layer", ONNX_LAYERS)
def test_onnx_layer_forward_is_the_models_own_conv(models, tmp_path, layer):
    x = np.random.default_rng(1).standard_normal(mf.ONNX_INPUT).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    canvas = tmp_path / f"{layer}.gbc.json"
    proc = gb("import", models["onnx"], "--layer", layer, "-o", canvas,
              "--input", tmp_path / "x.npy")
    assert proc.returncode == 0, proc.stderr
    _w, bias, _ = mf.ONNX_CONVS[layer]
    nodes = {n["id"]: n for n in json.loads(canvas.read_text())["nodes"]}
    assert set(nodes) == IDS | ({"bias"} if bias is not None else set())
    assert nodes["forward"]["attrs"]["data_format"] == "NCHW"
    assert array_file(canvas).is_file()  # a relative name, beside it
    r = imported(canvas)
    np.testing.assert_array_equal(r["input"], x)
    np.testing.assert_allclose(r["forward"], mf.onnx_forward(layer, x), rtol=1e-4, atol=1e-4)
    if bias is not None:
        assert "bias [" in proc.stdout
        np.testing.assert_array_equal(r["bias"], bias)
    adjoint_agrees(r)


def test_same_lower_odd_padding_becomes_explicit_with_the_odd_pad_before(models, tmp_path):
    canvas = tmp_path / "dw.gbc.json"
    proc = gb("import", models["onnx"], "--layer", "conv_dw_lower", "-o", canvas)
    assert proc.returncode == 0, proc.stderr
    attrs = {n["id"]: n for n in json.loads(canvas.read_text())["nodes"]}["forward"]["attrs"]
    assert attrs["padding"] == "EXPLICIT"
    assert attrs["explicit_paddings"] == [0, 0, 0, 0, 1, 0, 1, 0]
    filt = np.load(array_file(canvas))
    w = mf.ONNX_CONVS["conv_dw_lower"][0]  # [8, 1, 2, 3]: output channel q * 2 + k
    assert filt.shape == (2, 3, 4, 2)
    np.testing.assert_array_equal(filt[:, :, 3, 1], w[3 * 2 + 1, 0])


@pytest.mark.parametrize("layer", ["conv_grouped", "conv_dw_lower"])
def test_layout_nhwc_converts_the_canvas(models, tmp_path, layer):
    x = np.random.default_rng(2).standard_normal((1, 9, 8, 4)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    canvas = tmp_path / "c.gbc.json"
    proc = gb("import", models["onnx"], "--layer", layer, "-o", canvas, "--layout", "NHWC",
              "--input", tmp_path / "x.npy")
    assert proc.returncode == 0, proc.stderr
    r = imported(canvas)
    want = mf.onnx_forward(layer, x.transpose(0, 3, 1, 2)).transpose(0, 2, 3, 1)
    np.testing.assert_allclose(r["forward"], want, rtol=1e-4, atol=1e-4)
    adjoint_agrees(r)


def test_input_size_and_batch_give_a_random_input(models, tmp_path):
    canvas = tmp_path / "u.gbc.json"
    proc = gb("import", models["onnx"], "--layer", "conv_upper", "-o", canvas,
              "--input-size", "11,6", "--batch", "2")
    assert proc.returncode == 0, proc.stderr
    assert "input [2, 4, 11, 6] -> output [2, 3, 6, 3]" in proc.stdout
    r = imported(canvas)
    assert r["input"].shape == (2, 4, 11, 6)
    np.testing.assert_allclose(r["forward"], mf.onnx_forward("conv_upper", r["input"]),
                               rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("fmt", ["keras", "h5"])
@pytest.mark.parametrize("layer", KERAS_LAYERS)
def test_keras_layer_forward_is_the_models_own_conv(models, tmp_path, fmt, layer):
    canvas = tmp_path / f"{layer}.gbc.json"
    proc = gb("import", models[fmt], "--layer", layer, "-o", canvas)
    assert proc.returncode == 0, proc.stderr
    r = imported(canvas)
    _, cfg, shape, weights = mf.KERAS_LAYERS[layer]
    assert r["input"].shape == (1, *shape[1:])  # the size the model's config gives
    np.testing.assert_array_equal(r["filter"], weights[0])
    np.testing.assert_allclose(r["forward"], mf.keras_forward(layer, r["input"]), rtol=1e-4,
                               atol=1e-4)
    if cfg["use_bias"]:
        np.testing.assert_array_equal(r["bias"], weights[1])
    else:
        assert "bias" not in r
    adjoint_agrees(r)


@pytest.mark.parametrize("suffix", [".safetensors", ".npz"])
def test_weight_files_take_their_attributes_from_attrs(tmp_path, suffix):
    rng = np.random.default_rng(3)
    w, b = rng.standard_normal((4, 3, 3, 2)).astype(np.float32), np.ones(4, np.float32)
    path = tmp_path / f"w{suffix}"
    if suffix == ".npz":
        np.savez(path, **{"conv1.weight": w, "conv1.bias": b, "fc.weight": np.ones((2, 2))})
    else:
        from safetensors.numpy import save_file

        save_file({"conv1.weight": w, "conv1.bias": b, "fc.weight": np.ones((2, 2))}, str(path))
    proc = gb("import", path, "--list", "--attrs", "strides=2,1 pads=1,0,2,1 dilations=1,2")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[1].split() == [
        "conv1", "Conv2D", "3x2", "2,1", "1,2", "pads", "1,0,2,1", "1", "3", "4"]
    x = rng.standard_normal((1, 3, 7, 6)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    canvas = tmp_path / "c.gbc.json"
    proc = gb("import", path, "--layer", "conv1", "-o", canvas, "--input", tmp_path / "x.npy",
              "--attrs", "strides=2,1 pads=1,0,2,1 dilations=1,2")
    assert proc.returncode == 0, proc.stderr
    r = imported(canvas)
    want = mf.conv_nchw(x, w, 1, (2, 1), (1, 2), (1, 0, 2, 1))
    np.testing.assert_allclose(r["forward"], want, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(r["bias"], b)


def test_hwio_depthwise_weights_with_attrs(tmp_path):
    k = np.random.default_rng(4).standard_normal((3, 3, 2, 3)).astype(np.float32)
    path = tmp_path / "dw.npz"
    np.savez(path, dw=k)
    canvas = tmp_path / "c.gbc.json"
    proc = gb("import", path, "--layer", "dw", "-o", canvas, "--input-size", "6,5", "--attrs",
              "weights=HWIO groups=2 padding=SAME strides=2,2")
    assert proc.returncode == 0, proc.stderr
    r = imported(canvas)
    assert r["input"].shape == (1, 6, 5, 2)  # HWIO weights: NHWC by default
    x = r["input"].transpose(0, 3, 1, 2)
    oihw = k.transpose(2, 3, 0, 1).reshape(6, 1, 3, 3)
    pads = (0, 1, 1, 1)  # TensorFlow SAME on 6x5, stride 2, 3x3: totals 1 and 2
    want = mf.conv_nchw(x, oihw, 2, (2, 2), (1, 1), pads).transpose(0, 2, 3, 1)
    np.testing.assert_allclose(r["forward"], want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(("args", "words"), [
    (["--layer", "nope"], ["no layer named 'nope'", "conv_grouped"]),
    (["--layer", "relu"], ["layer 'relu'", "Relu is not a conv"]),
    (["--layer", "conv3d", "--input-size", "4,4"], ["layer 'conv3d' is a 3-D conv", "D,H,W"]),
    (["--layer", "conv_same_dilated"], ["layer 'conv_same_dilated'", "dilations"]),
    (["--layer", "conv_valid", "--input-size", "3,3"], ["layer 'conv_valid'", "[1, 4, 3, 3]"]),
    (["--layer", "conv_upper"], ["needs -o"]),
    (["--layer", "conv_upper", "--input", "x.npy", "--batch", "2"], ["--batch is for the random"]),
    (["--layer", "conv_upper", "--attrs", "strides=2,2"], ["--attrs is for .safetensors"]),
])
def test_onnx_refusals_are_one_line_naming_the_layer(models, tmp_path, args, words):
    args = [*args, "-o", tmp_path / "c.gbc.json"] if "needs -o" not in words else args
    one_error(gb("import", models["onnx"], *args), *words)
    assert not (tmp_path / "c.gbc.json").exists()


def test_wrong_input_array_is_named(models, tmp_path):
    np.save(tmp_path / "x.npy", np.zeros((1, 3, 9, 8), np.float32))
    one_error(gb("import", models["onnx"], "--layer", "conv_upper", "-o",
                 tmp_path / "c.gbc.json", "--input", tmp_path / "x.npy"),
              "shape [1, 3, 9, 8]", "[N, 4, H, W]", "conv_upper")


def test_refuses_to_overwrite_the_model(models):
    one_error(gb("import", models["onnx"], "--layer", "conv_upper", "-o", models["onnx"]),
              "refusing to overwrite")


@pytest.mark.parametrize("name", ["bad.onnx", "bad.keras", "bad.h5", "bad.safetensors",
                                  "bad.npz"])
def test_corrupt_files_are_one_line_errors(tmp_path, name):
    path = tmp_path / name
    path.write_bytes(b"PK\x03\x04 this is not a model" * 10)
    one_error(gb("import", path, "--list"), str(path))


def test_bad_attrs_word(tmp_path):
    np.savez(tmp_path / "w.npz", k=np.ones((1, 1, 1, 1), np.float32))
    one_error(gb("import", tmp_path / "w.npz", "--list", "--attrs", "stride=2,2"),
              "'stride=2,2'", "strides")


@pytest.mark.parametrize(("module", "fmt"), [("onnx", "onnx"), ("h5py", "keras"),
                                             ("h5py", "h5"), ("safetensors", "safetensors")])
def test_missing_extra_names_it(models, tmp_path, module, fmt):
    """The package made unimportable (sys.modules[name] = None) as if not installed."""
    path = models.get(fmt) or tmp_path / "w.safetensors"
    if fmt == "safetensors":
        path.write_bytes(b"x")
    code = (f"import sys; sys.modules[{module!r}] = None; "
            f"sys.modules[{module + '.numpy'!r}] = None; from engine.cli import main; "
            f"raise SystemExit(main(['import', {str(path)!r}, '--list']))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, timeout=300, check=False)
    one_error(proc, f"'{module}' package", f"pip install {module}")


def _cells(line: str, drop_ms: bool) -> list[object]:
    """The words of a line; in `run`'s table the ms column dropped and the statistics (printed
    with 6 significant digits) rounded to 4, so the kernel path's rounding does not count."""
    cells: list[object] = line.split()
    if drop_ms and len(cells) > 2:
        del cells[-2]  # the ms column of `run` (header "ms", then a time)
        cells = [_rounded(c) for c in cells]
    return cells


def _rounded(cell: object) -> object:
    try:
        return float(f"{float(str(cell)):.4g}") if "." in str(cell) else cell
    except ValueError:
        return cell


def test_guide_round_trip_runs_as_written(tmp_path):
    """Every command of the User Guide's import example (assets/guide/import.md), run again in
    an empty folder: the same output, line for line (run's ms column aside)."""
    page = (ROOT / "assets" / "guide" / "import.md").read_text(encoding="utf-8")
    section = page.split("## A round trip", 1)[1]
    block = section.split("```\n", 2)[1]
    commands: list[tuple[str, list[str]]] = []
    for line in block.splitlines():
        if line.startswith("$ "):
            commands.append((line[2:], []))
        elif line:
            commands[-1][1].append(line)
    assert len(commands) == 7
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    rc = None
    for command, expected in commands:
        if command == "echo $?":
            assert [str(rc)] == expected
            continue
        if command.startswith("gradblocks "):
            argv = [sys.executable, "-m", "engine.cli", *command.split()[1:]]
        else:
            assert command.startswith("python -c ")
            argv = [sys.executable, "-c", command[len("python -c "):].strip('"')]
        proc = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, env=env,
                              timeout=300, check=False)
        rc = proc.returncode
        # a fresh numba cache (a new clone's first run) adds the compile note: not output
        got = [g for g in (proc.stdout + proc.stderr).splitlines() if g != COMPILE_NOTE]
        drop = command.startswith("gradblocks run")
        assert [_cells(g, drop) for g in got] == [_cells(e, drop) for e in expected], command


@pytest.mark.parametrize("fmt", ["onnx", "keras"])
def test_import_never_imports_qt(models, tmp_path, fmt):
    from tests.test_layers import imported_modules, qt_modules

    layer = "conv_upper" if fmt == "onnx" else "conv_same"
    code, names = imported_modules(["-m", "engine.cli", "import", str(models[fmt]), "--layer",
                                    layer, "-o", "c.gbc.json"], tmp_path)
    assert code == 0
    assert "engine.graph.layer_canvas" in names
    assert {"onnx" if fmt == "onnx" else "h5py"} <= {n.split(".")[0] for n in names}
    assert qt_modules(names) == []
    assert (tmp_path / "c.gbc.json").is_file()


def test_keras3_nested_model_weights_are_found_by_class_path(tmp_path):
    """A Sequential inside a Sequential: the inner Conv2D's variables live at
    layers/sequential/layers/conv2d, the outer one's at layers/conv2d (Keras 3 addresses layers
    by class, whatever their names)."""
    import zipfile

    import h5py

    inner_w, outer_w = (np.random.default_rng(k).standard_normal((1, 1, 2, 2)).astype(np.float32)
                        for k in (5, 6))
    conv = {"kernel_size": [1, 1], "strides": [1, 1], "padding": "valid", "filters": 2,
            "data_format": "channels_last", "dilation_rate": [1, 1], "groups": 1,
            "use_bias": False}
    layer = lambda name: {"class_name": "Conv2D", "config": {"name": name, **conv},
                          "build_config": {"input_shape": [None, 3, 3, 2]}}
    config = {"class_name": "Sequential", "config": {"name": "outer", "layers": [
        {"class_name": "InputLayer", "config": {"name": "in", "batch_shape": [None, 3, 3, 2]}},
        {"class_name": "Sequential", "config": {"name": "block", "layers": [layer("a")]}},
        layer("b")]}}
    path = tmp_path / "nested.keras"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("config.json", json.dumps(config))
        weights = tmp_path / "w.h5"
        with h5py.File(weights, "w") as h5:
            h5.create_dataset("layers/sequential/layers/conv2d/vars/0", data=inner_w)
            h5.create_dataset("layers/conv2d/vars/0", data=outer_w)
        z.write(weights, "model.weights.h5")
    for name, want in (("a", inner_w), ("b", outer_w)):
        proc = gb("import", path, "--layer", name, "-o", tmp_path / f"{name}.gbc.json")
        assert proc.returncode == 0, proc.stderr
        np.testing.assert_array_equal(np.load(array_file(tmp_path / f"{name}.gbc.json")), want)


def test_legacy_h5_nested_model_weights(tmp_path):
    """Keras 2 .h5: a nested model's layers are listed in the weight_names of the nested
    model's group (model_weights/block lists c_in/kernel:0)."""
    import h5py

    w = np.random.default_rng(8).standard_normal((2, 1, 2, 3)).astype(np.float32)
    conv = {"name": "c_in", "kernel_size": [2, 1], "filters": 3, "padding": "same",
            "batch_input_shape": [None, 4, 4, 2]}
    config = {"class_name": "Functional", "config": {"name": "outer", "layers": [
        {"class_name": "Sequential", "name": "block",
         "config": {"name": "block", "layers": [{"class_name": "Conv2D", "config": conv}]}}]}}
    path = tmp_path / "nested.h5"
    with h5py.File(path, "w") as h5:
        h5.attrs["model_config"] = json.dumps(config)
        group = h5.create_group("model_weights/block")
        group.create_dataset("c_in/kernel:0", data=w)
        group.create_dataset("c_in/bias:0", data=np.arange(3, dtype=np.float32))
        group.attrs["weight_names"] = [b"c_in/kernel:0", b"c_in/bias:0"]
    proc = gb("import", path, "--layer", "c_in", "-o", tmp_path / "c.gbc.json")
    assert proc.returncode == 0, proc.stderr
    np.testing.assert_array_equal(np.load(array_file(tmp_path / "c.gbc.json")), w)
    np.testing.assert_array_equal(np.load(array_file(tmp_path / "c.gbc.json", "bias")), [0, 1, 2])
