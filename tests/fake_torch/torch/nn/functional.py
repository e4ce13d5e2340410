"""The fake's ``torch.nn.functional`` (see ``torch/__init__.py``): ``pad``, ``conv2d``,
``conv3d``."""

from torch import conv2d, conv3d, pad  # noqa: F401
