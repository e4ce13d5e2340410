"""Errors raised by the engine.

Every invalid call of a kernel, every bad canvas and every bad attribute ends in one of these,
never in a bare NumPy error.
"""


class InvalidArgumentError(ValueError):
    """An argument of an op is invalid; the message names it and gives actual vs expected."""
