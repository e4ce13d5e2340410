"""The compiled kernels (numba, a default dependency): whether a call runs them, loading them
(the warm-up, in the calling thread or in the background) and the CLI's compile note.

``GRADBLOCKS_KERNELS`` selects the kernels: ``auto`` (default), ``numpy`` (the NumPy kernels, the
reference) or ``numba`` (compiled wherever a compiled path applies; an
:class:`~engine.base.errors.InvalidArgumentError` when numba is missing). numba is imported only
when a compiled kernel is first needed, so the NumPy path never pays for it.
:mod:`engine.kernels.dispatch` asks :func:`use_compiled` once per call and chooses the path.

The path is a function of the call only (op, shapes, dtype, attributes and ``GRADBLOCKS_KERNELS``),
never of what this process has compiled or loaded, so the app, the notebook API, the command line
and the tests compute the same canvas to the same bits. Under ``auto`` a call runs compiled when
a compiled path applies and the NumPy kernels would take at least :data:`COMPILED_FROM_SECONDS`
for it (the dispatch's estimate from the call's shapes); smaller calls run NumPy, and a process
whose calls are all small never imports numba. A call that runs compiled waits for its code
(numba compiles it, or loads it from the disk cache, on first use); the app starts loading the
code at start-up (:func:`warm_up_in_background`) so that its first large run rarely waits.

JIT cost: compiled code is cached on disk (numba's ``cache=True``, keyed by the compiled sources:
:mod:`engine.kernels._compiled.cache_key`; ``NUMBA_CACHE_DIR`` moves the cache). With
:func:`announce_compiles` (the command line) the first actual compile (a cache miss) of the
process prints :data:`COMPILE_NOTE` once on stderr.
"""

from __future__ import annotations

import atexit
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
#: Under ``auto``, a call runs compiled from this many seconds of NumPy work (the dispatch's
#: estimate): about where the compiled paths start to be faster than NumPy's (performance.md,
#: "When the compiled kernels run").
COMPILED_FROM_SECONDS = 1e-3
#: The compute dtypes the compiled kernels are built for (half types compute in float32).
COMPUTE_DTYPES = ("float32", "float64")
#: Operand bytes per compiled call (a batch chunk; read by :mod:`engine.kernels.memory` too).
CHUNK_BYTES = 32 * 2**20

_lock = threading.Lock()
_module: ModuleType | None = None
_failed: str | None = None
_ready: set[str] = set()
_warm_thread: threading.Thread | None = None
_pending: list[str] = []  # dtypes the background thread still has to load
_stopping = threading.Event()  # set at exit: the warm-up takes no further step
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
                _install_spin()
        return _module


def _install_spin() -> None:
    """The kernel threads' waits keep their cores awake a while (:func:`engine.kernels.parallel.use_spin`)."""
    from engine.kernels import parallel
    from engine.kernels._compiled import spin

    if parallel.workers() > 1:
        parallel.use_spin(spin.wait_change, spin.polls_for(parallel.SPIN_SECONDS))


def use_compiled(ctype: np.dtype, numpy_seconds: float) -> bool:
    """True when a call computing in ``ctype`` that the NumPy kernels would take about
    ``numpy_seconds`` for runs compiled (see the module doc): a function of the call and
    ``GRADBLOCKS_KERNELS`` only (and of whether numba works at all)."""
    chosen = mode()
    if chosen == "numpy":
        return False
    if chosen == "numba":
        if compiled() is None:
            raise InvalidArgumentError(
                f"{ENV}=numba but numba is not importable ({_failed}): install it with "
                f"pip install numba (a dependency of gradblocks), or unset {ENV}")
        return True
    return numpy_seconds >= COMPILED_FROM_SECONDS and compiled() is not None


def register_tile() -> tuple[int, int, int]:
    """The compiled kernels' vector width in bits and their register tile (rows, vectors) on
    this CPU (imports numba)."""
    from engine.kernels._compiled import numba_simd

    rows, vectors = numba_simd.tile_shape()
    return numba_simd.VECTOR_BYTES * 8, rows, vectors


def may_run_compiled() -> bool:
    """A guess, before the call's work is known and without importing numba: False only when
    no call of this process can run compiled (``GRADBLOCKS_KERNELS=numpy``, or numba failed)."""
    try:
        return mode() != "numpy" and _failed is None
    except InvalidArgumentError:
        return False  # the kernel call itself reports the bad setting


def warm_up(dtypes: tuple[str, ...] = COMPUTE_DTYPES) -> None:
    """Compile (or load from the disk cache) the compiled kernels for ``dtypes`` by running
    each on a tiny problem; a dtype is marked ready when its three depthwise kernels,
    both Winograds' loops and the per-tap tiles (:mod:`engine.kernels._compiled.conv_tiles`) are."""
    from engine.kernels._compiled import (
        conv3d_jit,
        conv_tiles,
        depthwise_planes,
        transpose,
        winograd,
        winograd_phases,
    )
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
        module.depthwise_conv2d(g, x, w, ct, CHUNK_BYTES)
        module.depthwise_conv2d_backprop_filter(g, x, dy, ct, CHUNK_BYTES)
        for gi in (g, g2):
            module.depthwise_conv2d_backprop_input(gi, np.ones(gi.output_shape, ct), w, ct,
                                                   np.zeros(x.shape, ct), CHUNK_BYTES)
        for part in (module, winograd, winograd_phases, conv_tiles, depthwise_planes, transpose,
                     conv3d_jit):
            if _stopping.is_set():  # the interpreter is exiting: each step may compile
                return
            part.warm((ct.type,))
        _ready.add(name)


def warm_up_in_background(dtypes: tuple[str, ...] = COMPUTE_DTYPES) -> threading.Thread | None:
    """Load the compiled code of ``dtypes`` in a daemon thread (the app, at start-up), so that
    a large call rarely waits for it; None when the NumPy kernels are chosen. It changes no
    call's path."""
    try:
        if mode() == "numpy":
            return None
    except InvalidArgumentError:
        return None  # the first kernel call reports the bad setting
    return _load_in_background(dtypes)


def _load_in_background(dtypes: tuple[str, ...]) -> threading.Thread:
    """Queue ``dtypes`` for the loading thread, starting it when none runs."""
    global _warm_thread
    with _lock:
        _pending.extend(d for d in dtypes if d not in _ready and d not in _pending)
        if _warm_thread is None or not _warm_thread.is_alive():
            _warm_thread = threading.Thread(target=_warm_quietly, name="gradblocks-jit",
                                            daemon=True)
            _warm_thread.start()
            atexit.unregister(_stop_warm_up)  # registered once, however many threads
            atexit.register(_stop_warm_up)
        return _warm_thread


def _stop_warm_up() -> None:
    """At exit: drop the dtypes not yet loaded and wait for the step that runs. A daemon
    thread still inside numba or LLVM while the interpreter shuts down crashes the process
    (SIGSEGV or SIGABRT on a quick start-and-quit of the app)."""
    _stopping.set()
    with _lock:
        _pending.clear()
        thread = _warm_thread
    if thread is not None and thread is not threading.current_thread():
        thread.join()


def _warm_quietly() -> None:
    global _module, _failed
    while True:
        with _lock:
            if not _pending:
                return
            name = _pending[0]
        try:
            warm_up((name,))
        except Exception as err:  # noqa: BLE001 - any compiler failure: the NumPy kernels run
            print(f"gradblocks: compiling the numba kernels failed ({err}); the NumPy kernels "
                  f"run instead", file=sys.stderr)
            with _lock:
                _module, _failed = None, f"compiling failed: {err}"
                _pending.clear()
            return
        with _lock:
            if name in _pending:
                _pending.remove(name)


def announce_compiles(stream: TextIO | None = None) -> None:
    """The command line's setting: :data:`COMPILE_NOTE` printed once on ``stream`` (default: whatever ``sys.stderr`` is when
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
