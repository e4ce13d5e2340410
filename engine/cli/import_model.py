"""``gradblocks import MODEL --list`` and ``gradblocks import MODEL --layer NAME -o CANVAS``.

``--list`` prints a table of the model's conv layers (name, op, kernel, strides, dilations,
padding, groups, input and output channels), then one line per conv layer that cannot be
imported and why. ``--layer`` writes a canvas of that layer (:mod:`engine.graph.layer_canvas`) with
its weights as .npy files beside it, the canvas and its arrays as one set, all or nothing
(never over the model, the ``--input`` file or a file that is not a regular file; only a canvas
``gradblocks check`` accepts).

Exit status: 0; 2 for a usage error, an unreadable model, an unknown layer or one that cannot
be translated exactly (one line naming the layer); 1 when a file cannot be written.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from engine.base.names import escaped
from engine.cli.common import Subparsers, print_error, say, shown_path

if TYPE_CHECKING:  # the readers load for an import only (see cmd_import)
    from engine.graph.executor import Executor
    from engine.graph.layer_canvas import Imported
    from engine.io.models.model_import import ConvLayer, ModelLayers

#: The subcommand this module adds, and what it is doing (for the line that says memory ran
#: out).
COMMANDS = {"import": "importing"}


def _size(text: str) -> tuple[int, ...]:
    """``W`` (a 1-D layer's input size, or ``1,W``), ``H,W`` (a 2-D layer's) or ``D,H,W`` (a
    3-D layer's)."""
    try:
        sizes = tuple(int(v) for v in text.split(","))
    except ValueError:
        sizes = ()
    if len(sizes) not in (1, 2, 3):
        raise argparse.ArgumentTypeError(f"{text!r} is not W, H,W or D,H,W (one to three "
                                         "integers)") from None
    if min(sizes) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: every size must be at least 1")
    return sizes


def _batch(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer")
    return n


def add_parser(sub: Subparsers) -> None:
    """Add the ``import`` subcommand to ``gradblocks``' subparsers."""
    p = sub.add_parser("import", help="list a model's conv layers, or write a canvas of one "
                                      "(ONNX, Keras .keras/.h5, .safetensors/.npz weights)")
    p.add_argument("model", help="a .onnx, .keras, .h5, .safetensors or .npz file")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--list", action="store_true", help="print the model's conv layers")
    what.add_argument("--layer", metavar="NAME", help="the conv layer to import")
    what.add_argument("--all", action="store_true",
                      help="every conv layer: one canvas each and index.json in -o DIR")
    p.add_argument("-o", "--output", metavar="CANVAS.gbc.json|DIR",
                   help="the canvas to write (with --layer; replaced atomically), or the "
                        "folder (with --all; created if missing)")
    source = p.add_mutually_exclusive_group()
    source.add_argument("--input", metavar="FILE.npy",
                        help="the input array (in the canvas layout), copied next to the canvas")
    source.add_argument("--input-size", type=_size, metavar="H,W|D,H,W|W",
                        help="the input's height and width, or depth, height and width for a "
                             "3-D layer, or width (or 1,W) for a 1-D one (default: the model's, "
                             "if it says; with --all, for every layer whose model does not, "
                             "skipping the layers it does not fit)")
    p.add_argument("--batch", type=_batch, metavar="N",
                   help="batch size of the random input (default 1)")
    p.add_argument("--weights", metavar="FILE.npz",
                   help="ONNX: arrays for graph inputs without an initializer (weights fed at "
                        "run time), one per input, keyed by the input's name")
    p.add_argument("--layout", choices=("NHWC", "NCHW"),
                   help="the canvas data_format, channels last or first (NDHWC or NCDHW for a "
                        "3-D layer; default: the model's own)")
    p.add_argument("--attrs", metavar="'strides=2,2 padding=SAME ...'",
                   help="attributes for .safetensors/.npz weights: strides, dilations, "
                        "padding, pads=T,B,L,R, groups, weights=OIHW|HWIO, data_format")


def run(opts: argparse.Namespace, _executor: Executor) -> int:
    return cmd_import(opts)


def _given(opts: argparse.Namespace, *names: str) -> bool:
    """Whether any of the options ``names`` (``output``, ``input``, ...) is given."""
    return any(getattr(opts, name) for name in names)


def _options_problem(opts: argparse.Namespace) -> str | None:
    """The first usage problem among the options, before the model is read; None if none."""
    if opts.layer is not None and not opts.output:
        return "import --layer needs -o CANVAS.gbc.json (the canvas to write)"
    if opts.all and (not opts.output or _given(opts, "input")):
        return ("import --all needs -o DIR and takes no --input (each layer's input is random: "
                "its size the model's, or --input-size for the layers the model gives none)")
    if opts.list and _given(opts, "output", "input", "input_size", "batch"):
        return "import --list takes no -o, --input, --input-size or --batch"
    if opts.input and opts.batch:
        return "import: --batch is for the random input; with --input the array gives the batch"
    return None


def cmd_import(opts: argparse.Namespace) -> int:
    problem = _options_problem(opts)
    if problem:
        print_error(problem)
        return 2
    # the model readers: loaded for an import only (not by every gradblocks command's parser)
    from engine.graph.layer_canvas import read_model, write_layer_canvas
    from engine.io.models.model_import import ModelImportError

    try:
        found = read_model(opts.model, opts.attrs, opts.weights)
        if opts.list:
            return _list_layers(opts, found)
        if opts.all:
            return _import_all(opts, found)
        layer = found.find(opts.layer, shown_path(opts.model))
        done = write_layer_canvas(layer, opts.output, input_hw=opts.input_size,
                                  batch=opts.batch or 1, layout=opts.layout, input_path=opts.input,
                                  protected=(opts.model,))
    except ModelImportError as err:
        print_error(str(err))
        return 2
    except OSError as err:
        print_error(f"cannot write {shown_path(repr(opts.output))}: {err.strerror or err} (the "
                    "previous files, if any, are unchanged)")
        return 1
    say(_layer_line(layer, done))
    for line in _layer_notes(opts, layer):
        say(line)
    for path in done.files:
        say(f"wrote {escaped(path)}")
    return 0


def _list_layers(opts: argparse.Namespace, found: ModelLayers) -> int:
    """``--list``: the table of the model's conv layers, then why each other one is refused."""
    from engine.graph.model_canvases import list_lines, plan_model
    from engine.graph.report import text_table

    rows, refused = list_lines(plan_model(found, 1, opts.layout))
    say(text_table(rows) if len(rows) > 1 else
        f"{escaped(opts.model)}: no importable conv layers")
    for reason in refused:
        say(f"cannot import: {reason}")
    return 0


def _import_all(opts: argparse.Namespace, found: ModelLayers) -> int:
    """``--all``: a canvas per conv layer and ``index.json`` in the ``-o`` folder."""
    from engine.graph.model_canvases import write_model_canvases

    index = write_model_canvases(found, opts.output, batch=opts.batch or 1,
                                 layout=opts.layout, protected=(opts.model,),
                                 input_hw=opts.input_size)
    written = sum("canvas" in item for item in index)
    for item in index:
        if "skipped" in item:
            say(f"skipped: {escaped(item['skipped'])}")
    say(f"wrote {written} canvases and {escaped(opts.output)}/index.json "
        f"({len(index) - written} conv layers skipped)")
    return 0


def _layer_line(layer: ConvLayer, done: Imported) -> str:
    """The imported layer as the canvas computes it: op, layout, padding, shapes."""
    conv = done.conv
    return (f"layer {escaped(layer.name)}: {layer.op}, {conv.op} {conv.attrs['data_format']} "
            f"padding {conv.attrs['padding']}"
            + (f" {conv.attrs['explicit_paddings']}" if conv.attrs["padding"] == "EXPLICIT"
               else "")
            + (f" after a Pad of {list(conv.input_pads)} (before, after per D,H,W)"
               if conv.input_pads else "")
            + f", input {list(conv.input_shape)} -> output {list(done.output_shape)}")


def _layer_notes(opts: argparse.Namespace, layer: ConvLayer) -> list[str]:
    """What the canvas of ``layer`` does not say by itself: the batch it chose, a separable or
    1-D layer's translation, and the bias and activation it leaves out."""
    notes = []
    if layer.batch is None and opts.batch is None and opts.input is None:
        notes.append("batch 1: the model does not fix its batch (a symbolic or unknown size); "
                     "--batch N sets it")
    if layer.pointwise is not None:
        notes.append("separable: the depthwise conv (forward) feeds the 1x1 pointwise conv "
                     "(pointwise_forward); grad_input and grad_filter are the whole layer's "
                     "gradients")
    if layer.conv1d:
        notes.append(f"1-D conv: imported as a 2-D conv of height 1 (kernel "
                     f"{'x'.join(map(str, layer.kernel))}, strides "
                     f"{','.join(map(str, layer.strides))}, dilations "
                     f"{','.join(map(str, layer.dilations))}; a note on the canvas says so)")
    return notes + _final_notes(layer)


def _final_notes(layer: ConvLayer) -> list[str]:
    """The bias and activation the model applies after the conv, which the canvas leaves out."""
    notes = []
    last = "pointwise_forward" if layer.pointwise is not None else "forward"
    if layer.final.bias is not None:
        notes.append(f"bias [{layer.final.bias.shape[0]}]: saved as the Tensor block 'bias' "
                     f"(TensorFlow's conv op has no bias; add it after {last} yourself)")
    if layer.final.activation:
        notes.append(f"activation {escaped(layer.final.activation, 60)}: the model applies it "
                     "after the conv (and the bias); the canvas computes the conv alone (a note "
                     "on the canvas says so)")
    return notes
