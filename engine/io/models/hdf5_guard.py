"""HDF5 model files read without reaching outside them, and without allocating more than they
hold or the memory limit allows.

HDF5 can make a file read other files: a dataset with *external storage* keeps its bytes in
another file (``/etc/passwd``, ``../secret``), an *external link* points into another HDF5 file,
a *virtual dataset* maps parts of other files, and a *soft link* can point at its own parent (a
loop). Keras never writes any of them, so :func:`check_file` refuses a file holding one, naming
the object and what it reaches for, before any data is read. It visits every link once (HDF5's
own link walk, which does not follow soft or external links and enters a group once however many
hard links reach it).

:func:`read_dataset` then checks a dataset's declared size before allocating it: at most the
memory limit (a chunked dataset can declare terabytes of unwritten chunks in a few bytes of
file), and for contiguous storage at most the file's size; it reads floats only (and Keras's
bfloat16, stored as marked 2-byte opaque values). :func:`get_group` and
:func:`read_dataset` say "expected a group / a dataset" when the file holds the other kind.
Every problem is a one-line :class:`~engine.io.models.model_import.ModelImportError` starting with
the ``source`` the caller names (the file, or ``m.keras: model.weights.h5``).
"""

from __future__ import annotations

import math

import numpy as np

from engine.base.dtypes import DTYPES
from engine.base.memory_limit import gib
from engine.base.names import shown
from engine.io.models.model_import import ModelImportError

#: What h5py raises for a file or object it cannot read (a corrupt B-tree, a missing filter).
H5_ERRORS = (OSError, KeyError, ValueError, TypeError, RuntimeError)
_NO_LINKS = "refused: a model file must not read other files"


def _link_problem(h5, name: str) -> str:
    """What the link ``name`` (not a hard link) reaches for."""
    import h5py

    try:
        link = h5.get(name, getlink=True)
    except H5_ERRORS:
        link = None
    if isinstance(link, h5py.ExternalLink):
        return (f"{shown('/' + name)} is an external link to {shown(link.path)} in the file "
                f"{shown(link.filename)}; {_NO_LINKS}")
    if isinstance(link, h5py.SoftLink):
        return (f"{shown('/' + name)} is a soft link to {shown(link.path)}; {_NO_LINKS} "
                "(and a soft link can loop)")
    return f"{shown('/' + name)} is a user-defined link; {_NO_LINKS}"


def _dataset_problem(dataset, name: str) -> str | None:
    """What the dataset (a low-level h5py DatasetID) reads besides its own file's bytes."""
    import h5py

    plist = dataset.get_create_plist()
    count = plist.get_external_count()
    if count:
        files = ", ".join(shown(plist.get_external(i)[0].decode("utf-8", "replace"))
                          for i in range(min(count, 3)))
        return (f"dataset {shown('/' + name)} keeps its data in the file {files}"
                f"{' and others' if count > 3 else ''} (HDF5 external storage); {_NO_LINKS}")
    if plist.get_layout() == h5py.h5d.VIRTUAL:
        count = plist.get_virtual_count()
        maps = ", ".join(f"{shown(plist.get_virtual_dsetname(i))} in "
                         f"{shown(plist.get_virtual_filename(i))}" for i in range(min(count, 3)))
        return (f"dataset {shown('/' + name)} is a virtual dataset mapping {maps or 'nothing'}"
                f"{' and others' if count > 3 else ''}; {_NO_LINKS}")
    return None


def check_file(h5, source: str) -> None:
    """Raise naming the first link or dataset of ``h5`` that reaches outside the file:
    external storage, external links, virtual datasets, soft links (see the module
    docstring). Reads no data."""
    import h5py

    problem: list[str] = []

    def guarded(describe):
        def visit(raw: bytes, info) -> bool | None:
            name = raw.decode("utf-8", "replace")
            try:
                found = describe(name, raw, info)
            except H5_ERRORS as err:
                found = f"{shown('/' + name)} cannot be read ({type(err).__name__}: {err})"
            if found:
                problem.append(found)
                return True  # stops the walk (an exception raised here would not propagate)
            return None
        return visit

    def link(name: str, raw: bytes, info) -> str | None:
        return None if info.type == h5py.h5l.TYPE_HARD else _link_problem(h5, name)

    def dataset(name: str, raw: bytes, info) -> str | None:
        if info.type != h5py.h5o.TYPE_DATASET:
            return None
        return _dataset_problem(h5py.h5d.open(h5.id, raw), name)

    try:
        h5.id.links.visit(guarded(link), info=True)
        if not problem:  # only hard links: the objects walk cannot leave the file
            h5py.h5o.visit(h5.id, guarded(dataset), info=True)
    except H5_ERRORS as err:
        raise ModelImportError(f"{source}: not a readable HDF5 file ({type(err).__name__}: "
                               f"{err})") from None
    if problem:
        raise ModelImportError(f"{source}: {problem[0]}")


def _open(h5, where: str, source: str, what: str):
    """The low-level h5py object at ``where``, or None when there is none."""
    import h5py

    try:
        return h5py.h5o.open(h5.id, where.encode("utf-8", "surrogateescape"))
    except KeyError:
        return None
    except H5_ERRORS as err:
        raise ModelImportError(f"{source}: {what} {shown(where)} cannot be read "
                               f"({type(err).__name__}: {err})") from None


def get_group(h5, where: str, source: str, what: str):
    """The group at ``where`` (an ``h5py.Group``) or None when absent; an error naming
    ``what`` when it is a dataset."""
    import h5py

    obj = _open(h5, where, source, what)
    if obj is None or isinstance(obj, h5py.h5g.GroupID):
        return obj if obj is None else h5py.Group(obj)
    raise ModelImportError(f"{source}: {what} {shown(where)} is a dataset, expected a group")


def _layout(dataset, source: str, where: str, what: str) -> int:
    try:
        return dataset.get_create_plist().get_layout()
    except H5_ERRORS as err:
        raise ModelImportError(f"{source}: {what} {shown(where)} cannot be read "
                               f"({type(err).__name__}: {err})") from None


def declared_bytes(shape: tuple[int, ...], dtype: np.dtype) -> int:
    """Bytes a dataset of this shape and dtype needs in memory (exact, any size)."""
    return math.prod(int(s) for s in shape) * dtype.itemsize


def read_dataset(h5, where: str, source: str, what: str, limit: int, file_size: int,
                 used: int = 0) -> np.ndarray:
    """The float dataset at ``where`` as an array, after checking that it is a dataset of a
    float type whose declared bytes fit ``limit`` with the ``used`` bytes already read and,
    stored contiguously, ``file_size``."""
    import h5py

    obj = _open(h5, where, source, what)
    if obj is None:
        raise ModelImportError(f"{source}: {what} {shown(where)} is missing")
    if not isinstance(obj, h5py.h5d.DatasetID):
        raise ModelImportError(f"{source}: {what} {shown(where)} is a group, expected a dataset")
    try:
        shape, dtype = obj.shape, obj.dtype
    except H5_ERRORS as err:
        raise ModelImportError(f"{source}: {what} {shown(where)} cannot be read "
                               f"({type(err).__name__}: {err})") from None
    if shape is None:
        raise ModelImportError(f"{source}: {what} {shown(where)} holds no data (an empty "
                               "dataspace)")
    bfloat16 = dtype == np.dtype("V2") and _marked_bfloat16(obj)
    if dtype.kind != "f" and not bfloat16:
        raise ModelImportError(f"{source}: {what} {shown(where)} holds {dtype} values, expected "
                               "floats")
    need = declared_bytes(shape, dtype)
    said = (f"{source}: {what} {shown(where)} declares shape {list(shape)} {dtype} "
            f"({gib(need)})")
    if used + need > limit:
        before = f" with the {gib(used)} of weights read before it" if used else ""
        raise ModelImportError(f"{said}, more than the memory limit ({gib(limit)})"
                               f"{before}: not read")
    if need > file_size and _layout(obj, source, where, what) == h5py.h5d.CONTIGUOUS:
        raise ModelImportError(f"{said} of contiguous data, more than the whole file "
                               f"({gib(file_size)}): the file is truncated or lies")
    out = np.empty(shape, dtype)
    try:
        if out.size:
            obj.read(h5py.h5s.ALL, h5py.h5s.ALL, out)
    except H5_ERRORS as err:
        raise ModelImportError(f"{source}: {what} {shown(where)} cannot be read "
                               f"({type(err).__name__}: {err})") from None
    return out.view(DTYPES["bfloat16"]) if bfloat16 else out


def _marked_bfloat16(dataset) -> bool:
    """Keras 3 stores a bfloat16 variable as 2-byte opaque values with the attribute
    ``dtype = "bfloat16"`` (keras/src/saving/saving_lib.py, ``H5IOStore``)."""
    import h5py

    try:
        mark = h5py.Dataset(dataset).attrs.get("dtype")
    except H5_ERRORS:
        return False
    return mark in ("bfloat16", b"bfloat16")
