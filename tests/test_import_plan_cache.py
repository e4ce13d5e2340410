"""Planning a model's layers checks each distinct geometry's canvas once (a model repeats
its geometries); a layer that differs in any field but its name is checked again, and a
refused layer is refused with its own name every time."""

import dataclasses

import numpy as np
import pytest

from engine.graph import layer_canvas
from engine.io.models.model_import import ConvLayer, ModelImportError


def _layer(name: str, **changes) -> ConvLayer:
    base = ConvLayer(name=name, kernel=(3, 3), strides=(1, 1), dilations=(1, 1), padding="SAME",
                     pads=(0, 0, 0, 0), groups=1, in_channels=2, out_channels=4,
                     data_format="NHWC", weights=np.ones((3, 3, 2, 4), np.float32),
                     input_hw=(8, 8))
    return dataclasses.replace(base, **changes)


@pytest.fixture
def compiles(monkeypatch):
    monkeypatch.setattr(layer_canvas, "_PASSED", {})
    calls = []
    real = layer_canvas.compile_canvas

    def counting(canvas, *args, **kwargs):
        calls.append(canvas)
        return real(canvas, *args, **kwargs)

    monkeypatch.setattr(layer_canvas, "compile_canvas", counting)
    return calls


def test_layers_differing_only_in_name_are_checked_once(compiles):
    shapes = {layer_canvas.plan_layer(_layer(f"c{i}"))[1] for i in range(20)}
    assert shapes == {(1, 8, 8, 4)} and len(compiles) == 1


@pytest.mark.parametrize("changes", [
    {"strides": (2, 1)}, {"dilations": (1, 2)}, {"padding": "VALID"}, {"input_hw": (9, 8)},
    {"weights": np.ones((3, 3, 2, 4), np.float64)}, {"bias": np.zeros(4, np.float32)},
    {"out_channels": 2, "weights": np.ones((3, 3, 2, 2), np.float32)},
])
def test_a_layer_differing_in_any_other_field_is_checked_again(compiles, changes):
    layer_canvas.plan_layer(_layer("a"))
    layer_canvas.plan_layer(_layer("b", **changes))
    assert len(compiles) == 2


def test_a_different_memory_limit_is_checked_again_and_refusals_name_their_layer(compiles):
    layer_canvas.plan_layer(_layer("a"))
    for name in ("big1", "big2"):
        with pytest.raises(ModelImportError, match=f"layer '{name}'.*would refuse"):
            layer_canvas.plan_layer(_layer(name), memory_limit=1024)
    assert len(compiles) == 3
