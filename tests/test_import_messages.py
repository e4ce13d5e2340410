"""What a user reads after importing a model: rank and empty-size refusals that say what is
actually wrong, inputs too big for ``gradblocks check`` refused with check's own reason and the
layer's name, and names from the file (BEL, ESC, bidi controls, bad UTF-8, 300 characters)
shown escaped everywhere: --list, the ``layer NAME:`` line, errors and the canvas titles, while
``--layer`` still finds the raw name."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.base.names import MAX_TITLE, escaped, text_problem
from engine.graph.canvas_file import load_canvas, save_canvas
from engine.io.models.model_import import (
    ConvLayer,
    ModelImportError,
    ModelLayers,
    list_rows,
    translate,
)
from engine.shapes.conv import conv2d_geometry

onnx = pytest.importorskip("onnx")
from onnx import helper

from engine.graph.layer_canvas import build_canvas, plan_layer
from engine.io.models.onnx_reader import read_onnx
from tests.test_onnx_hostile import (
    W,
    conv_model,
    gb,
    no_controls,
    one_error,
    raw_tensor,
    refusal,
    the_layer,
)

A = helper.make_attribute


# -- 4. weights of rank 0, 1, 6: say what they are ---------------------------------------------

@pytest.mark.parametrize(("dims", "words"), [
    ([5], ("layer 'c': weights of rank 1 (shape [5]) are no conv's weights [out, in / group, kH, "
          "kW]")),
    ([], "layer 'c': weights of rank 0 (shape []) are no conv's weights"),
    ([3, 2, 1, 1, 1, 1], ("layer 'c': a 4-D conv (weights of rank 6); only 1-D, 2-D and 3-D "
                          "convs can be imported")),
])
def test_weights_of_another_rank_say_their_rank(tmp_path, dims, words):
    n = int(np.prod(dims))
    reason = refusal(conv_model(tmp_path / "m.onnx", weights=raw_tensor(
        "W", dims, raw_data=np.ones(n, np.float32).tobytes())))
    assert reason == words or reason.startswith(words)
    assert "-1-D" not in reason and "0-D" not in reason


# -- 4. zero channels, batch 0, empty inputs: say what is zero ---------------------------------

@pytest.mark.parametrize(("dims", "words"), [
    ([0, 2, 3, 3], ("layer 'c': 0 output channels (weights of shape [3, 3, 2, 0]): nothing to "
                   "compute")),
    ([3, 0, 3, 3], ("layer 'c': 0 input channels (weights of shape [3, 3, 0, 3]): nothing to "
                   "compute")),
])
def test_zero_channels_are_named(tmp_path, dims, words):
    reason = refusal(conv_model(tmp_path / "m.onnx", weights=raw_tensor("W", dims,
                                                                         raw_data=b"")))
    assert reason == words
    assert "dilated kernel" not in reason


def test_zero_output_channels_through_the_cli(tmp_path):
    path = conv_model(tmp_path / "m.onnx", weights=raw_tensor("W", [0, 2, 3, 3], raw_data=b""))
    one_error(gb("import", path, "--layer", "c", "-o", tmp_path / "o.gbc.json"),
              "layer 'c': 0 output channels")


def _layer(tmp_path, **kw) -> ConvLayer:
    return the_layer(conv_model(tmp_path / "m.onnx", **kw), kw.get("name", "c"))


@pytest.mark.parametrize(("batch", "hw", "words"), [
    (0, (5, 5), "layer 'c' on input [0, 2, 5, 5]: the input batch is 0, so the input is empty"),
    (1, (0, 5), "layer 'c' on input [1, 2, 0, 5]: the input height is 0, so the input is empty"),
    (2, (5, 0), "the input width is 0"),
    (-1, (5, 5), "the input batch is -1"),
])
def test_an_empty_input_is_named(tmp_path, batch, hw, words):
    with pytest.raises(ModelImportError) as err:
        plan_layer(_layer(tmp_path), hw, batch)
    assert str(err.value).startswith(words) or words in str(err.value)
    assert "dilated kernel" not in str(err.value)


def test_a_batch_0_input_array_through_the_cli(tmp_path):
    path = conv_model(tmp_path / "m.onnx")
    np.save(tmp_path / "x.npy", np.zeros((0, 2, 5, 5), np.float32))
    one_error(gb("import", path, "--layer", "c", "-o", tmp_path / "o.gbc.json", "--input",
                 tmp_path / "x.npy"), "layer 'c' on input [0, 2, 5, 5]: the input batch is 0")


def test_a_genuinely_small_input_still_says_the_kernel(tmp_path):
    with pytest.raises(ModelImportError, match=r"the output \[1, 3, 0, 3\] is empty \(the "
                                               r"input, padded, is smaller than the dilated"):
        plan_layer(_layer(tmp_path), (2, 5))


@pytest.mark.parametrize("x_shape", [(0, 2, 5, 5), (-1, 2, 5, 5)])
def test_an_onnx_batch_of_0_or_less_is_an_unknown_batch(tmp_path, x_shape):
    layer = _layer(tmp_path, x_shape=x_shape)
    assert (layer.batch, layer.input_hw) == (None, (5, 5))
    conv, out = plan_layer(layer)
    assert (conv.input_shape, out) == ((1, 2, 5, 5), (1, 3, 3, 3))


@pytest.mark.parametrize("x_shape", [(1, 2, 0, 5), (1, 2, 5, -3)])
def test_an_onnx_size_of_0_or_less_is_an_unknown_size(tmp_path, x_shape):
    layer = _layer(tmp_path, x_shape=x_shape)
    assert layer.input_hw is None
    with pytest.raises(ModelImportError, match="the model does not say its input size"):
        plan_layer(layer)


# -- 3. inputs gradblocks check would refuse: refused at import, with check's reason -----------

def _check_says(tmp_path, layer: ConvLayer, hw) -> str:
    """``gradblocks check``'s first problem for the layer's canvas on an input of ``hw``,
    the canvas written by hand (build_canvas plus its filter file, no plan_layer)."""
    conv = translate(layer, hw)
    g = conv2d_geometry(conv.input_shape, layer.weights.shape, **conv.attrs)
    folder = tmp_path / "by_hand"
    folder.mkdir()
    np.save(folder / "f.npy", layer.weights)
    save_canvas(build_canvas(layer, conv, g.output_shape, {"filter": "f.npy"}),
                folder / "c.gbc.json")
    proc = gb("check", folder / "c.gbc.json")
    assert proc.returncode != 0, proc.stdout
    return proc.stderr.splitlines()[1].strip()


def test_an_input_of_2_to_the_40_rows_is_refused_with_checks_reason(tmp_path):
    path = conv_model(tmp_path / "m.onnx", x_shape=(1, 2, 2**40, 8))
    layer = the_layer(path)
    check_reason = _check_says(tmp_path, layer, (2**40, 8))
    assert "65536.00 GiB, more than the memory limit 2.00 GiB" in check_reason
    with pytest.raises(ModelImportError) as err:
        plan_layer(layer)
    assert str(err.value).startswith("layer 'c' on input [1, 2, 1099511627776, 8]: "
                                     "`gradblocks check` would refuse its canvas: ")
    assert check_reason in str(err.value)
    out = tmp_path / "out" / "o.gbc.json"
    out.parent.mkdir()
    one_error(gb("import", path, "--layer", "c", "-o", out), "layer 'c' on input",
              check_reason)
    assert list(out.parent.iterdir()) == []


def test_an_input_size_option_too_big_is_refused_naming_the_layer(tmp_path):
    path = conv_model(tmp_path / "m.onnx")
    one_error(gb("import", path, "--layer", "c", "-o", tmp_path / "o.gbc.json",
                 "--input-size", "40000,40000"),
              "layer 'c' on input [1, 2, 40000, 40000]: `gradblocks check` would refuse",
              "11.92 GiB, more than the memory limit 2.00 GiB")


def test_the_runs_memory_counts_not_only_each_tensor(tmp_path):
    """Every tensor fits a 4 MiB limit; the run (outputs kept, plus workspace) does not."""
    layer = _layer(tmp_path)
    conv, _ = plan_layer(layer, (8, 8), memory_limit=2**22)
    assert conv.input_shape == (1, 2, 8, 8)
    with pytest.raises(ModelImportError) as err:
        plan_layer(layer, (256, 256), memory_limit=2**22)
    assert str(err.value).startswith("layer 'c' on input [1, 2, 256, 256]: `gradblocks check` "
                                     "would refuse its canvas: ")
    assert ": the run would need about " in str(err.value)
    assert "more than the memory limit 4.0 MiB" in str(err.value)


@pytest.mark.parametrize("hw", [(2**31, 8), (8, 10**30), (2**63, 2**63)])
def test_sizes_beyond_int_ranges_are_one_line(tmp_path, hw):
    with pytest.raises(ModelImportError) as err:
        plan_layer(_layer(tmp_path), hw)
    assert str(err.value).startswith("layer 'c' on input [1, 2, ")
    assert "\n" not in str(err.value)


# -- 5. names from the file are shown escaped; --layer finds the raw name -----------------------

EVIL = "e\x1b[31mred\x07"


def test_list_and_import_show_control_characters_escaped(tmp_path):
    path = conv_model(tmp_path / "m.onnx", name=EVIL)
    listed = gb("import", path, "--list")
    assert listed.returncode == 0, listed.stderr
    assert no_controls(listed.stdout)
    assert listed.stdout.splitlines()[1].split()[0] == "e\\x1b[31mred\\x07"
    out = tmp_path / "o.gbc.json"
    done = gb("import", path, "--layer", EVIL, "-o", out)
    assert done.returncode == 0, done.stderr
    assert no_controls(done.stdout + done.stderr)
    assert done.stdout.startswith("layer e\\x1b[31mred\\x07: Conv2D, Conv2D NCHW padding VALID")
    titles = {n["id"]: n["title"] for n in json.loads(out.read_text())["nodes"]}
    assert titles["forward"] == "e\\x1b[31mred\\x07 (Conv2D)"
    assert titles["filter"] == "e\\x1b[31mred\\x07 filter 3x3x2x3"
    assert all(text_problem(t) is None for t in titles.values())
    checked = gb("check", out)
    assert checked.returncode == 0, checked.stderr
    assert no_controls(checked.stdout)


def test_a_300_character_name_makes_valid_titles(tmp_path):
    name = "n" * 300
    layer = _layer(tmp_path, name=name)
    conv, out = plan_layer(layer)
    canvas = build_canvas(layer, conv, out, {"filter": "f.npy", "input": "x" * 250 + ".npy"})
    titles = [node.title for node in canvas.nodes.values()]
    assert all(text_problem(t) is None for t in titles)
    assert canvas.nodes["forward"].title == "n" * 97 + "... (Conv2D)"
    assert len(canvas.nodes["input"].title) == MAX_TITLE


def test_a_name_that_is_not_utf8_is_listed_escaped_and_found_by_its_bytes(tmp_path):
    """protobuf hands such a field over as bytes; the shell hands the argument over as
    surrogate escapes: the two meet."""
    path = conv_model(tmp_path / "m.onnx", name="cX")
    path.write_bytes(path.read_bytes().replace(b"cX", b"c\xff"))
    (layer,) = read_onnx(str(path)).layers
    assert layer.name == "c\udcff"
    assert list_rows([layer])[1][0] == "c\\udcff"
    done = gb("import", path, "--layer", "c\udcff", "-o", tmp_path / "o.gbc.json")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("layer c\\udcff: Conv2D")
    load_canvas(tmp_path / "o.gbc.json")


@pytest.mark.parametrize(("make", "words"), [
    (lambda p: conv_model(p, name=EVIL, attrs=[A("group", 2.0)]),
     "layer 'e\\x1b[31mred\\x07': attribute 'group' has type FLOAT"),
    (lambda p: conv_model(p, name=EVIL, op="\x1b]0;owned\x07"),
     "layer 'e\\x1b[31mred\\x07': op \\x1b]0;owned\\x07 is not a conv"),
    (lambda p: conv_model(p, name=EVIL, weights=raw_tensor("\u202eW", [3, 2, 3, 3],
                                                             raw_data=b"")),
     "weights '\\u202eW': dims [3, 2, 3, 3]"),
])
def test_refusals_quote_names_with_their_escapes(tmp_path, make, words):
    path = make(tmp_path / "m.onnx")
    listed = gb("import", path, "--list")
    assert listed.returncode == 0 and no_controls(listed.stdout + listed.stderr)
    one_error(gb("import", path, "--layer", EVIL, "-o", tmp_path / "o.gbc.json"), words)


def test_an_unknown_layer_lists_the_names_escaped(tmp_path):
    path = conv_model(tmp_path / "m.onnx", name=EVIL)
    one_error(gb("import", path, "--layer", "nope", "-o", tmp_path / "o.gbc.json"),
              "no layer named 'nope' (conv layers: e\\x1b[31mred\\x07)")


def test_two_layers_of_one_name_are_refused_not_guessed(tmp_path):
    conv2 = helper.make_node("Conv", ["X", "W"], ["Y2"], name="c")
    path = conv_model(tmp_path / "m.onnx", extra_nodes=[conv2])
    one_error(gb("import", path, "--layer", "c", "-o", tmp_path / "o.gbc.json"),
              "2 conv layers are named 'c'")


# -- the escape itself --------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "shown"), [
    ("plain_name/conv 1", "plain_name/conv 1"),
    ("\x07\x1b[0m\x00\x7f", "\\x07\\x1b[0m\\x00\\x7f"),
    ("a\nb\tc\r", "a\\nb\\tc\\r"),
    ("\u202eevil\u200b\u2028\u2029", "\\u202eevil\\u200b\\u2028\\u2029"),
    ("\ud800", "\\ud800"),
    ("caf\u00e9 \u65e5\u672c \u0394", "caf\u00e9 \u65e5\u672c \u0394"),
    ("back\\slash", "back\\slash"),
])
def test_escaped_writes_what_repr_writes_for_unprintable_characters(text, shown):
    assert escaped(text) == shown


def test_escaped_shows_a_name_that_is_no_string_as_text():
    assert escaped(5) == "5"
    assert escaped(b"\x07") == "b'\\x07'"


def test_escaped_cuts_to_the_limit():
    assert escaped("abcdefghij", 10) == "abcdefghij"
    assert escaped("abcdefghijk", 10) == "abcdefg..."
    assert escaped("\x07" * 5, 10) == "\\x07\\x0..."


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(exclude_categories=()), max_size=400))
def test_any_escaped_name_is_a_valid_title_and_printable(text):
    out = escaped(text, MAX_TITLE)
    assert text_problem(out) is None
    assert out.isprintable()
    if text.isprintable() and len(text) <= MAX_TITLE:
        assert out == text


def test_list_rows_of_any_names_are_printable():
    rng = random.Random(5)
    layers = []
    for k in range(200):
        name = "".join(chr(rng.choice([rng.randrange(0, 0x20), rng.randrange(0x7f, 0xa0),
                                       rng.randrange(0xd800, 0xe000), 0x202e,
                                       rng.randrange(0x20, 0x7f)])) for _ in range(k % 17 + 1))
        layers.append(ConvLayer(name, (3, 3), (1, 1), (1, 1), "VALID", (0, 0, 0, 0), 1, 2, 3,
                                "NCHW", W.transpose(2, 3, 1, 0)))
    rows = list_rows(layers)
    assert all(cell.isprintable() for row in rows for cell in row)
    assert ModelLayers(layers, {}, {}).find(layers[7].name, "m") is layers[7]


def test_titles_of_a_layer_named_anything_are_valid():
    layer = ConvLayer("\x00\ud800\u2028" * 100, (3, 3), (1, 1), (1, 1), "VALID", (0, 0, 0, 0),
                      1, 2, 3, "NCHW", W.transpose(2, 3, 1, 0),
                      bias=np.zeros(3, np.float32))
    conv, out = plan_layer(layer, (5, 5))
    canvas = build_canvas(layer, conv, out, {"filter": "f.npy", "bias": "b.npy"})
    assert all(text_problem(n.title) is None for n in canvas.nodes.values())


def test_same_lower_pads_are_exact_beyond_float_precision():
    """ONNX SAME_LOWER: total pad = (ceil(H / s) - 1) * s + k - H, the odd pad before. With
    H = 2^55 + 1, s = 2, k = 2 the total is 1 (a float ceil(H / s) would make it 0)."""
    h = 2**55 + 1
    total = (-(-h // 2) - 1) * 2 + 2 - h
    assert total == 1
    layer = ConvLayer("c", (2, 2), (2, 2), (1, 1), "SAME_LOWER", (0, 0, 0, 0), 1, 1, 1, "NCHW",
                      np.ones((2, 2, 1, 1), np.float32))
    conv = translate(layer, (h, 4))
    assert conv.attrs["padding"] == "EXPLICIT"
    assert conv.attrs["explicit_paddings"] == [0, 0, 0, 0, 1, 0, 0, 0]
