"""Benchmark of the tensor viewer: ``python -m app.bench_viewer``.

Prints the median time (of 7, after one warm-up) for the viewer to show a 64x64x3x3 filter as a
montage, including the Qt paint of the image tab (issue target: under 200 ms).
"""

from __future__ import annotations

import os
import statistics
import time

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import numpy as np
from PySide6 import QtWidgets

from app.tensor_viewer import TensorViewer


def main() -> int:
    app = QtWidgets.QApplication.instance() or QtWidgets.QApplication([])
    viewer = TensorViewer()
    viewer.resize(1200, 600)
    viewer.show()
    rng = np.random.default_rng(0)
    filters = [rng.standard_normal((3, 3, 64, 64)).astype(np.float32) for _ in range(8)]
    times = []
    for k, w in enumerate(filters):
        t0 = time.perf_counter()
        viewer.show_tensor(w, ("kh", "kw", "in", "out"), f"filter {k}")
        viewer.tabs.widget(0).grab()  # forces the paint a user would wait for
        app.processEvents()
        times.append(time.perf_counter() - t0)
    assert viewer.mode_combo.currentText() == "montage"
    print(f"montage of a 3x3x64x64 filter: median {1e3 * statistics.median(times[1:]):.1f} ms "
          f"(min {1e3 * min(times[1:]):.1f}, max {1e3 * max(times[1:]):.1f}, 7 runs)")
    viewer.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
