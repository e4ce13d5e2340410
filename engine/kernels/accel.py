"""The optional compiled kernels (``pip install 'gradblocks[fast]'``, numba): whether they run,
their background compile and the CLI's compile note.

``GRADBLOCKS_KERNELS`` selects the kernels: ``auto`` (default: compiled when numba imports,
else NumPy), ``numpy`` (the NumPy kernels, the reference) or ``numba`` (compiled, an
:class:`~engine.base.errors.InvalidArgumentError` when numba is missing). numba is imported only
when a compiled kernel is first needed, so the NumPy path never pays for it.

JIT cost: compiled code is cached on disk (numba's ``cache=True``; ``NUMBA_CACHE_DIR`` moves the
cache). The app calls :func:`warm_up_in_background` at start-up; while that thread compiles (or
loads from the cache) a dtype's kernels, ``auto`` runs the NumPy kernels for that dtype, so the
app never waits for the compiler. The CLI calls :func:`announce_compiles`: the first actual
compile (a cache miss) of the process prints :data:`COMPILE_NOTE` once on stderr.
"""

from __future__ import annotations

import importlib
import os
import sys
import threading
from types import ModuleType
from typing import TextIO

import numpy as np

from engine.base.errors import InvalidArgumentError

ENV = "GRADBLOCKS_KERNELS"
MODES = ("auto", "numpy", "numba")
COMPILE_NOTE = "compiling the numba kernels (first use; cached afterwards)..."
#: The compute dtypes the compiled kernels are built for (half types compute in float32).
COMPUTE_DTYPES = ("float32", "float64")
#: Operand bytes per compiled call (a batch chunk; read by :mod:`engine.kernels.memory` too).
CHUNK_BYTES = 32 * 2**20

_lock = threading.Lock()
_module: ModuleType | None = None
_failed: str | None = None
_ready: set[str] = set()
_warm_thread: threading.Thread | None = None
_note_stream: TextIO | None = None
_note_wanted = False
_noted = False


def mode() -> str:
    """``GRADBLOCKS_KERNELS`` (auto when unset or empty), checked."""
    value = os.environ.get(ENV, "").strip().lower() or "auto"
    if value not in MODES:
        raise InvalidArgumentError(
            f"{ENV}={os.environ.get(ENV)!r} is not a kernel choice: expected one of "
            f"{', '.join(MODES)}")
    return value


def compiled() -> ModuleType | None:
    """:mod:`engine.kernels._compiled.numba_depthwise` (importing numba the first time), or None
    without numba."""
    global _module, _failed
    with _lock:
        if _module is None and _failed is None:
            try:
                _module = importlib.import_module("engine.kernels._compiled.numba_depthwise")
            except ImportError as err:  # numba missing or broken: the NumPy kernels run
                _failed = str(err)
            else:  # announce_compiles came first: listen now that numba is imported
                if _note_wanted:
                    _install_note_listener()
        return _module


def use_compiled(ctype: np.dtype) -> bool:
    """True when the compiled kernels should compute in ``ctype`` now (see the module doc)."""
    chosen = mode()
    if chosen == "numpy":
        return False
    if compiled() is None:
        if chosen == "numba":
            raise InvalidArgumentError(
                f"{ENV}=numba but numba is not importable ({_failed}): install it with "
                f"pip install 'gradblocks[fast]', or unset {ENV}")
        return False
    warming = _warm_thread is not None and _warm_thread.is_alive()
    return chosen == "numba" or not warming or np.dtype(ctype).name in _ready


def warm_up(dtypes: tuple[str, ...] = COMPUTE_DTYPES) -> None:
    """Compile (or load from the disk cache) the compiled kernels for ``dtypes`` by running
    each on a tiny problem; a dtype is marked ready when its three depthwise kernels,
    Winograd's loops and the per-tap tiles (:mod:`engine.kernels._compiled.conv_tiles`) are."""
    from engine.kernels._compiled import conv_tiles, winograd
    from engine.shapes.conv import conv2d_geometry

    module = compiled()
    if module is None:
        return
    g = conv2d_geometry((1, 3, 3, 1), (2, 2, 1, 1), [1, 1, 1, 1], "SAME", (), "NHWC",
                        (1, 1, 1, 1), depthwise=True)
    g2 = conv2d_geometry((1, 3, 3, 1), (2, 2, 1, 1), [1, 2, 2, 1], "SAME", (), "NHWC",
                         (1, 1, 1, 1), depthwise=True)  # strided input gradient: its own loop
    for name in dtypes:
        ct = np.dtype(name)
        x, w = np.ones((1, 3, 3, 1), ct), np.ones((2, 2, 1, 1), ct)
        dy = np.ones(g.output_shape, ct)
        module.depthwise_conv2d(g, x, w, ct)
        module.depthwise_conv2d_backprop_filter(g, x, dy, ct)
        for gi in (g, g2):
            module.depthwise_conv2d_backprop_input(gi, np.ones(gi.output_shape, ct), w, ct,
                                                   np.zeros(x.shape, ct))
        winograd.warm((ct.type,))
        conv_tiles.warm((ct.type,))
        _ready.add(name)


def warm_up_in_background() -> threading.Thread | None:
    """Start :func:`warm_up` in a daemon thread (None when the NumPy kernels are chosen)."""
    global _warm_thread
    try:
        if mode() == "numpy":
            return None
    except InvalidArgumentError:
        return None  # the first kernel call reports the bad setting
    with _lock:
        if _warm_thread is None:
            _warm_thread = threading.Thread(target=_warm_quietly, name="gradblocks-jit",
                                            daemon=True)
            _warm_thread.start()
        return _warm_thread


def _warm_quietly() -> None:
    global _module, _failed
    try:
        warm_up()
    except Exception as err:  # noqa: BLE001 - any compiler failure: the NumPy kernels run
        print(f"gradblocks: compiling the numba kernels failed ({err}); the NumPy kernels "
              f"run instead", file=sys.stderr)
        with _lock:
            _module, _failed = None, f"compiling failed: {err}"


def announce_compiles(stream: TextIO | None = None) -> None:
    """Print :data:`COMPILE_NOTE` once on ``stream`` (default: whatever ``sys.stderr`` is when
    the compile happens) when this process first compiles a kernel (a cache miss; loading from
    numba's disk cache prints nothing)."""
    global _note_stream, _note_wanted
    first = not _note_wanted
    _note_wanted, _note_stream = True, stream
    if first and _module is not None:
        _install_note_listener()


def _note() -> None:
    """Say once that kernels are being compiled. A note never breaks a kernel: a stream that is
    gone (closed, or a broken pipe) only loses the note."""
    global _noted
    if _noted or not _note_wanted:
        return
    _noted = True
    try:
        print(COMPILE_NOTE, file=_note_stream or sys.stderr, flush=True)
    except (OSError, ValueError):  # ValueError: I/O operation on a closed file
        pass


def _install_note_listener() -> None:
    from numba.core import event

    class _Note(event.Listener):
        def on_start(self, ev) -> None:
            _note()

        def on_end(self, ev) -> None:
            pass

    event.register("numba:compile", _Note())
