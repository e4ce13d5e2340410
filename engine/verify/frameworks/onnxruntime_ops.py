"""The ONNX conv ops (:mod:`.onnx_models`) run by onnxruntime's CPU provider (one thread), one
session per attributes, shapes and dtype (the last :data:`SESSIONS` kept). onnxruntime's own
refusals are ``NotImplementedError``: ``NotImplemented`` (no kernel for the op and dtype) and an
``INVALID_ARGUMENT`` saying "not supported" (e.g. dilation with ``auto_pad=SAME_UPPER``). Error
messages keep onnxruntime's status message alone.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from typing import Any

import numpy as np
import onnxruntime as ort
from onnxruntime.capi.onnxruntime_pybind11_state import InvalidArgument
from onnxruntime.capi.onnxruntime_pybind11_state import NotImplemented as OrtNotImplemented

from engine.verify.frameworks.onnx_models import conv_inputs, model, model_attrs

SESSIONS = 64
_STATUS = re.compile(r".*Status Message: ", re.DOTALL)
_QUIET = ort.RunOptions()
_QUIET.log_severity_level = 4  # errors are raised, not also logged
_sessions: OrderedDict[tuple, ort.InferenceSession] = OrderedDict()


def _session(key: tuple, build) -> ort.InferenceSession:
    if key in _sessions:
        _sessions.move_to_end(key)
        return _sessions[key]
    options = ort.SessionOptions()
    options.log_severity_level = 4
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    session = ort.InferenceSession(build().SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    _sessions[key] = session
    if len(_sessions) > SESSIONS:
        _sessions.popitem(last=False)
    return session


def _run(op: str, kwargs: dict[str, Any]) -> np.ndarray:
    onnx_op, x, w, group, out_hw = conv_inputs(op, kwargs)
    dtype = str(x.dtype)
    attrs = model_attrs(kwargs)
    key = (onnx_op, x.shape, w.shape, dtype, group, out_hw, repr(attrs))
    try:
        session = _session(key, lambda: model(onnx_op, x.shape, w.shape, dtype, attrs, group,
                                              out_hw))
        return session.run(None, {"X": x, "W": w}, _QUIET)[0]
    except OrtNotImplemented as err:
        raise NotImplementedError(_STATUS.sub("", str(err))) from None
    except InvalidArgument as err:
        message = _STATUS.sub("", str(err))
        if "not supported" in message:
            raise NotImplementedError(message) from None
        raise InvalidArgument(message) from None


def Conv2D(**kwargs: Any) -> np.ndarray:
    return _run("Conv2D", kwargs)


def Conv2DBackpropInput(**kwargs: Any) -> np.ndarray:
    return _run("Conv2DBackpropInput", kwargs)


def DepthwiseConv2dNative(**kwargs: Any) -> np.ndarray:
    return _run("DepthwiseConv2dNative", kwargs)


def DepthwiseConv2dNativeBackpropInput(**kwargs: Any) -> np.ndarray:
    return _run("DepthwiseConv2dNativeBackpropInput", kwargs)
