"""The fixed text every framework script carries (:mod:`engine.export.frameworks`): the results
writer, the source loader, and the check blocks' helpers with the blocks' own code.

:data:`CHECK_CODE` is made, on first use, from the one definition of each fact: the tolerance
tables as literals of :data:`engine.base.dtypes.RTOL` and
:data:`~engine.base.dtypes.CHECK_TOLERANCE`, and the source text (:func:`inspect.getsource`)
of the functions the Compare, GradCheck and AdjointCheck blocks' runs call
(:data:`blocks.checks.COMPARE_CODE`, :data:`blocks.check_support.VERDICT_CODE`: the tolerance
rule of :mod:`engine.base.tolerance` and the check blocks' outputs,
:func:`blocks.gradcheck.sample_indices`). The script's ``_compare``, ``_grad_check`` and
``_adjoint_check`` compute the framework's values and hand them to that code, so a script's
verdicts are the blocks' by construction (``tests/test_tolerance_once.py``).
"""

from __future__ import annotations

import functools
import inspect
import textwrap

from blocks.check_support import VERDICT_CODE
from blocks.checks import COMPARE_CODE
from blocks.gradcheck import sample_indices
from engine.base.dtypes import CHECK_TOLERANCE, RTOL
from engine.base.literal import literal

#: How every exported script prints a result's name: unquoted, control and non-ASCII
#: characters escaped (a name never writes to the terminal raw).
SHOWN_NAME = "ascii(name)[1:-1]"


def _source(functions) -> str:
    """The source text of ``functions``, as their modules define them."""
    return "\n\n".join(textwrap.dedent(inspect.getsource(f)) for f in functions)


@functools.cache
def _check_code() -> str:
    """:data:`CHECK_CODE` (made on first use: reading the functions' source takes longer than
    the rest of a ``gradblocks check``)."""
    return "\n".join([
        "# The tolerance tables (engine.base.dtypes) and the check blocks' own functions",
        "# (blocks.checks, engine.base.tolerance, blocks.check_support, blocks.gradcheck), copied",
        "# by the exporter.",
        f"RTOL = {literal(RTOL)}",
        f"CHECK_TOLERANCE = {literal(CHECK_TOLERANCE)}",
        "",
        "",
        _source((*COMPARE_CODE, *VERDICT_CODE, sample_indices)),
    ])


_COMMON_HEAD = '''
import os
import sys
import zipfile

import numpy as np


def _write_npz(path, arrays):
    """Every array as <key>.npy in an uncompressed zip (np.savez's format, any key)."""
    with zipfile.ZipFile(path, mode="w", compression=zipfile.ZIP_STORED,
                         allowZip64=True) as zf:
        for key, value in arrays.items():
            with zf.open(key + ".npy", "w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.asarray(value), allow_pickle=False)


def _load_sources():
    """The canvas's source values, computed by GradBlocks at export time and written beside
    this script's real path as SOURCES_FILE (bit-exact: random fills, files and images)."""
    path = os.path.join(os.path.dirname(os.path.realpath(__file__)), SOURCES_FILE)
    with np.load(path, allow_pickle=False) as f:
        return {key: f[key] for key in f.files}


def _f64(t):
    return np.asarray(_np(t), np.float64)


def _pairs(paddings):
    return [paddings[i:i + 2] for i in range(0, len(paddings), 2)]


def _cuts(begin, size):
    return tuple(slice(b, None if s == -1 else b + s) for b, s in zip(begin, size))


def _zero_pad(t, paddings):
    """tf.pad with zeros: paddings = before, after per dimension."""
    if isinstance(t, np.ndarray):
        return np.pad(t, _pairs(paddings))
    return _fw_pad(t, _pairs(paddings))


def _slice_of(t, begin, size):
    """tf.slice: size[i] elements of dimension i from begin[i] (-1: the rest)."""
    if isinstance(t, np.ndarray):
        return np.ascontiguousarray(t[_cuts(begin, size)])
    return _fw_slice(t, _cuts(begin, size))

'''

_COMMON_CHECKS = '''

def _compare(a, b, dtype_a, dtype_b):
    """GradBlocks' Compare block: its code (compare_float64, compare_rtol) on float64 copies."""
    return compare_float64(_f64(a), _f64(b), compare_rtol(dtype_a, dtype_b))


def _grad_check(x, w, dy, gradient, wrt, g, samples, seed, dtype):
    """GradBlocks' GradCheck block. L = <op(x, w), dy> is linear in the checked argument,
    so its central difference in element i equals L at the unit tensor e_i exactly; the
    script evaluates that with the framework's float64 forward op (no cancellation). The
    sample and the verdict are the block's code (sample_indices, gradient_errors)."""
    grad = _f64(gradient)
    flat = sample_indices(grad.size, samples, seed)
    x64, w64 = (_cast(_f64(a), "float64") for a in (x, w))
    dyn = _f64(dy)
    numbers = np.zeros(flat.size)
    for k, index in enumerate(flat):
        unit = np.zeros(grad.shape)
        unit.flat[index] = 1.0
        unit = _cast(unit, "float64")
        y = _forward(x64, unit, g) if wrt == "filter" else _forward(unit, w64, g)
        numbers[k] = float(np.sum(_f64(y) * dyn))
    return gradient_errors(grad, flat, numbers, check_tolerance(dtype))


def _adjoint_check(x, w, dy, g, dtype):
    """GradBlocks' AdjointCheck block: the three ops in the inputs' dtype, the inner
    products in float64, the verdict by the block's code (adjoint_errors)."""
    forward = float(np.sum(_f64(_forward(x, w, g)) * _f64(dy)))
    via_input = float(np.sum(_f64(x) * _f64(_backprop_input(w, dy, g))))
    via_filter = float(np.sum(_f64(w) * _f64(_backprop_filter(x, dy, g))))
    return adjoint_errors(forward, via_input, via_filter, check_tolerance(dtype))
'''



def __getattr__(name: str) -> str:
    """``CHECK_CODE``: the check blocks' own code as a script carries it, the tolerance tables as
    literals made from :mod:`engine.base.dtypes` and the source of the functions the blocks'
    runs call (:data:`blocks.checks.COMPARE_CODE`, :data:`blocks.check_support.VERDICT_CODE`,
    :func:`blocks.gradcheck.sample_indices`): a script's verdicts are the blocks', by
    construction. ``COMMON``: what a script needs besides its target's prelude: NumPy, the
    results writer and the checks (``CHECK_CODE`` and the helpers calling it with the
    framework's values)."""
    if name == "CHECK_CODE":
        return _check_code()
    if name == "COMMON":
        return _COMMON_HEAD + _check_code() + "\n\n" + _COMMON_CHECKS
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
