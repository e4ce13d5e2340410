"""The fake's ``torch.nn`` (see ``torch/__init__.py``): only ``functional``."""

from torch.nn import functional  # noqa: F401
