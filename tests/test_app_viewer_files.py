"""The tensor viewer's Save .npy / Save PNG buttons write like every other save: atomically, keeping
the replaced file's permission bits and writing through a symbolic link."""

from __future__ import annotations

import os

import numpy as np
import pytest

pytest.importorskip("NodeGraphQt")

from PySide6 import QtCore, QtGui, QtWidgets

from app.viewer.tensor_viewer import TensorViewer


@pytest.fixture
def viewer(qtbot):
    v = TensorViewer()
    qtbot.addWidget(v)
    v.resize(900, 400)
    v.show()
    qtbot.waitExposed(v)
    v.show_tensor(np.arange(24.0).reshape(2, 3, 4))
    return v


@pytest.mark.parametrize("kind", ["npy", "png"])
def test_saving_over_a_symlinked_0640_file_writes_its_target(qtbot, viewer, tmp_path, monkeypatch,
                                                             kind):
    target = tmp_path / "real" / f"t.{kind}"
    target.parent.mkdir()
    target.write_bytes(b"old")
    target.chmod(0o640)
    link = tmp_path / f"link.{kind}"
    link.symlink_to(target)
    monkeypatch.setattr(QtWidgets.QFileDialog, "getSaveFileName",
                        staticmethod(lambda *a, **k: (str(link), "")))
    button = viewer.npy_button if kind == "npy" else viewer.png_button
    qtbot.mouseClick(button, QtCore.Qt.LeftButton)
    assert link.is_symlink() and (target.stat().st_mode & 0o777) == 0o640
    if kind == "npy":
        np.testing.assert_array_equal(np.load(target), np.arange(24.0).reshape(2, 3, 4))
    else:
        assert QtGui.QImage(str(target)).width() > 100
    assert not [p for p in tmp_path.rglob("*.tmp")]


def test_a_failed_npy_save_keeps_the_old_file(qtbot, viewer, tmp_path, monkeypatch):
    path = tmp_path / "t.npy"
    path.write_bytes(b"old")
    warned = []
    monkeypatch.setattr(QtWidgets.QMessageBox, "warning",
                        staticmethod(lambda _p, _t, text, *a: warned.append(text)))
    monkeypatch.setattr(QtWidgets.QFileDialog, "getSaveFileName",
                        staticmethod(lambda *a, **k: (str(path), "")))

    def full(*_args):
        raise OSError(28, "No space left on device")

    import engine.base.atomic

    monkeypatch.setattr(engine.base.atomic.os, "fsync", full)
    qtbot.mouseClick(viewer.npy_button, QtCore.Qt.LeftButton)
    assert path.read_bytes() == b"old" and os.listdir(tmp_path) == ["t.npy"]
    assert warned and "No space left" in warned[0]


def test_a_name_without_the_suffix_gets_it(qtbot, viewer, tmp_path, monkeypatch):
    monkeypatch.setattr(QtWidgets.QFileDialog, "getSaveFileName",
                        staticmethod(lambda *a, **k: (str(tmp_path / "t"), "")))
    qtbot.mouseClick(viewer.npy_button, QtCore.Qt.LeftButton)
    assert np.load(tmp_path / "t.npy").shape == (2, 3, 4)
