"""``gradblocks geometry CANVAS NODE -o FILE.png|FILE.gif [--frame K] [--overlap] [--slice S]``.

Checks the canvas (shapes inferred, nothing run: the geometry needs shapes and attributes
only) and draws what a conv block's attributes mean on its shapes (:mod:`engine.explain.geometry`,
:mod:`engine.explain.geometry_render`): a ``.png`` is a still (frame 0, frame ``--frame K``, or with
``--overlap`` the overlap-count map); a ``.gif`` is the looping animation over output positions
(forward and input-gradient ops) or filter taps (filter-gradient ops), at most
:data:`engine.explain.geometry.MAX_FRAMES` frames spread evenly. The file is written atomically,
never over the canvas, a file the canvas reads (an image of a Tensor block) or a file that is not a
regular file (:func:`engine.cli.common.check_target`).

A 3-D block (Conv3D and its gradients) is drawn as depth slices of the 2-D picture: ``--slice S``
picks the output plane (the filter gradient: the depth tap; with ``--overlap``, the input plane)
of a still, and a ``.gif`` steps through every frame of every slice.

NODE is a node id, or a block title naming exactly one block. Exit status: 0; 2 for an invalid
canvas, an unknown node, a block that is not a conv block, a bad extension, frame or output
path; 1 when the file cannot be written.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from engine.base.names import article, escaped
from engine.cli.common import (
    Subparsers,
    UsageError,
    check_target,
    compile_file,
    count_argument,
    print_error,
    resolve_node,
    say,
    write_target,
)
from engine.explain.terms import OPS
from engine.graph.canvas import Canvas
from engine.graph.compiler import Plan, place
from engine.graph.executor import Executor

if TYPE_CHECKING:  # the renderer loads for this subcommand only
    from engine.explain.geometry import GeometryModel

EXTENSIONS = (".png", ".gif")
#: The executor's memory limit: the canvas is compiled, never run, so any size may be drawn.
NO_RUN_LIMIT = 2**62
#: The subcommand this module adds, and what it is doing (for the line that says memory ran
#: out).
COMMANDS = {"geometry": "drawing the geometry of"}


def add_parser(sub: Subparsers) -> None:
    """Add the ``geometry`` subcommand to ``gradblocks``' subparsers."""
    p = sub.add_parser(
        "geometry", help="draw a conv block's padding, dilated filter, strides and output "
                         "grid as a PNG still or a GIF animation")
    p.add_argument("canvas", help="a .gbc.json canvas file")
    p.add_argument("node", metavar="NODE", help="the conv block: its id, or its title if no "
                                                "other block has it")
    p.add_argument("-o", "--output", required=True, metavar="FILE.png|FILE.gif",
                   help="the picture to write (replaced atomically): .png a still, .gif the "
                        "animation")
    p.add_argument("--frame", type=count_argument, default=None, metavar="K",
                   help="the frame of the still (default 0; .png only)")
    p.add_argument("--overlap", action="store_true",
                   help="draw the overlap-count map instead (.png only)")
    p.add_argument("--slice", type=count_argument, default=None, metavar="S", dest="depth_slice",
                   help="a 3-D block's depth slice (default 0; .png only): the output plane "
                        "(the filter gradient: the depth tap), with --overlap the input plane")
    # nothing runs: no memory budget applies to a canvas that is only checked
    p.set_defaults(memory_limit=NO_RUN_LIMIT)


def run(opts: argparse.Namespace, executor: Executor) -> int:
    return cmd_geometry(opts, executor)


def _options_problem(opts: argparse.Namespace) -> str | None:
    ext = Path(opts.output).suffix.lower()
    if ext not in EXTENSIONS:
        return (f"output {opts.output!r}: the extension must be .png (a still) or .gif (the "
                f"animation), got {ext or 'none'!r}")
    if ext == ".gif" and getattr(opts, "depth_slice", None) is not None:
        return "--slice is for a .png still; a .gif holds every depth slice"
    if ext == ".gif" and (opts.frame is not None or opts.overlap):
        return "--frame and --overlap are for a .png still; a .gif holds every frame"
    if opts.frame is not None and opts.overlap:
        return "--frame and --overlap exclude each other: the overlap map has no frames"
    return None


def _conv_block(canvas: Canvas, plan: Plan, text: str) -> str:
    """The id of the conv block ``text`` names (by id or title; a port is refused):
    UsageError otherwise."""
    node_id, port = resolve_node(canvas, text)
    label = place(plan.label(node_id))
    node = canvas.nodes[node_id]
    if port is not None and node_id != text:
        raise UsageError(f"geometry takes a block, not a port: {text!r}")
    if node.type not in OPS:
        raise UsageError(f"{label} ({node_id}) is {article(node.type)} block, not a conv block: "
                         f"geometry takes {', '.join(OPS)}")
    return node_id


def cmd_geometry(opts: argparse.Namespace, executor: Executor) -> int:
    """The ``geometry`` subcommand; returns the exit status."""
    problem = _options_problem(opts)
    if problem:
        print_error(problem)
        return 2
    if not check_target(opts.output, opts.canvas):
        return 2
    compiled = compile_file(opts.canvas, executor)
    if compiled is None:
        return 2
    canvas, plan = compiled
    if not check_target(opts.output, opts.canvas, canvas):  # never a picture the canvas reads
        return 2
    try:
        node_id = _conv_block(canvas, plan, opts.node)
    except UsageError as err:
        print_error(str(err))
        return 2
    # Pillow and the renderer load only for this subcommand (gradblocks starts for every one)
    from engine.explain.geometry import model_for_step
    from engine.explain.geometry_render import picture_title, write_gif

    step = next(s for s in plan.steps if s.node_id == node_id)
    model = model_for_step(step, plan.specs)
    title = picture_title(plan.label(node_id), node_id, canvas.nodes[node_id].type)
    if opts.output.lower().endswith(".gif"):
        count: list[int] = []
        if not write_target(opts.output, lambda f: count.append(write_gif(model, title, f))):
            return 1
        say(f"wrote {escaped(opts.output)}: {count[0]} frame(s) of "
            f"{model.frame_count * model.slice_count}")
        return 0
    return _write_picture(opts, model, title, f"{place(plan.label(node_id))} ({node_id})")


def _write_picture(opts: argparse.Namespace, model: GeometryModel, title: str,
                   label: str) -> int:
    """The PNG of one frame (``--frame``, default 0) or of the overlap (``--overlap``) of the
    block ``label``; the exit status."""
    from engine.explain.geometry_render import render_frame, render_overlap, write_png

    depth = _depth_slice(opts, model, label)
    if depth is None:
        return 2
    if opts.overlap:
        image = render_overlap(model, title, depth)
    else:
        k = opts.frame or 0
        if not model.frame_count:
            print_error(f"{label} has no frames (no output positions): --overlap draws its "
                        "geometry")
            return 2
        if k >= model.frame_count:
            print_error(f"--frame {k}: {label} has {model.frame_count} frame(s), "
                        f"0 to {model.frame_count - 1}")
            return 2
        image = render_frame(model, k, title, depth)
    if not write_target(opts.output, lambda f: write_png(image, f)):
        return 1
    say(f"wrote {escaped(opts.output)}: {image.width}x{image.height}")
    return 0


def _depth_slice(opts: argparse.Namespace, model: GeometryModel, label: str) -> int | None:
    """``--slice`` checked against the block (0 when absent); None after saying what is
    wrong."""
    s = getattr(opts, "depth_slice", None)
    if s is None:
        return 0
    if model.depth is None:
        print_error(f"--slice {s}: {label} is a 2-D block, it has no depth slices")
        return None
    count, what = ((model.depth.size, "input plane(s)") if opts.overlap
                   else (model.slice_count, "depth tap(s)" if model.kind == "filter"
                         else "output plane(s)"))
    if s >= count:
        print_error(f"--slice {s}: {label} has {count} {what}, 0 to {count - 1}")
        return None
    return s
