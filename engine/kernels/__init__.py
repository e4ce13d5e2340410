"""The six TensorFlow conv ops (:mod:`engine.kernels.ops`) and how they are computed.

``from engine import kernels; kernels.conv2d(...)`` is the public API; the modules below are
its parts (layers, top first; ``lint-imports`` checks them):

- ``ops`` (the six ops: checks, layouts, dtypes) | ``memory`` (workspace estimates);
- ``dispatch``: the one decision per call (NumPy or compiled) and the table of paths (names,
  workspace bounds);
- ``tiled`` (the compiled per-tap conv ops around ``_compiled.conv_tiles``) | ``workspace`` |
  ``depthwise_tiles`` (the NumPy depthwise path);
- ``compute`` | ``sparse``: the NumPy reference paths (nothing compiled imported);
- ``accel``: whether a call may run compiled (``GRADBLOCKS_KERNELS``, readiness, loading);
- ``_compiled``: the numba paths (private: nothing outside engine.kernels imports them);
- ``layout`` | ``buffers`` | ``nonfinite`` | ``gemm``, then ``parallel`` | ``path_record``.
"""

from engine.kernels.ops import (
    conv2d,
    conv2d_backprop_filter,
    conv2d_backprop_input,
    depthwise_conv2d_native,
    depthwise_conv2d_native_backprop_filter,
    depthwise_conv2d_native_backprop_input,
    last_path,
)

__all__ = [
    "conv2d",
    "conv2d_backprop_filter",
    "conv2d_backprop_input",
    "depthwise_conv2d_native",
    "depthwise_conv2d_native_backprop_filter",
    "depthwise_conv2d_native_backprop_input",
    "last_path",
]

# The Conv3D family (engine.kernels.conv3d over the N-d NumPy core engine.kernels.conv_nd).
from engine.kernels.conv3d import (
    conv3d,
    conv3d_backprop_filter,
    conv3d_backprop_input,
)

__all__ += ["conv3d", "conv3d_backprop_filter", "conv3d_backprop_input"]
