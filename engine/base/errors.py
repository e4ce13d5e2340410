"""Errors raised by the engine.

Every invalid call of a kernel, every bad canvas and every bad attribute ends in one of these,
never in a bare NumPy error.
"""

from __future__ import annotations


class InvalidArgumentError(ValueError):
    """An argument of an op is invalid; the message names it and gives actual vs expected.

    ``argument`` names the argument (``"strides"``, ``"input"``, ...) as data, set where the
    error is raised, so callers never parse the message to find it (None when no single
    argument is at fault).
    """

    def __init__(self, message: str, argument: str | None = None):
        super().__init__(message)
        self.argument = argument
