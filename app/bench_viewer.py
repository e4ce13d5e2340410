"""Benchmark of the tensor viewer: ``python -m app.bench_viewer``.

Times ``TensorViewer.show_tensor`` of a 64 in x 64 out 3x3 filter (shape 3x3x64x64, the filter
layout kh, kw, in, out), which opens as a montage, alone and together with the Qt paint of the
image a user waits for. Issue target: under 200 ms. Reports the median of ``runs`` after one
warm-up, each run on a fresh filter of the same shape.
"""

from __future__ import annotations

import os
import statistics
import time

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import numpy as np
from PySide6 import QtWidgets

from app.viewer.tensor_viewer import TensorViewer

FILTER_SHAPE = (3, 3, 64, 64)


def bench_montage(runs: int = 7) -> dict[str, float]:
    """Median seconds of ``show_tensor`` (key ``show``) and of ``show_tensor`` + paint
    (key ``show_and_paint``) of a 3x3x64x64 filter in montage mode."""
    app = QtWidgets.QApplication.instance() or QtWidgets.QApplication([])
    viewer = TensorViewer()
    viewer.resize(1400, 420)
    viewer.show()
    app.processEvents()
    rng = np.random.default_rng(0)
    show, total = [], []
    for k in range(runs + 1):
        w = rng.standard_normal(FILTER_SHAPE).astype(np.float32)
        t0 = time.perf_counter()
        viewer.show_tensor(w, ("kh", "kw", "in", "out"), f"filter {k}")
        t1 = time.perf_counter()
        viewer.image_page.grab()  # renders the page: the paint a user would wait for
        app.processEvents()
        t2 = time.perf_counter()
        if k:  # the first run is the warm-up
            show.append(t1 - t0)
            total.append(t2 - t0)
        if viewer.mode_combo.currentText() != "montage" or viewer.current_image().shape != (
                64 * 4 - 1, 64 * 4 - 1):
            raise RuntimeError("the filter was not shown as a 64 x 64 montage")
    viewer.close()
    return {"show": statistics.median(show), "show_and_paint": statistics.median(total)}


def main() -> int:
    runs = 7
    r = bench_montage(runs)
    print(f"viewer, 3x3x64x64 filter as a montage (median of {runs}): "
          f"show_tensor {1e3 * r['show']:.1f} ms, with paint {1e3 * r['show_and_paint']:.1f} ms "
          f"(target < 200 ms)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
