"""The key of numba's on-disk cache of the compiled loops: the SHA-256 of the sources of every
module of this package, computed at import.

numba checks a cached function against the source of the file that defines it only, but these
loops inline the intrinsics of :mod:`~engine.kernels._compiled.numba_simd`,
:mod:`~engine.kernels._compiled.simd_runs` and :mod:`~engine.kernels._compiled.winograd_simd`
(other files). So every cache of a function defined in this package is stamped with
:data:`SOURCES_SHA256` instead (:class:`SourcesLocator`, put first in numba's list of cache
locators): editing any module here, even a docstring, makes every cached loop stale, and numba
compiles it again instead of running old code. Nothing else needs editing.

Each module that defines ``cache=True`` loops imports this one before defining them (the locator
is chosen when a loop is defined). ``NUMBA_CACHE_LOCATOR_CLASSES`` (numba's own override of the
locator list) bypasses it.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from numba.core import caching

#: This package's directory: the functions defined here get :data:`SOURCES_SHA256`.
PACKAGE = Path(__file__).resolve().parent


def sources_sha256(folder: Path = PACKAGE) -> str:
    """SHA-256 over the ``*.py`` files of ``folder``, in name order, each as its name and its
    bytes (so renaming, adding or removing a module changes it too)."""
    digest = hashlib.sha256()
    for path in sorted(folder.glob("*.py")):
        data = path.read_bytes()
        digest.update(f"{path.name}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()


#: The cache stamp of every compiled loop (see the module doc).
SOURCES_SHA256 = sources_sha256()


class SourcesLocator(caching._CacheLocator):
    """numba's own locator for a function of this package (the cache directory it would use),
    with :data:`SOURCES_SHA256` as the source stamp; other functions are left to numba."""

    def __init__(self, inner: caching._CacheLocator) -> None:
        self._inner = inner

    def ensure_cache_path(self) -> None:
        self._inner.ensure_cache_path()

    def get_cache_path(self) -> str:
        return self._inner.get_cache_path()

    def get_source_stamp(self) -> str:
        return SOURCES_SHA256

    def get_disambiguator(self) -> str:
        return self._inner.get_disambiguator()

    @classmethod
    def from_function(cls, py_func, py_file):
        if Path(py_file).resolve().parent != PACKAGE:
            return None
        for other in caching.CacheImpl._locator_classes:
            if other is cls:
                continue
            inner = other.from_function(py_func, py_file)
            if inner is not None:
                return cls(inner)
        return None


def install() -> None:
    """Put :class:`SourcesLocator` first in numba's locator list (once)."""
    if SourcesLocator not in caching.CacheImpl._locator_classes:
        caching.CacheImpl._locator_classes.insert(0, SourcesLocator)


install()
