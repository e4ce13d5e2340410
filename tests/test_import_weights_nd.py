"""Bare weight files (.npz, .safetensors) holding 5-D and 3-D tensors: 3-D conv layers (PyTorch
Conv3d OIDHW, TensorFlow DHWIO; grouped) and 1-D ones (Conv1d OIW, Keras WIO, depthwise WIO),
the 1-D ones imported as 2-D convs of height 1 as ONNX 1-D convs are.

Each layer is read with ``read_weights`` and written with ``write_layer_canvas`` (in-process),
and a file of both ranks through ``gradblocks import`` (subprocesses: --list, --all, --layer
and ``gradblocks run``). The canvas's forward is checked against a float64 NumPy loop of the
PyTorch-layout conv, and forward and gradients against ``jax.vjp`` of a float64 definition
(tests/nd_models.py), all within ``nd.TOL`` of the largest value. Then the messages: a count
that does not fit a layer's rank, a tensor of 6 dims."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import numpy as np
import pytest

from engine.graph.layer_canvas import write_layer_canvas
from engine.io.models.model_import import ModelImportError
from engine.io.models.weights_reader import parse_attrs, read_weights
from tests import nd_models as nd
from tests.cli_support import one_error

RNG = np.random.default_rng(11)


def _w(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


#: name -> (the tensor in the file's layout, bias or None, --attrs, input sizes (file rank))
CASES = {
    "oidhw": (_w(4, 3, 3, 2, 3), _w(4), "strides=2 dilations=1,1,2", (5, 6, 7)),
    "oiw": (_w(5, 3, 3), _w(5), "weights=OIW strides=2 pads=2,1 dilations=2", (9,)),
    "dhwio": (_w(2, 3, 2, 3, 4), None, "weights=DHWIO padding=SAME strides=2,1,2", (5, 6, 7)),
    "wio": (_w(3, 2, 4), _w(4), "weights=WIO padding=same dilations=2", (8,)),
    "wio_dw": (_w(3, 3, 2), None, "weights=HWIO groups=3 pads=1,1", (7,)),
    "grouped": (_w(6, 2, 3, 3, 3), _w(6), ("groups=2 strides=1,2,2 dilations=2,1,1 "
                "pads=1,0,2,1,0,2"), (7, 6, 7)),
    "grouped_io": (_w(2, 2, 3, 2, 6), None, ("weights=DHWIO groups=2 data_format=NCDHW "
                   "pads=0,1,1,0,1,1"), (4, 5, 6)),
}


def save(path: Path, arrays: dict[str, np.ndarray]) -> Path:
    """``arrays`` as an .npz or .safetensors file (skipped without the safetensors package)."""
    if path.suffix == ".npz":
        np.savez(path, **arrays)
    else:
        st = pytest.importorskip("safetensors.numpy")
        st.save_file({k: np.ascontiguousarray(v) for k, v in arrays.items()}, str(path))
    return path


def oi_weights(w: np.ndarray, attrs: dict) -> np.ndarray:
    """A file's tensor in PyTorch's layout [out, in / groups, k...] (depthwise WIO [k, in,
    multiplier]: output channel q * multiplier + m)."""
    if attrs.get("weights", "OIHW") == "OIHW":
        return w
    groups = attrs.get("groups", 1)
    if w.ndim == 3 and groups > 1 and groups == w.shape[1]:
        k, c, m = w.shape
        return w.transpose(1, 2, 0).reshape(c * m, 1, k)
    return w.transpose(w.ndim - 1, w.ndim - 2, *range(w.ndim - 2))


def geometry(attrs: dict, kernel: tuple[int, ...], sizes: tuple[int, ...]) -> tuple:
    """(strides, dilations, (before, after) pads) per dim, TensorFlow's SAME computed here."""
    rank = len(kernel)
    s = attrs.get("strides", (1,))
    d = attrs.get("dilations", (1,))
    s, d = (s * rank if len(s) == 1 else s), (d * rank if len(d) == 1 else d)
    if attrs.get("padding") == "SAME":
        pads = []
        for n, k, sn, dn in zip(sizes, kernel, s, d, strict=True):
            total = max((math.ceil(n / sn) - 1) * sn + (k - 1) * dn + 1 - n, 0)
            pads.append((total // 2, total - total // 2))
    else:
        p = attrs.get("pads", (0,) * 2 * rank)
        pads = [(p[2 * i], p[2 * i + 1]) for i in range(rank)]
    return tuple(s), tuple(d), pads


def numpy_conv(x: np.ndarray, w: np.ndarray, strides, dilations, pads, groups: int
               ) -> np.ndarray:
    """PyTorch's conv (x [N, C, sizes...], w [O, C / groups, k...]) in float64, by a loop over
    the kernel's offsets."""
    rank = w.ndim - 2
    x = np.pad(x.astype(np.float64), [(0, 0), (0, 0), *pads])
    n, c, o, k = x.shape[0], x.shape[1], w.shape[0], w.shape[2:]
    outs = [(x.shape[2 + i] - (k[i] - 1) * dilations[i] - 1) // strides[i] + 1
            for i in range(rank)]
    xg = x.reshape(n, groups, c // groups, *x.shape[2:])
    wg = w.astype(np.float64).reshape(groups, o // groups, c // groups, *k)
    y = np.zeros((n, groups, o // groups, *outs))
    for offs in itertools.product(*map(range, k)):
        at = tuple(slice(offs[i] * dilations[i],
                         offs[i] * dilations[i] + (outs[i] - 1) * strides[i] + 1, strides[i])
                   for i in range(rank))
        y += np.einsum("ngc...,goc->ngo...", xg[(slice(None),) * 3 + at],
                       wg[(slice(None),) * 3 + offs])
    return y.reshape(n, o, *outs)


def to_nc(a: np.ndarray, last: bool, one_d: bool) -> np.ndarray:
    """A canvas array (channels last or first; a 1-D layer's of height 1) as [N, C, sizes...]."""
    a = np.moveaxis(a, -1, 1) if last else a
    return a[:, :, 0] if one_d else a


def from_nc(a: np.ndarray, last: bool, one_d: bool) -> np.ndarray:
    a = a[:, :, None] if one_d else a
    return np.moveaxis(a, 1, -1) if last else a


def check_canvas(r: dict, w: np.ndarray, bias, attrs: dict, last: bool) -> dict[str, float]:
    """The canvas's forward against NumPy, forward and gradients against jax.vjp: the errors
    (relative to the largest value)."""
    one_d = w.ndim == 3
    oi = oi_weights(w, attrs)
    groups = attrs.get("groups", 1)
    x = to_nc(r["input"], last, one_d)
    s, d, pads = geometry(attrs, oi.shape[2:], x.shape[2:])
    errors = {"numpy": nd.close(r["forward"], from_nc(numpy_conv(x, oi, s, d, pads, groups),
                                                      last, one_d))}
    if bias is not None:
        np.testing.assert_array_equal(r["bias"], bias)
    pytest.importorskip("jax")
    node = {"op": "Conv", "w": oi, "attrs": {"strides": list(s), "dilations": list(d),
                                             "group": groups,
                                             "pads": [b for b, _ in pads] + [a for _, a in pads]}}
    ref = nd.reference(node, x, oi, to_nc(r["out_backprop"], last, one_d))
    errors["forward"] = nd.close(r["forward"], from_nc(ref["forward"], last, one_d))
    errors["grad_input"] = nd.close(r["grad_input"], from_nc(ref["grad_input"], last, one_d))
    depthwise = one_d and groups > 1 and groups == x.shape[1]
    errors["grad_filter"] = nd.close(r["grad_filter"],
                                     nd.tf_filter(ref["grad_filter"], node, depthwise))
    return errors


@pytest.mark.parametrize("suffix", [".npz", ".safetensors"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_weights_layer_of_each_rank_and_layout_matches_numpy_and_jax(tmp_path, case, suffix):
    w, bias, text, sizes = CASES[case]
    arrays = {f"{case}.weight": w, **({f"{case}.bias": bias} if bias is not None else {})}
    attrs = parse_attrs(text)
    (layer,) = read_weights(str(save(tmp_path / f"w{suffix}", arrays)), attrs).layers
    one_d = w.ndim == 3
    assert (layer.rank, layer.conv1d) == ((2, True) if one_d else (3, False))
    if one_d:
        assert layer.kernel[0] == 1 and layer.strides[0] == 1 and layer.pads[:2] == (0, 0)
    canvas = tmp_path / "c.gbc.json"
    done = write_layer_canvas(layer, str(canvas), input_hw=(1, *sizes) if one_d else sizes)
    assert done.conv.op == ("Conv2D" if one_d and "groups" not in attrs else
                            "DepthwiseConv2D" if one_d else "Conv3D")
    last = layer.data_format == "NHWC"
    errors = check_canvas(nd.run_canvas(canvas), w, bias, attrs, last)
    assert max(errors.values()) < nd.TOL, errors


def test_explicit_3d_pads_become_a_pad_and_a_slice(tmp_path):
    """pads neither SAME nor VALID on a 3-D weights layer: a VALID Conv3D after a Pad block (as
    an ONNX one's, engine/graph/padded_canvas.py)."""
    w, _bias, text, sizes = CASES["grouped"]
    path = save(tmp_path / "w.npz", {"g.weight": w})
    (layer,) = read_weights(str(path), parse_attrs(text)).layers
    done = write_layer_canvas(layer, str(tmp_path / "g.gbc.json"), input_hw=sizes)
    assert done.conv.attrs["padding"] == "VALID" and done.conv.input_pads == (1, 0, 2, 1, 0, 2)
    nodes = {n["id"]: n for n in json.loads((tmp_path / "g.gbc.json").read_text())["nodes"]}
    assert nodes["padded_input"]["type"] == "Pad"
    assert nodes["padded_input"]["attrs"]["paddings"] == [0, 0, 0, 0, 1, 0, 2, 1, 0, 2]
    assert nodes["grad_input"]["type"] == "Slice"


# -- gradblocks import (subprocesses) --------------------------------------------------------


@pytest.mark.parametrize(("suffix", "pytorch"), [(".npz", True), (".safetensors", False)])
def test_cli_lists_imports_and_runs_3d_and_1d_weights(tmp_path, suffix, pytorch):
    """One file, one --attrs for both ranks: a single number for strides is every dim's."""
    if pytorch:
        w3, w1, text = _w(4, 3, 3, 2, 3), _w(5, 3, 3), "strides=2 dilations=1"
    else:
        w3, w1, text = _w(3, 2, 3, 3, 4), _w(3, 3, 5), "weights=HWIO strides=2 padding=SAME"
    b3, b1 = _w(4), _w(5)
    path = save(tmp_path / f"m{suffix}", {"c3.weight": w3, "c3.bias": b3, "c1.weight": w1,
                                          "c1.bias": b1})
    listed = nd.gb("import", path, "--list", "--attrs", text)
    assert listed.returncode == 0, listed.stderr
    rows = {line.split()[0]: line.split() for line in listed.stdout.splitlines()[1:]}
    assert rows["c3"][:4] == ["c3", "Conv3D", "3x2x3", "2,2,2"]
    assert rows["c1"][:4] == ["c1", "Conv2D", "1x3", "1,2"]
    assert "cannot import" not in listed.stdout
    done = nd.gb("import", path, "--all", "-o", tmp_path / "all", "--attrs", text)
    assert done.returncode == 0, done.stderr
    index = json.loads((tmp_path / "all" / "index.json").read_text())
    items = {i["layer"]: i for i in index}
    assert {n: i["op"] for n, i in items.items()} == {"c3": "Conv3D", "c1": "Conv2D"}
    # a weights file states no input size: --all without --input-size skips each layer saying
    # so (with it: test_cli_all_with_input_size_writes_every_layer_it_fits_and_each_runs)
    assert "give --input-size D,H,W" in items["c3"]["skipped"]
    assert "give --input-size H,W" in items["c1"]["skipped"]
    attrs = parse_attrs(text)
    for name, w, b, sizes in (("c3", w3, b3, "5,6,7"), ("c1", w1, b1, "1,9")):
        canvas = tmp_path / f"{name}.gbc.json"
        proc = nd.gb("import", path, "--layer", name, "-o", canvas, "--input-size", sizes,
                     "--attrs", text)
        assert proc.returncode == 0, proc.stderr
        assert ("1-D conv: imported as a 2-D conv of height 1" in proc.stdout) == (name == "c1")
        assert nd.gb("check", canvas).returncode == 0
        errors = check_canvas(nd.run_cli(canvas), w, b, attrs, not pytorch)
        assert max(errors.values()) < nd.TOL, (name, errors)


def _numpy_error(r: dict, w: np.ndarray, attrs: dict, last: bool) -> float:
    """The canvas's forward against the float64 NumPy conv (relative to the largest value)."""
    one_d = w.ndim == 3
    oi = oi_weights(w, attrs)
    x = to_nc(r["input"], last, one_d)
    s, d, pads = geometry(attrs, oi.shape[2:], x.shape[2:])
    want = numpy_conv(x, oi, s, d, pads, attrs.get("groups", 1))
    return nd.close(r["forward"], from_nc(want, last, one_d))


@pytest.mark.parametrize("suffix", [".npz", ".safetensors"])
def test_cli_all_with_input_size_writes_every_layer_it_fits_and_each_runs(tmp_path, suffix):
    """--all --input-size: the size of every layer the file gives none (all of them); the
    layers of another rank are skipped, one line each saying the size they take."""
    text = "strides=2 dilations=1"
    ws = {"c3": _w(4, 3, 3, 2, 3), "c3b": _w(2, 3, 2, 2, 2), "c2": _w(3, 2, 3, 3),
          "c1": _w(5, 3, 3)}
    bias = {"c3": _w(4), "c1": _w(5)}
    path = save(tmp_path / f"m{suffix}", {**{f"{k}.weight": w for k, w in ws.items()},
                                          **{f"{k}.bias": b for k, b in bias.items()}})
    attrs = parse_attrs(text)
    wanted = {"5,6,7": ["c3", "c3b"], "6,7": ["c2"], "9": ["c1"], "1,9": ["c1"]}
    reasons = {"c3": "is a 3-D conv: its input size is D,H,W", "c3b": "is a 3-D conv: its "
               "input size is D,H,W", "c2": "is a 2-D conv: its input size is H,W",
               "c1": "is a 1-D conv: its input size is 1,W or W"}
    for size, written in wanted.items():
        out = tmp_path / f"all_{size}"
        done = nd.gb("import", path, "--all", "-o", out, "--attrs", text, "--input-size", size)
        assert done.returncode == 0, done.stderr
        items = {i["layer"]: i for i in json.loads((out / "index.json").read_text())}
        assert sorted(n for n, i in items.items() if "canvas" in i) == sorted(written)
        for name in set(ws) - set(written):
            why = f"layer {name!r} {reasons[name]}, not {size}"
            if (size, name) == ("1,9", "c2"):  # a count that fits, too small for the kernel
                why = ("layer 'c2' on input [1, 2, 1, 9]: the output [1, 3, 0, 4] is empty "
                       "(the input, padded, is smaller than the dilated kernel)")
            assert items[name]["skipped"] == why and f"skipped: {why}" in done.stdout
        assert done.stdout.splitlines()[-1] == (f"wrote {len(written)} canvases and {out}/"
                                                f"index.json ({4 - len(written)} conv layers "
                                                "skipped)")
        for name in written:
            sizes = [int(n) for n in size.split(",")]
            assert items[name]["input_shape"][2:] == [1] * (len(sizes) == 1) + sizes
            r = nd.run_cli(out / items[name]["canvas"])
            assert _numpy_error(r, ws[name], attrs, False) < nd.TOL, (size, name)
            if name in bias:
                np.testing.assert_array_equal(r["bias"], bias[name])


def test_cli_all_refuses_a_1d_layer_a_height_but_1(tmp_path):
    """One size for every layer: 4,9 is a 2-D layer's, so the 1-D layer is skipped."""
    path = save(tmp_path / "w.npz", {"c1.weight": _w(5, 3, 3), "c2.weight": _w(3, 3, 3, 3)})
    done = nd.gb("import", path, "--all", "-o", tmp_path / "all", "--input-size", "4,9")
    assert done.returncode == 0, done.stderr
    items = {i["layer"]: i for i in json.loads((tmp_path / "all" / "index.json").read_text())}
    why = "layer 'c1' is a 1-D conv: its input size is 1,W or W, not 4,9"
    assert items["c1"] == {"layer": "c1", "op": "Conv2D", "skipped": why}
    assert f"skipped: {why}" in done.stdout and items["c2"]["canvas"] == "c2.gbc.json"


# -- messages --------------------------------------------------------------------------------


def test_a_count_that_does_not_fit_a_layers_rank_refuses_that_layer_alone(tmp_path):
    path = save(tmp_path / "w.npz", {"c3.weight": _w(2, 2, 2, 2, 2), "c2.weight": _w(2, 2, 2, 2),
                                     "c1.weight": _w(2, 2, 2)})
    found = read_weights(str(path), parse_attrs("strides=2,2"))
    assert [la.name for la in found.layers] == ["c2"]
    assert found.refused == {
        "c3": "layer 'c3': --attrs strides=2,2 has 2 numbers, expected 3 for a 3-D conv (or 1 "
              f"for every dim) (in {path})",
        "c1": f"layer 'c1': --attrs strides=2,2 has 2 numbers, expected 1 for a 1-D conv (in "
              f"{path})"}
    found = read_weights(str(path), parse_attrs("pads=1,0,1,0,1,0 dilations=1,1,2"))
    assert [la.name for la in found.layers] == ["c3"]
    assert found.refused["c2"] == (
        "layer 'c2': --attrs pads=1,0,1,0,1,0 has 6 numbers, expected 4 for a 2-D conv "
        f"(top,bottom,left,right) (in {path})")
    listed = nd.gb("import", path, "--list", "--attrs", "strides=1,2,2")
    assert listed.returncode == 0, listed.stderr
    assert ("cannot import: layer 'c2': --attrs strides=1,2,2 has 3 numbers, expected 2 for a "
            "2-D conv (or 1 for every dim)") in listed.stdout
    one_error(nd.gb("import", path, "--layer", "c1", "-o", tmp_path / "x.gbc.json",
                    "--input-size", "1,8", "--attrs", "strides=1,2,2"),
              "layer 'c1': --attrs strides=1,2,2 has 3 numbers, expected 1 for a 1-D conv")


def test_a_6d_tensor_is_listed_as_no_conv_weights(tmp_path):
    path = save(tmp_path / "w.npz", {"x.weight": _w(1, 2, 1, 2, 1, 2)})
    found = read_weights(str(path), {})
    assert found.layers == [] and found.refused == {}
    assert found.others["x"] == (
        "tensor 'x.weight' has shape [1, 2, 1, 2, 1, 2], expected 3 dimensions (out, in / "
        "groups, W), 4 (out, in / groups, H, W) or 5 (out, in / groups, D, H, W) with "
        f"weights=OIHW: not conv weights (in {path})")
    one_error(nd.gb("import", path, "--layer", "x", "-o", tmp_path / "x.gbc.json",
                    "--attrs", "weights=DHWIO"),
              "tensor 'x.weight' has shape [1, 2, 1, 2, 1, 2], expected 3 dimensions (W, in / "
              "groups, out), 4 (H, W, in / groups, out) or 5 (D, H, W, in / groups, out) with "
              "weights=HWIO")


@pytest.mark.parametrize(("text", "message"), [
    ("strides=1,1,1,1", "--attrs: strides=1,1,1,1 needs 1, 2 or 3 positive integer(s)"),
    ("dilations=1,0,1", "--attrs: dilations=1,0,1 needs 3 positive integer(s)"),
    ("pads=1,1,1", "--attrs: pads=1,1,1 needs 2, 4 or 6 non-negative integer(s)"),
    ("weights=OIDWH", "--attrs: weights=OIDWH is not one of OIW, OIHW, OIDHW, WIO, HWIO, DHWIO"),
    ("data_format=NCWH", ("--attrs: data_format=NCWH is not one of NCW, NCHW, NCDHW, NWC, NHWC, "
                         "NDHWC")),
])
def test_attrs_words_of_any_rank_are_checked(text, message):
    with pytest.raises(ModelImportError) as err:
        parse_attrs(text)
    assert str(err.value) == message


def test_layout_words_of_every_rank_name_two_families():
    assert parse_attrs("weights=oidhw data_format=ndhwc strides=2 pads=1,1") == {
        "weights": "OIHW", "data_format": "NHWC", "strides": (2,), "pads": (1, 1)}
    assert parse_attrs("weights=WIO data_format=NCW") == {"weights": "HWIO",
                                                          "data_format": "NCHW"}
