"""Benchmark of the desktop app: ``python -m app.bench_app [--blocks 200] [--repeat 5]``.

Measures (medians, wall clock, offscreen unless QT_QPA_PLATFORM says otherwise):

- open: loading a canvas of N blocks from disk into the window, building its nodes and finishing
  shape inference (target < 2 s for 200 blocks);
- edit: one attribute edit made through the attribute panel, including the re-inference of the
  whole canvas and the node updates (target < 50 ms);
- with ``--thumbnail``: drawing the previews of every block after a run, and a node preview
  (engine.view.thumbnail, pixmap, tooltip) of a 64x128x128x64 float32 tensor as an NHWC activation
  (signed, and all-positive, which scans the whole tensor for a negative value) and as a
  (kh, kw, in, out) filter montage (target < 50 ms each).

``python -m app.bench_app --latency`` instead measures how responsive the window stays while the
biggest engine benchmark case runs in it (:func:`latency`): a 10 ms timer on the GUI thread
records how late each tick fires, from Run until the result is shown (target: every tick
< 100 ms late). ``--latency-source`` does the same while a 64x128x128x64 random_normal source
is generated.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import app  # noqa: F401  (PySide6 refcount workaround first)
from engine.graph.canvas import Canvas
from engine.graph.canvas_file import save_canvas

GROUP = 5  # blocks per gradient group


def big_canvas(n_blocks: int = 200) -> Canvas:
    """Groups of x, filter_sizes, dy -> Conv2DBackpropFilter -> Output, laid out in a grid."""
    c = Canvas()
    for g in range(max(1, n_blocks // GROUP)):
        col, row = g % 8, g // 8
        x0, y0 = col * 900.0, row * 420.0
        x = c.add_node("Tensor", pos=(x0, y0), attrs={"shape": [1, 8, 8, 3]}, id=f"x{g}")
        fs = c.add_node("IntVector", pos=(x0, y0 + 120), attrs={"values": [3, 3, 3, 4]},
                        id=f"fs{g}")
        dy = c.add_node("Tensor", pos=(x0, y0 + 240), attrs={"shape": [1, 8, 8, 4]}, id=f"dy{g}")
        grad = c.add_node("Conv2DBackpropFilter", pos=(x0 + 320, y0 + 100), id=f"grad{g}")
        out = c.add_node("Output", pos=(x0 + 640, y0 + 100), id=f"out{g}")
        c.connect((x.id, "output"), (grad.id, "input"))
        c.connect((fs.id, "output"), (grad.id, "filter_sizes"))
        c.connect((dy.id, "output"), (grad.id, "out_backprop"))
        c.connect((grad.id, "output"), (out.id, "input"))
    return c


def biggest_case_canvas() -> Canvas:
    """engine.bench's biggest case, "filter N=32 56x56x64": x, dy [32,56,56,64] float32 random
    normal sources -> Conv2DBackpropFilter 3x3x64x64 SAME."""
    from engine.bench.kernels import CASES

    case = max(CASES, key=lambda k: k.gflop())
    x_shape, y_shape = case.shapes()
    c = Canvas()
    c.add_node("Tensor", pos=(0, 0), id="x", attrs={"shape": list(x_shape), "seed": 1})
    c.add_node("IntVector", pos=(0, 130), id="fs", attrs={"values": list(case.filter_shape)})
    c.add_node("Tensor", pos=(0, 260), id="dy", attrs={"shape": list(y_shape), "seed": 2})
    c.add_node(case.op, pos=(360, 100), id="grad", attrs=case.attrs())
    c.connect(("x", "output"), ("grad", "input"))
    c.connect(("fs", "output"), ("grad", "filter_sizes"))
    c.connect(("dy", "output"), ("grad", "out_backprop"))
    return c


def source_canvas() -> Canvas:
    """One 64x128x128x64 float32 random_normal Tensor source (256 MiB)."""
    c = Canvas()
    c.add_node("Tensor", id="x", attrs={"shape": [64, 128, 128, 64], "seed": 1})
    return c


def latency(window, canvas: Canvas, select: str, tick_ms: int = 10) -> tuple[list[float], float]:
    """Load ``canvas``, show ``select`` in the viewer, press Run and measure until the result
    is shown: (lateness of every timer tick in ms, wall time of the run in s)."""
    from PySide6 import QtCore, QtWidgets

    qapp = QtWidgets.QApplication.instance()
    window.doc.load(canvas, None)
    window.session.runner.executor.clear_cache()
    window.adapter.select([select])
    qapp.processEvents()
    late: list[float] = []
    last = [time.perf_counter()]

    def tick() -> None:
        now = time.perf_counter()
        late.append(max(0.0, (now - last[0]) * 1000 - tick_ms))
        last[0] = now

    timer = QtCore.QTimer()
    timer.setTimerType(QtCore.Qt.PreciseTimer)
    timer.timeout.connect(tick)
    t0 = time.perf_counter()
    timer.start(tick_ms)
    last[0] = time.perf_counter()
    assert window.run()
    window.wait_for_run(600_000)
    output = window.session.output(select)[1]
    loop = QtCore.QEventLoop()
    check = QtCore.QTimer()
    check.timeout.connect(lambda: window.viewer_dock.viewer.array is output and loop.quit())
    check.start(5)
    loop.exec()  # until shown (a big tensor: after its summary on a worker thread)
    check.stop()
    qapp.processEvents()
    wall = time.perf_counter() - t0
    timer.stop()
    return late, wall


def latency_main(args) -> int:
    from PySide6 import QtCore, QtWidgets

    from app.main_window import MainWindow

    qapp = QtWidgets.QApplication.instance() or QtWidgets.QApplication([sys.argv[0]])
    tmp = Path(tempfile.mkdtemp(prefix="gradblocks-bench-"))
    settings = QtCore.QSettings(str(tmp / "settings.ini"), QtCore.QSettings.IniFormat)
    settings.setValue("run/auto_run", False)
    window = MainWindow(settings=settings, recovery_dir=None, autosave=False,
                        restore_layout=False, quiet=True)
    window.show()
    qapp.processEvents()
    cases = [("biggest engine.bench case (filter N=32 56x56x64)", biggest_case_canvas(), "grad")]
    if args.latency_source:
        cases.append(("64x128x128x64 float32 random_normal source", source_canvas(), "x"))
    for name, canvas, select in cases:
        for _ in range(args.repeat):
            late, wall = latency(window, canvas, select)
            late.sort()
            print(f"{name}: run + show {wall:6.2f} s, {len(late)} ticks, event latency "
                  f"median {statistics.median(late):6.1f} ms, p99 "
                  f"{late[int(len(late) * 0.99)]:6.1f} ms, max {late[-1]:6.1f} ms"
                  f"   target max < 100 ms", flush=True)
    window.doc.undo_stack.setClean()
    window.close()
    return 0


def parse_args(argv: list[str] | None):
    """The benchmark's options (``--help`` lists them)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--blocks", type=int, default=200)
    p.add_argument("--repeat", type=int, default=5, help="window opens (runs) to time")
    p.add_argument("--edits", type=int, default=30, help="attribute edits to time")
    p.add_argument("--thumbnail", action="store_true",
                   help="also time canvas thumbnails of a 64x128x128x64 float32 tensor")
    p.add_argument("--latency", action="store_true",
                   help="measure GUI event latency while the biggest engine case runs")
    p.add_argument("--latency-source", action="store_true",
                   help="with --latency, also while a 64x128x128x64 source is generated")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.latency or args.latency_source:
        return latency_main(args)

    from PySide6 import QtCore, QtWidgets

    qapp = QtWidgets.QApplication.instance() or QtWidgets.QApplication([sys.argv[0]])
    tmp = Path(tempfile.mkdtemp(prefix="gradblocks-bench-"))
    canvas = big_canvas(args.blocks)
    path = tmp / "big.gbc.json"
    save_canvas(canvas, path)
    settings = QtCore.QSettings(str(tmp / "settings.ini"), QtCore.QSettings.IniFormat)
    window, open_times, compile_times = time_opens(qapp, path, settings, args.repeat)
    n_nodes = len(window.doc.canvas.nodes)
    n_errors = sum(len(v) for v in window.session.plan.errors.values())
    edit_times = time_edits(qapp, window, args.edits)

    med = statistics.median
    print(f"canvas: {n_nodes} blocks, {len(window.doc.canvas.edges)} wires, "
          f"{n_errors} inference errors")
    print(f"open + shape inference : median {med(open_times) * 1000:8.1f} ms "
          f"(min {min(open_times) * 1000:.1f}, n={len(open_times)})   target < 2000 ms")
    print(f"  of which compile     : median {med(compile_times) * 1000:8.1f} ms")
    print(f"attribute edit + infer : median {med(edit_times) * 1000:8.1f} ms "
          f"(min {min(edit_times) * 1000:.1f}, n={len(edit_times)})   target < 50 ms")
    if args.thumbnail:
        bench_canvas_previews(window, args.repeat)
    window.doc.undo_stack.setClean()
    window.close()
    if args.thumbnail:
        bench_thumbnails(args.repeat)
    return 0


def time_opens(qapp, path: Path, settings, repeat: int):
    """Open ``path`` in ``repeat`` new windows: (the last window, open times, compile
    times), in seconds."""
    from app.main_window import MainWindow

    open_times, compile_times = [], []
    window = None
    for _ in range(repeat):
        if window is not None:
            window.doc.undo_stack.setClean()
            window.close()
            window.deleteLater()
            qapp.processEvents()
        window = MainWindow(settings=settings, recovery_dir=None, autosave=False,
                            restore_layout=False, quiet=True)
        window.show()
        qapp.processEvents()
        t0 = time.perf_counter()
        assert window.files.open_path(path, ask=False)
        qapp.processEvents()
        open_times.append(time.perf_counter() - t0)
        compile_times.append(window.session.compile_seconds)
    return window, open_times, compile_times


def time_edits(qapp, window, edits: int) -> list[float]:
    """Seconds of each of ``edits`` attribute edits through the panel (strides of one gradient
    block, alternating values), shape inference included."""
    window.adapter.select(["grad0"])
    qapp.processEvents()
    row = window.attributes.rows["strides"]
    edit_times = []
    for i in range(edits):
        value = "2" if i % 2 == 0 else "1"
        row.editor.cells[1].setText(value)
        row.editor.cells[2].setText(value)
        t0 = time.perf_counter()
        window.attributes.commit("strides")
        qapp.processEvents()
        edit_times.append(time.perf_counter() - t0)
    assert window.doc.canvas.nodes["grad0"].attrs["strides"] in ([1, 1, 1, 1], [1, 2, 2, 1])
    return edit_times


def bench_canvas_previews(window, repeat: int) -> None:
    """Median time to draw the previews of every block of the open canvas after a run."""
    window.run()
    window.wait_for_run()
    previews = window.previews
    n = sum(1 for key in window.session.outputs if key[1] == "output")

    def redraw() -> None:
        previews._shown.clear()  # forget what is drawn: every node is drawn again
        previews.update()

    med, low, count = _median_ms(redraw, repeat)
    print(f"previews of {n} blocks after a run: median {med:8.1f} ms (min {low:.1f}, "
          f"n={count})")


def _median_ms(fn, repeat: int) -> tuple[float, float, int]:
    """(median, min) in ms of ``repeat`` timed calls after one warm-up call, and the count."""
    times = []
    for _ in range(max(repeat, 3) + 1):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    times = times[1:]
    return statistics.median(times) * 1000, min(times) * 1000, len(times)


def bench_thumbnails(repeat: int) -> None:
    """Median times of the engine thumbnail, and of a whole node preview (thumbnail, QPixmap,
    the tooltip's min .. max over the tensor), of a 64x128x128x64 float32 tensor."""
    import numpy as np

    from app.node_previews import THUMB_SIZE, preview_content
    from engine.view.thumbnail import thumbnail

    big = np.random.default_rng(0).standard_normal((64, 128, 128, 64), dtype=np.float32)
    cases = (("NHWC activation, signed", big, ("N", "H", "W", "C")),
             ("NHWC activation, >= 0", np.abs(big), ("N", "H", "W", "C")),
             ("filter (kh, kw, in, out)", big, ("kh", "kw", "in", "out")))
    for name, a, axes in cases:
        for what, fn in (("thumbnail", lambda a=a, axes=axes: thumbnail(a, axes, THUMB_SIZE)),
                         ("node preview", lambda a=a, axes=axes: preview_content(a, axes,
                                                                                 THUMB_SIZE))):
            med, low, n = _median_ms(fn, repeat)
            print(f"{what:12s} {name:24s}: median {med:8.1f} ms (min {low:.1f}, n={n})"
                  + ("   target < 50 ms" if what == "thumbnail" else ""))


if __name__ == "__main__":
    sys.exit(main())
