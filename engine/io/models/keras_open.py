"""Opening a Keras model file: a ``.keras`` zip (config.json and model.weights.h5 read into memory
after their declared sizes are checked; nothing extracted) or a legacy ``.h5`` (its
``model_config`` attribute), the HDF5 weights checked by :mod:`engine.io.models.hdf5_guard`."""

from __future__ import annotations

import io
import os
import zipfile
import zlib
from typing import Any

import numpy as np

from engine.base.memory_limit import gib
from engine.base.names import escaped, shown
from engine.io import strict_json
from engine.io.models import hdf5_guard
from engine.io.models.keras_layers import found_text
from engine.io.models.model_import import ModelImportError

#: Size of config.json read from a .keras zip (or of a .h5's model_config), at most.
MAX_CONFIG_BYTES = 64 * 2**20
#: Deepest nesting of a config's JSON (a model nested in a model adds 4 levels; Keras's own
#: configs need about 10).
MAX_CONFIG_DEPTH = 200
CONFIG_MEMBER = "config.json"
WEIGHTS_MEMBER = "model.weights.h5"
#: What zipfile raises on a damaged or unsupported archive or member.
ZIP_ERRORS = (OSError, EOFError, RuntimeError, NotImplementedError, ValueError, zlib.error,
              zipfile.BadZipFile)


def _parse_config(text: bytes | str, where: str) -> dict:
    """The config JSON as an object, or a one-line error naming ``where``."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as err:
            raise ModelImportError(f"{where} is not UTF-8 text (byte {err.start})") from None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:  # h5py's surrogate escapes of bytes that are not UTF-8
        raise ModelImportError(f"{where} is not UTF-8 text (character {err.start})") from None
    data, problems = strict_json.loads(text, max_depth=MAX_CONFIG_DEPTH)
    if problems:
        at, what = problems[0]
        raise ModelImportError(f"{where}: {what} (at {at})")
    if not isinstance(data, dict):
        raise ModelImportError(f"{where} is {found_text(data)}, expected an object (a model)")
    return data


def _member(z: zipfile.ZipFile, name: str, limit: int, why: str, path: str) -> bytes:
    """The zip member ``name`` if its declared size is at most ``limit`` (zipfile never
    returns more than the declared size)."""
    try:
        info = z.getinfo(name)
    except KeyError:
        raise ModelImportError(f"{escaped(path)}: a .keras zip without {name}") from None
    if info.file_size > limit:
        raise ModelImportError(f"{escaped(path)}: {name} is {gib(info.file_size)} uncompressed, "
                               f"more than {why} ({gib(limit)}): not read")
    return z.read(info)


def _open_zip(path: str, h5py, limit: int) -> tuple[dict, Any, int]:
    """config.json and model.weights.h5 of a .keras zip, read into memory (nothing is
    extracted) after checking their declared sizes."""
    try:
        with zipfile.ZipFile(path) as z:
            raw = _member(z, CONFIG_MEMBER, MAX_CONFIG_BYTES, "a config may be", path)
            data = _member(z, WEIGHTS_MEMBER, limit, "the memory limit", path)
    except ModelImportError:
        raise
    except ZIP_ERRORS as err:
        raise ModelImportError(f"{escaped(path)}: not a readable .keras zip ({type(err).__name__}: "
                               f"{err})") from None
    config = _parse_config(raw, f"{escaped(path)}: {CONFIG_MEMBER}")
    try:
        h5 = h5py.File(io.BytesIO(data), "r")
    except hdf5_guard.H5_ERRORS as err:
        raise ModelImportError(f"{escaped(path)}: {WEIGHTS_MEMBER} is not a readable HDF5 file "
                               f"({type(err).__name__}: {err})") from None
    return config, h5, len(data)


def _legacy_config(h5, path: str) -> dict:
    try:
        raw = h5.attrs.get("model_config")
    except hdf5_guard.H5_ERRORS as err:
        raise ModelImportError(f"{escaped(path)}: the model_config attribute cannot be read "
                               f"({type(err).__name__}: {err})") from None
    if raw is None:
        raise ModelImportError(f"{escaped(path)}: an HDF5 file without a model_config attribute "
                               "(a weights-only file has no layer attributes)")
    if isinstance(raw, np.ndarray) and raw.shape == () or isinstance(raw, np.bytes_):
        raw = raw.item() if isinstance(raw, np.ndarray) else bytes(raw)
    if not isinstance(raw, str | bytes):
        raise ModelImportError(f"{escaped(path)}: the model_config attribute is {shown(raw, 60)}, "
                               "expected a JSON string")
    if len(raw) > MAX_CONFIG_BYTES:
        raise ModelImportError(f"{escaped(path)}: the model_config attribute has {gib(len(raw))}, "
                               f"more than a config may have ({gib(MAX_CONFIG_BYTES)})")
    return _parse_config(raw, f"{escaped(path)}: the model_config attribute")


def open_keras(path: str, h5py, limit: int) -> tuple[dict, Any, str, int, bool]:
    """The file's config, its open HDF5 weights (checked), their name for messages, their size
    and whether the file is a legacy .h5 (the weights: an ``h5py.File``, Any as h5py has no
    type hints)."""
    try:
        hdf5 = h5py.is_hdf5(path)
        is_zip = not hdf5 and zipfile.is_zipfile(path)
        size = os.path.getsize(path)
    except OSError as err:
        raise ModelImportError(f"{escaped(path)}: cannot read the file ({err.strerror or err})") from None
    if is_zip:
        config, h5, size = _open_zip(path, h5py, limit)
        source = f"{escaped(path)}: {WEIGHTS_MEMBER}"
    elif hdf5:
        try:
            h5 = h5py.File(path, "r")
        except hdf5_guard.H5_ERRORS as err:
            raise ModelImportError(f"{escaped(path)}: not a readable HDF5 file ({type(err).__name__}: "
                                   f"{err})") from None
        source, config = path, None
    else:
        raise ModelImportError(f"{escaped(path)}: not a Keras model (neither a .keras zip nor an HDF5 "
                               "file)")
    try:
        hdf5_guard.check_file(h5, source)
        if config is None:
            config = _legacy_config(h5, path)
    except BaseException:
        h5.close()
        raise
    return config, h5, source, size, not is_zip


