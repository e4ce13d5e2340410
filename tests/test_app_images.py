"""Images in the app: a dropped PNG/JPEG becomes a Tensor block (fill=image) whose shape shows on
its port before running; the path picker of fill=image offers images."""

from __future__ import annotations

import numpy as np
from PIL import Image
from PySide6 import QtCore, QtWidgets

from engine.graph.canvas_file import save_canvas
from tests.app_support import drop_mime, grad_canvas, url_mime, wait_run

RGB = (np.arange(4 * 6 * 3).reshape(4, 6, 3) * 11 % 256).astype(np.uint8)  # H=4, W=6


def out_label(w, node_id, port="output") -> str:
    node = w.adapter.node(node_id)
    return node.view.get_output_text_item(node.outputs()[port].view).toPlainText()


def new_nodes(w, old: set[str]) -> list:
    return [n for n in w.doc.canvas.nodes.values() if n.id not in old]


def test_dropped_png_becomes_an_image_tensor_with_its_shape_on_the_port(tmp_path, qtbot,
                                                                         window):
    path = tmp_path / "c.gbc.json"
    save_canvas(grad_canvas(), path)
    assert window.files.open_path(path, ask=False)
    Image.fromarray(RGB).save(tmp_path / "photo.png")
    Image.fromarray(RGB[:, :, 0]).save(tmp_path / "gray.jpg", quality=100)
    before = set(window.doc.canvas.nodes)
    drop_mime(window, url_mime(tmp_path / "photo.png", tmp_path / "gray.jpg"),
              QtCore.QPoint(250, 150))
    photo, gray = new_nodes(window, before)
    assert photo.type == gray.type == "Tensor"
    assert photo.attrs == {"fill": "image", "path": "photo.png", "color": "rgb"}
    assert gray.attrs == {"fill": "image", "path": "gray.jpg", "color": "gray"}
    assert window.session.plan.specs[(photo.id, "output")].shape == (1, 4, 6, 3)
    assert out_label(window, photo.id) == "output  1×4×6×3 f32"  # known before any run
    assert out_label(window, gray.id) == "output  1×4×6×1 f32"
    wait_run(qtbot, window)
    _port, value = window.session.output(photo.id)
    np.testing.assert_array_equal(value[0], (RGB / 255).astype(np.float32))


def test_dropped_corrupt_image_warns_and_its_block_names_the_path(tmp_path, window):
    (tmp_path / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n not really")
    drop_mime(window, url_mime(tmp_path / "broken.png"), QtCore.QPoint(250, 150))
    [node] = window.doc.canvas.nodes.values()
    assert node.attrs["fill"] == "image"
    [err] = window.session.plan.errors[node.id]
    assert err.attr == "path" and "is not a PNG or JPEG image" in err.message
    assert any("broken.png: path " in m for m in window.log.messages("warning"))


def test_path_picker_offers_images_for_fill_image(tmp_path, window, monkeypatch):
    Image.fromarray(RGB).save(tmp_path / "pic.png")
    window.doc.edit("add", lambda c: c.add_node("Tensor", id="x"))
    window.adapter.select(["x"])
    rows = window.attributes.rows
    assert not rows["path"].editor.isVisible() and not rows["color"].editor.isVisible()
    fill = rows["fill"].editor.combo
    fill.setCurrentText("image")
    fill.activated.emit(fill.currentIndex())
    for name in ("path", "color", "scale", "data_format"):
        assert rows[name].editor.isVisible(), name
    assert not rows["shape"].editor.isVisible()
    asked: list[tuple[str, str]] = []

    def ask(_parent, _caption, start, file_filter, *_a, **_k):
        asked.append((start, file_filter))
        return str(tmp_path / "pic.png"), ""

    monkeypatch.setattr(QtWidgets.QFileDialog, "getOpenFileName", staticmethod(ask))
    rows["path"].editor.browse_button.click()
    assert "*.png *.jpg *.jpeg" in asked[-1][1] and "*.npy" not in asked[-1][1]
    assert window.doc.canvas.nodes["x"].attrs["path"] == str(tmp_path / "pic.png")
    fmt = rows["data_format"].editor.combo
    fmt.setCurrentText("NCHW")
    fmt.activated.emit(fmt.currentIndex())
    assert out_label(window, "x") == "output  1×3×4×6 f32"
    fill.setCurrentText("file")
    fill.activated.emit(fill.currentIndex())
    assert not rows["color"].editor.isVisible()
    rows["path"].editor.browse_button.click()
    assert "*.npy" in asked[-1][1]
