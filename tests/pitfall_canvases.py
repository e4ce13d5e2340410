"""The pitfalls gallery (assets/examples/pitfalls/): one canvas per framework pitfall.

``python -m tests.pitfall_canvases`` writes them; ``tests/test_pitfalls.py`` checks that the
committed files are what this script builds and that each canvas shows what its note says.
Layout: the note at the top left, below it the groups of blocks in frames, side by side.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from engine.graph.canvas import Canvas
from engine.graph.canvas_file import dumps

PITFALLS_DIR = Path(__file__).resolve().parents[1] / "assets" / "examples" / "pitfalls"

#: Scene units: a column of blocks, a row of blocks, the margin inside a frame.
COLUMN, ROW, MARGIN, NODE_W, NODE_H = 340.0, 250.0, 40.0, 290.0, 200.0
NOTE_W, NOTE_H = 780.0, 130.0
TOP = NOTE_H + 60.0


class Board:
    """A canvas being laid out on a grid of (column, row) cells under the note."""

    def __init__(self, note: str):
        self.canvas = Canvas()
        self.canvas.add_note((0.0, 0.0), note, size=(NOTE_W, NOTE_H), id="about_note")

    def block(self, node_id: str, type_id: str, cell: tuple[float, float], title: str,
              **attrs) -> str:
        x = MARGIN + cell[0] * COLUMN
        y = TOP + MARGIN + cell[1] * ROW
        self.canvas.add_node(type_id, (x, y), attrs, id=node_id, title=title)
        return node_id

    def wire(self, src: str, dst: str, port: str, src_port: str = "output") -> None:
        self.canvas.connect((src, src_port), (dst, port))

    def frame(self, frame_id: str, title: str, cells: tuple[tuple[float, float],
                                                          tuple[float, float]],
              colour: str) -> None:
        """A frame around the cells from ``cells[0]`` to ``cells[1]`` (inclusive)."""
        (c0, r0), (c1, r1) = cells
        x0, y0 = MARGIN + c0 * COLUMN - 20, TOP + MARGIN + r0 * ROW - 30
        x1, y1 = MARGIN + c1 * COLUMN + NODE_W + 20, TOP + MARGIN + r1 * ROW + NODE_H + 14
        self.canvas.add_frame((x0, y0), (x1 - x0, y1 - y0), title, colour, id=frame_id)


def tensor(b: Board, node_id: str, cell, title: str, shape: list[int], seed: int,
           fill: str = "random_normal", dtype: str = "float32") -> str:
    return b.block(node_id, "Tensor", cell, title, shape=shape, seed=seed, fill=fill,
                   dtype=dtype)


def depthwise_dilations() -> Canvas:
    b = Board(
        "Pitfall: TensorFlow's depthwise backprop ops ignore `dilations` on CPU (tensorflow "
        "issues 19992, 56498, 58351).\n\n"
        "'dilated' blocks are the true filter and input gradients of a 3x3 depthwise conv with "
        "dilations 2; 'as TF returns it' is the same block with dilations 1 (SAME padding keeps "
        "the shapes equal, so nothing warns). Run (F5): the GradChecks PASS the dilated "
        "gradients and FAIL the undilated ones; the Compares show they differ.")
    tensor(b, "x", (0, 0), "x 1x8x8x2", [1, 8, 8, 2], 1)
    b.block("w_sizes", "IntVector", (0, 1), "filter sizes", values=[3, 3, 2, 1])
    tensor(b, "w", (0, 2), "w 3x3x2x1", [3, 3, 2, 1], 2)
    tensor(b, "dy", (0, 3), "dy 1x8x8x2", [1, 8, 8, 2], 3)
    b.block("x_sizes", "IntVector", (0, 4), "input sizes", values=[1, 8, 8, 2])
    dilated = {"padding": "SAME", "dilations": [1, 2, 2, 1]}
    rows = {"dw": 0, "dx": 2}
    for kind, type_id, wrt, first, second in (
            ("dw", "DepthwiseBackpropFilter", "filter", ("x", "input"),
             ("w_sizes", "filter_sizes")),
            ("dx", "DepthwiseBackpropInput", "input", ("x_sizes", "input_sizes"),
             ("w", "filter"))):
        row = rows[kind]
        b.block(f"{kind}_dilated", type_id, (1, row), f"d{kind[1].upper()} dilated", **dilated)
        b.block(f"{kind}_tf", type_id, (1, row + 1), f"d{kind[1].upper()} as TF returns it",
                padding="SAME")
        for node in (f"{kind}_dilated", f"{kind}_tf"):
            b.wire(first[0], node, first[1])
            b.wire(second[0], node, second[1])
            b.wire("dy", node, "out_backprop")
        for node, grad, label in ((f"check_{kind}_dilated", f"{kind}_dilated", "dilated"),
                                  (f"check_{kind}_tf", f"{kind}_tf", "TF")):
            b.block(node, "GradCheck", (2, row + (label == "TF")),
                    f"GradCheck d{kind[1].upper()} {label}", op="DepthwiseConv2dNative",
                    wrt=wrt, samples=0, **dilated)
            b.wire("x", node, "input")
            b.wire("w", node, "filter")
            b.wire("dy", node, "out_backprop")
            b.wire(grad, node, "gradient")
        b.block(f"differ_{kind}", "Compare", (3, row), f"d{kind[1].upper()}: dilated vs TF")
        b.wire(f"{kind}_dilated", f"differ_{kind}", "a")
        b.wire(f"{kind}_tf", f"differ_{kind}", "b")
    b.frame("inputs_frame", "Inputs", ((0, 0), (0, 4)), "#3465a4")
    b.frame("filter_frame", "Filter gradient: which one is right", ((1, 0), (3, 1)), "#4e9a06")
    b.frame("input_frame", "Input gradient: which one is right", ((1, 2), (3, 3)), "#75507b")
    return b.canvas


def same_padding() -> Canvas:
    b = Board(
        "Pitfall: SAME padding with an odd total pad. TensorFlow puts the extra pad row and "
        "column AFTER (bottom/right); ONNX SAME_LOWER (and some ARM backends) put it BEFORE.\n\n"
        "Here 6x6 input, 3x3 filter, stride 2: the total pad is 1. Both conventions are written "
        "as EXPLICIT paddings. Run (F5): 'SAME is pad after' AGREES (TF's SAME is the pad-after "
        "one), 'after vs before' FAILS: the filter gradients differ.")
    tensor(b, "x", (0, 0), "x 1x6x6x2", [1, 6, 6, 2], 21)
    b.block("w_sizes", "IntVector", (0, 1), "filter sizes", values=[3, 3, 2, 4])
    tensor(b, "dy", (0, 2), "dy 1x3x3x4", [1, 3, 3, 4], 22)
    strides = [1, 2, 2, 1]
    b.block("dw_same", "Conv2DBackpropFilter", (1, 0), "dW SAME (TF)", strides=strides,
            padding="SAME")
    b.block("dw_after", "Conv2DBackpropFilter", (1, 1), "dW pad after (TF)", strides=strides,
            padding="EXPLICIT", explicit_paddings=[0, 0, 0, 1, 0, 1, 0, 0])
    b.block("dw_before", "Conv2DBackpropFilter", (1, 2), "dW pad before (SAME_LOWER)",
            strides=strides, padding="EXPLICIT", explicit_paddings=[0, 0, 1, 0, 1, 0, 0, 0])
    for node in ("dw_same", "dw_after", "dw_before"):
        b.wire("x", node, "input")
        b.wire("w_sizes", node, "filter_sizes")
        b.wire("dy", node, "out_backprop")
    b.block("same_is_after", "Compare", (2, 0), "SAME is pad after")
    b.wire("dw_same", "same_is_after", "a")
    b.wire("dw_after", "same_is_after", "b")
    b.block("after_vs_before", "Compare", (2, 2), "after vs before")
    b.wire("dw_after", "after_vs_before", "a")
    b.wire("dw_before", "after_vs_before", "b")
    b.frame("inputs_frame", "Inputs", ((0, 0), (0, 2)), "#3465a4")
    b.frame("grads_frame", "Three paddings", ((1, 0), (1, 2)), "#4e9a06")
    b.frame("checks_frame", "Same or not", ((2, 0), (2, 2)), "#a40000")
    return b.canvas


def input_sizes() -> Canvas:
    b = Board(
        "Pitfall: `input_sizes` is ambiguous for stride > 1. With a 3x3 filter, stride 2 and "
        "SAME padding, inputs of 7x7 and 8x8 both give a 4x4 out_backprop.\n\n"
        "The two Conv2DBackpropInput blocks get the same filter and out_backprop and differ "
        "only in input_sizes: their gradients differ (7x7 pads one row on top, 8x8 none). "
        "Run (F5): each GradCheck PASSES its own. Select a block: the attribute panel lists "
        "every input size consistent with out_backprop.")
    tensor(b, "w", (0, 0), "w 3x3x2x3", [3, 3, 2, 3], 31)
    tensor(b, "dy", (0, 1), "dy 1x4x4x3", [1, 4, 4, 3], 32)
    strides = [1, 2, 2, 1]
    for row, size in ((0, 7), (2, 8)):
        shape = [1, size, size, 2]
        sizes = b.block(f"sizes_{size}", "IntVector", (1, row), f"input sizes {size}x{size}",
                        values=shape)
        x = tensor(b, f"x_{size}", (1, row + 1), f"x {size}x{size} (for the check)", shape,
                   30 + size)
        dx = b.block(f"dx_{size}", "Conv2DBackpropInput", (2, row), f"dX {size}x{size}",
                     strides=strides, padding="SAME")
        b.wire(sizes, dx, "input_sizes")
        b.wire("w", dx, "filter")
        b.wire("dy", dx, "out_backprop")
        check = b.block(f"check_{size}", "GradCheck", (3, row), f"GradCheck {size}x{size}",
                        op="Conv2D", wrt="input", strides=strides, padding="SAME", samples=0)
        b.wire(x, check, "input")
        b.wire("w", check, "filter")
        b.wire("dy", check, "out_backprop")
        b.wire(dx, check, "gradient")
    b.frame("shared_frame", "Shared", ((0, 0), (0, 1)), "#3465a4")
    b.frame("in7_frame", "input_sizes 7x7", ((1, 0), (3, 1)), "#4e9a06")
    b.frame("in8_frame", "input_sizes 8x8", ((1, 2), (3, 3)), "#75507b")
    return b.canvas


HALF_BATCH = 256


def half_precision() -> Canvas:
    b = Board(
        f"Pitfall: half precision. The same filter gradient over a batch of {HALF_BATCH} in "
        "float32, bfloat16 and float16 (inputs drawn once, rounded to each dtype). GradBlocks, "
        "like TensorFlow, accumulates half types in float32 and rounds the result.\n\n"
        "Run (F5) and read each GradCheck's max_rel_error against its float64 numbers: about "
        "1e-7 for float32, a few 1e-3 for bfloat16 (8 significant bits), a few 1e-4 for float16 "
        "(11 bits). "
        "All PASS their own dtype's tolerance.")
    shape_x, shape_dy = [HALF_BATCH, 8, 8, 4], [HALF_BATCH, 8, 8, 4]
    b.block("w_sizes", "IntVector", (0, 0), "filter sizes", values=[3, 3, 4, 4])
    tensor(b, "w", (0, 1), "w 3x3x4x4", [3, 3, 4, 4], 41)
    for col, dtype in enumerate(("float32", "bfloat16", "float16"), start=1):
        x = tensor(b, f"x_{dtype}", (col, 0), f"x {dtype}", shape_x, 42, dtype=dtype)
        dy = tensor(b, f"dy_{dtype}", (col, 1), f"dy {dtype}", shape_dy, 43,
                    fill="random_uniform", dtype=dtype)
        dw = b.block(f"dw_{dtype}", "Conv2DBackpropFilter", (col, 2), f"dW {dtype}")
        b.wire(x, dw, "input")
        b.wire("w_sizes", dw, "filter_sizes")
        b.wire(dy, dw, "out_backprop")
        check = b.block(f"check_{dtype}", "GradCheck", (col, 3), f"GradCheck {dtype}",
                        op="Conv2D", wrt="filter", samples=32)
        b.wire(x, check, "input")
        b.wire("w", check, "filter")
        b.wire(dy, check, "out_backprop")
        b.wire(dw, check, "gradient")
    b.frame("shared_frame", "Shared", ((0, 0), (0, 1)), "#3465a4")
    b.frame("dtypes_frame", "One column per dtype", ((1, 0), (3, 3)), "#4e9a06")
    return b.canvas


def checkerboard() -> Canvas:
    b = Board(
        "Pitfall: checkerboard gradients. A 3x3 kernel with stride 2 (kernel not divisible "
        "by the stride) touches input elements 1, 2 or 4 times, so even an out_backprop and "
        "filter of ones give an input gradient in a checkerboard of 1, 2 and 4.\n\n"
        "Run (F5) and select 'dX 3x3 stride 2': the preview and viewer show the checkerboard; "
        "GradCheck PASSES it (it is the true gradient, not a bug). 'dX 4x4 stride 2' (4 "
        "divisible by 2) is flat inside.")
    tensor(b, "dy", (0, 0), "dy ones 1x8x8x1", [1, 8, 8, 1], 0, fill="ones")
    tensor(b, "w3", (0, 1), "w ones 3x3", [3, 3, 1, 1], 0, fill="ones")
    tensor(b, "w4", (0, 2), "w ones 4x4", [4, 4, 1, 1], 0, fill="ones")
    b.block("sizes", "IntVector", (0, 3), "input sizes", values=[1, 16, 16, 1])
    strides = [1, 2, 2, 1]
    for row, w in ((0, "w3"), (2, "w4")):
        k = w[1]
        dx = b.block(f"dx_{k}", "Conv2DBackpropInput", (1, row), f"dX {k}x{k} stride 2",
                     strides=strides, padding="SAME")
        b.wire("sizes", dx, "input_sizes")
        b.wire(w, dx, "filter")
        b.wire("dy", dx, "out_backprop")
    tensor(b, "x", (1, 1), "x 1x16x16x1 (for the check)", [1, 16, 16, 1], 51)
    b.block("check", "GradCheck", (2, 0), "GradCheck 3x3 stride 2", op="Conv2D", wrt="input",
            strides=strides, padding="SAME", samples=0)
    b.wire("x", "check", "input")
    b.wire("w3", "check", "filter")
    b.wire("dy", "check", "out_backprop")
    b.wire("dx_3", "check", "gradient")
    b.frame("inputs_frame", "Ones", ((0, 0), (0, 3)), "#3465a4")
    b.frame("grads_frame", "Input gradients", ((1, 0), (2, 2)), "#4e9a06")
    return b.canvas


def layouts() -> Canvas:
    b = Board(
        "Lesson: NHWC and NCHW give the same gradient. The data layout only changes where each "
        "number is stored, never its value.\n\n"
        "The green frame computes dW and dX in NHWC, the purple one in NCHW (x and dy "
        "transposed in, dX transposed back). Run (F5): both Compares AGREE. If your framework's "
        "gradients differ between layouts, a transpose is missing or wrong.")
    tensor(b, "x", (0, 0), "x 4x12x12x3", [4, 12, 12, 3], 61)
    tensor(b, "w", (0, 1), "w 3x3x3x8", [3, 3, 3, 8], 62)
    tensor(b, "dy", (0, 2), "dy 4x12x12x8", [4, 12, 12, 8], 63, fill="random_uniform")
    b.block("w_shape", "ShapeOf", (0, 3), "shape of w")
    b.wire("w", "w_shape", "input")
    b.block("x_shape", "ShapeOf", (1, 0), "shape of x (NHWC)")
    b.wire("x", "x_shape", "input")
    b.block("dw", "Conv2DBackpropFilter", (2, 0), "dW (NHWC)")
    b.block("dx", "Conv2DBackpropInput", (2, 1), "dX (NHWC)")
    b.block("x_nchw", "Transpose", (1, 2), "x to NCHW", perm=[0, 3, 1, 2])
    b.block("dy_nchw", "Transpose", (1, 3), "dy to NCHW", perm=[0, 3, 1, 2])
    b.block("x_nchw_shape", "ShapeOf", (1, 4), "shape of x (NCHW)")
    b.block("dw_nchw", "Conv2DBackpropFilter", (2, 2), "dW (NCHW)", data_format="NCHW")
    b.block("dx_nchw", "Conv2DBackpropInput", (2, 3), "dX (NCHW)", data_format="NCHW")
    b.block("dx_back", "Transpose", (2, 4), "dX back to NHWC", perm=[0, 2, 3, 1])
    b.wire("x", "x_nchw", "input")
    b.wire("dy", "dy_nchw", "input")
    b.wire("x_nchw", "x_nchw_shape", "input")
    for dw, x, dy in (("dw", "x", "dy"), ("dw_nchw", "x_nchw", "dy_nchw")):
        b.wire(x, dw, "input")
        b.wire("w_shape", dw, "filter_sizes")
        b.wire(dy, dw, "out_backprop")
    for dx, sizes, dy in (("dx", "x_shape", "dy"), ("dx_nchw", "x_nchw_shape", "dy_nchw")):
        b.wire(sizes, dx, "input_sizes")
        b.wire("w", dx, "filter")
        b.wire(dy, dx, "out_backprop")
    b.wire("dx_nchw", "dx_back", "input")
    b.block("same_dw", "Compare", (3, 1), "dW: NHWC vs NCHW")
    b.wire("dw", "same_dw", "a")
    b.wire("dw_nchw", "same_dw", "b")
    b.block("same_dx", "Compare", (3, 3), "dX: NHWC vs NCHW")
    b.wire("dx", "same_dx", "a")
    b.wire("dx_back", "same_dx", "b")
    b.frame("inputs_frame", "Inputs", ((0, 0), (0, 3)), "#3465a4")
    b.frame("nhwc_frame", "NHWC", ((1, 0), (2, 1)), "#4e9a06")
    b.frame("nchw_frame", "NCHW", ((1, 2), (2, 4)), "#75507b")
    b.frame("checks_frame", "Same?", ((3, 1), (3, 3)), "#a40000")
    return b.canvas


#: File stem -> builder, in the order of section 4 of the explain issue.
PITFALLS: dict[str, Callable[[], Canvas]] = {
    "depthwise_dilations": depthwise_dilations,
    "same_padding_odd_pad": same_padding,
    "ambiguous_input_sizes": input_sizes,
    "half_precision": half_precision,
    "checkerboard_stride": checkerboard,
    "nhwc_vs_nchw": layouts,
}


def rendered() -> dict[str, str]:
    """File name -> the canvas text this script writes."""
    return {f"{stem}.gbc.json": dumps(build()) for stem, build in PITFALLS.items()}


def main() -> None:
    PITFALLS_DIR.mkdir(parents=True, exist_ok=True)
    for name, text in rendered().items():
        (PITFALLS_DIR / name).write_text(text, encoding="utf-8")
        print(PITFALLS_DIR / name)


if __name__ == "__main__":
    main()
