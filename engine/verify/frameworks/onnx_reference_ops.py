"""The ONNX conv ops (:mod:`.onnx_models`) run by ``onnx.reference.ReferenceEvaluator``, the
ONNX package's own Python implementation of the spec."""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx.reference import ReferenceEvaluator

from engine.verify.frameworks.onnx_models import conv_inputs, model, model_attrs


def _run(op: str, kwargs: dict[str, Any]) -> np.ndarray:
    onnx_op, x, w, group, out_hw = conv_inputs(op, kwargs)
    attrs = model_attrs(kwargs)
    evaluator = ReferenceEvaluator(model(onnx_op, x.shape, w.shape, str(x.dtype), attrs, group,
                                         out_hw))
    outputs = evaluator.run(None, {"X": x, "W": w})
    assert isinstance(outputs, list)  # a dict only with intermediate=True
    return outputs[0]


def Conv2D(**kwargs: Any) -> np.ndarray:
    return _run("Conv2D", kwargs)


def Conv2DBackpropInput(**kwargs: Any) -> np.ndarray:
    return _run("Conv2DBackpropInput", kwargs)


def DepthwiseConv2dNative(**kwargs: Any) -> np.ndarray:
    return _run("DepthwiseConv2dNative", kwargs)


def DepthwiseConv2dNativeBackpropInput(**kwargs: Any) -> np.ndarray:
    return _run("DepthwiseConv2dNativeBackpropInput", kwargs)
