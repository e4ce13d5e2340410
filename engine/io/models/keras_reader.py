"""The Conv2D and DepthwiseConv2D layers of a Keras model file, read with ``h5py`` and the
file's own config JSON (no TensorFlow; ``h5py`` is in the ``models`` extra).

Two formats, told apart by their first bytes:

* ``.keras`` (Keras 3): a zip with ``config.json`` and ``model.weights.h5``, where a layer's
  variables are the datasets ``layers/<class>/vars/0`` (kernel) and ``vars/1`` (bias), the
  layers named by class in list order (``conv2d``, ``conv2d_1``, ``depthwise_conv2d``; see
  :meth:`_Reader.walk`), a nested model's under ``layers/<its class>/layers/``;
* ``.h5`` (legacy full model, written by Keras 2 or by Keras 3's ``model.save('m.h5')``): an
  HDF5 file whose ``model_config`` attribute is the config JSON, a layer's variables listed in
  order by the ``weight_names`` attribute of the group ``model_weights/<layer>`` (or of a nested
  model's group), each name the dataset's path in that group: ``<layer>/kernel:0`` (Keras 2),
  ``<model>/<layer>/kernel`` (Keras 3). The layer owning a name is the path's next-to-last
  part; the names are indexed once, so reading is linear in the file.

Keras kernels are in TensorFlow's layout (HWIO with in = in_channels / groups; depthwise H, W,
in, multiplier); a grouped Conv2D with one input channel per group is TensorFlow's depthwise
conv, its kernel reshaped to H, W, in, out / in (output channel ``o`` is group ``o // (out /
groups)`` in both). ``padding`` same is TensorFlow's SAME.

What a file cannot do: reach outside itself (:mod:`engine.io.models.hdf5_guard`: external storage or
links, virtual datasets, soft links are refused before any data is read); make the reader
allocate more than the memory limit (a zip member's declared size, a dataset's declared shape,
the weights read together); crash it with a config of the wrong shape (every value the reader
uses is type-checked; JSON nested deeper than :data:`MAX_CONFIG_DEPTH` or with duplicate keys
is refused). Problems of the whole file raise
:class:`~engine.io.models.model_import.ModelImportError`; problems of one conv layer are listed in
:attr:`ModelLayers.refused`. Both name the file, the layer (escaped,
:func:`engine.base.names.shown`) and what was expected against what was found.
"""

from __future__ import annotations

import io
import os
import re
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from engine.base.memory_limit import DEFAULT_MEMORY_LIMIT, gib
from engine.base.names import shown
from engine.io import strict_json
from engine.io.models import hdf5_guard
from engine.io.models.model_import import (
    ConvLayer,
    ModelImportError,
    ModelLayers,
    check_layer,
    float_weights,
    need_module,
)

CONV_CLASSES = ("Conv2D", "DepthwiseConv2D")
OTHER_CONV_CLASSES = ("Conv1D", "Conv3D", "SeparableConv2D", "SeparableConv1D", "Conv2DTranspose",
                      "Conv3DTranspose", "Conv1DTranspose", "DepthwiseConv1D")
MODEL_CLASSES = ("Sequential", "Functional", "Model")
#: Keras's data_format -> the canvas layout (Keras's default, null, is channels_last).
DATA_FORMATS = {"channels_last": "NHWC", "channels_first": "NCHW", None: "NHWC"}
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
_MISSING = object()


def _found(value: object) -> str:
    """A config value as a message shows what was found: ``a string '3'``, ``null``..."""
    if value is _MISSING:
        return "missing"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"the boolean {'true' if value else 'false'}"
    kind = {int: "the integer", float: "the number", str: "the string", list: "the list",
            dict: "the object"}.get(type(value), type(value).__name__)
    return f"{kind} {shown(value, 60)}"


def _count(value: object) -> bool:
    return type(value) is int and value >= 1


class _LayerProblem(Exception):
    """A reason one layer cannot be imported (the reader adds the file and layer names)."""


def _ints(config: dict, key: str, default: object = _MISSING) -> tuple[int, int]:
    """``config[key]``: one positive integer or a list of two (never booleans)."""
    value = config.get(key, default)
    if _count(value):
        return value, value
    if isinstance(value, list) and len(value) == 2 and all(_count(v) for v in value):
        return value[0], value[1]
    raise _LayerProblem(f"{key} is {_found(value)}, expected a positive integer or a list of 2 "
                        "(a 2-D conv)")


def _positive(config: dict, key: str, default: object = _MISSING) -> int:
    value = config.get(key, default)
    if not _count(value):
        raise _LayerProblem(f"{key} is {_found(value)}, expected a positive integer")
    return value


def snake_case(class_name: str) -> str:
    """Keras's ``naming.to_snake_case`` of a class name: Conv2D -> conv2d,
    DepthwiseConv2D -> depthwise_conv2d."""
    name = re.sub(r"\W+", "", class_name)
    name = re.sub("(.)([A-Z][a-z]+)", r"\1_\2", name)
    return re.sub("([a-z])([A-Z])", r"\1_\2", name).lower()


def _input_hw(entry: dict, previous: dict, fmt: str) -> tuple[int, int] | None:
    """The layer's input rows and columns, when the config says them."""
    for source in (entry, previous if previous.get("class_name") == "InputLayer" else {}):
        build = source.get("build_config")
        shape = build.get("input_shape") if isinstance(build, dict) else None
        config = source.get("config")
        config = config if isinstance(config, dict) else {}
        shape = shape or config.get("batch_input_shape") or config.get("batch_shape")
        if isinstance(shape, list) and len(shape) == 4:
            hw = shape[1:3] if fmt == "NHWC" else shape[2:4]
            return (hw[0], hw[1]) if all(_count(v) for v in hw) else None
    return None


def _weight_names(value: object) -> list[str]:
    """A ``weight_names`` attribute as a list of names (Keras writes an empty float array for
    a layer without weights)."""
    if value is None:
        return []
    array = np.asarray(value)
    if array.size == 0:
        return []
    if array.ndim > 1 or array.dtype.kind not in "OSU":
        raise _LayerProblem(f"weight_names is a {array.ndim}-D {array.dtype} attribute "
                            f"{shown(value, 60)}, expected a list of names")
    names = []
    for item in array.reshape(-1):
        text = _text(item)
        if text is None and isinstance(item, bytes | str):
            raw = item if isinstance(item, bytes) else item.encode("utf-8", "surrogateescape")
            raise _LayerProblem(f"weight_names holds {shown(raw, 60)}, not UTF-8 text")
        if text is None:
            raise _LayerProblem(f"weight_names holds {_found(item)}, expected names")
        names.append(text)
    return names


def _text(value: object) -> str | None:
    """``value`` as text when it is UTF-8 bytes or a string (h5py hands over bytes that are not
    UTF-8 as a string with surrogate escapes: not text either)."""
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return None
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return None
        return value
    return None


@dataclass
class _Reader:
    """One open Keras file: its HDF5 weights, where messages say they are, and the memory the
    weights read so far take."""

    path: str
    h5: object
    source: str  # the HDF5 file as messages name it (the path, or "m.keras: model.weights.h5")
    file_size: int
    limit: int
    legacy: bool
    config: dict
    used: int = 0
    _index: dict | None = None
    _prefix: str = ""
    _index_problems: dict[str, str] = field(default_factory=dict)

    def fail(self, message: str) -> ModelImportError:
        return ModelImportError(f"{self.path}: {message}")

    # -- the config -------------------------------------------------------------------------

    def walk(self, layers: list, prefix: str, where: str
             ) -> Iterator[tuple[str, str, dict, dict]]:
        """(Keras 3 weight path, layer name, layer entry, previous entry), nested models
        flattened; ``where`` is the list's JSON path for messages.

        Keras 3 addresses a model's layers by class, not by name: ``layers/conv2d``,
        ``layers/conv2d_1``, ... in list order (keras/src/saving/saving_lib.py,
        ``_save_container_state``); a nested model's layers are under its own path +
        ``/layers``.
        """
        previous: dict = {}
        used: dict[str, int] = {}
        for i, entry in enumerate(layers):
            at = f"{where}[{i}]"
            if not isinstance(entry, dict):
                raise self.fail(f"the layer at {at} is {_found(entry)}, expected an object")
            kind = entry.get("class_name", _MISSING)
            if not isinstance(kind, str):
                raise self.fail(f"the layer at {at} has class_name {_found(kind)}, expected a "
                                "string")
            config = entry.get("config", _MISSING)
            name = config.get("name", _MISSING) if isinstance(config, dict) else _MISSING
            name = entry.get("name", _MISSING) if name is _MISSING else name
            if not isinstance(name, str):
                raise self.fail(f"the {shown(kind)} layer at {at} has name {_found(name)}, "
                                "expected a string")
            snake = snake_case(kind)
            used[snake] = used.get(snake, -1) + 1
            path = f"{prefix}/{snake}" + (f"_{used[snake]}" if used[snake] else "")
            if kind in MODEL_CLASSES:
                inner = config.get("layers", _MISSING) if isinstance(config, dict) else config
                if not isinstance(inner, list):
                    raise self.fail(f"model {shown(name)} at {at}: its layers are "
                                    f"{_found(inner)}, expected a list")
                yield from self.walk(inner, f"{path}/layers", f"{at}.config.layers")
            else:
                yield path, name, entry, previous
            previous = entry

    def conv_layer(self, name: str, entry: dict, previous: dict, wpath: str) -> ConvLayer:
        """The conv layer of this config entry, its attributes checked before its weights
        are read."""
        kind, c = entry["class_name"], entry.get("config", _MISSING)
        if not isinstance(c, dict):
            raise _LayerProblem(f"its config is {_found(c)}, expected an object")
        kernel = _ints(c, "kernel_size")
        strides = _ints(c, "strides", 1)
        dilations = _ints(c, "dilation_rate", 1)
        padding = c.get("padding", "valid")
        if not isinstance(padding, str) or padding.lower() not in ("same", "valid"):
            raise _LayerProblem(f"padding is {_found(padding)}, expected 'same' or 'valid'")
        data_format = c.get("data_format")
        fmt = DATA_FORMATS.get(data_format) if isinstance(data_format, str | None) else None
        if fmt is None:
            raise _LayerProblem(f"data_format is {_found(data_format)}, expected "
                                "'channels_last' or 'channels_first'")
        use_bias = c.get("use_bias", True)
        if not isinstance(use_bias, bool):
            raise _LayerProblem(f"use_bias is {_found(use_bias)}, expected true or false")
        depthwise = kind == "DepthwiseConv2D"
        if depthwise:
            multiplier, groups, filters = _positive(c, "depth_multiplier", 1), 1, None
        else:
            multiplier, groups = None, _positive(c, "groups", 1)
            filters = _positive(c, "filters") if "filters" in c else None
        weights = self.read_legacy(name, use_bias) if self.legacy else self.read_v3(
            wpath, name, use_bias)
        w = float_weights(name, "kernel", weights[0])
        if w.ndim != 4:
            raise _LayerProblem(f"the kernel has shape {list(w.shape)}, expected 4 dimensions "
                                f"(H, W, in, {'multiplier' if depthwise else 'out'})")
        kh, kw, cin, cout = (int(n) for n in w.shape)
        if (kh, kw) != kernel:
            raise _LayerProblem(f"kernel_size is {list(kernel)} but the kernel has shape "
                                f"{list(w.shape)}")
        if depthwise:
            if cout != multiplier:
                raise _LayerProblem(f"depth_multiplier is {multiplier} but the kernel has shape "
                                    f"{list(w.shape)}")
            groups, in_channels, out = cin, cin, cin * cout
        else:
            if filters is not None and cout != filters:
                raise _LayerProblem(f"filters is {filters} but the kernel has shape "
                                    f"{list(w.shape)}")
            if cout % groups:
                raise _LayerProblem(f"groups {groups} does not divide the kernel's {cout} "
                                    "output channels")
            in_channels, out = cin * groups, cout
            if groups > 1 and cin == 1:  # one input channel per group: TF's depthwise layout
                w = w.reshape(kh, kw, groups, cout // groups)
        bias = float_weights(name, "bias", weights[1]) if use_bias else None
        layer = ConvLayer(name=name, kernel=kernel, strides=strides, dilations=dilations,
                          padding=padding.upper(), pads=(0, 0, 0, 0), groups=groups,
                          in_channels=in_channels, out_channels=out, data_format=fmt,
                          weights=np.ascontiguousarray(w), bias=bias,
                          input_hw=_input_hw(entry, previous, fmt))
        check_layer(layer)
        return layer

    # -- the weights ------------------------------------------------------------------------

    def dataset(self, where: str, what: str) -> np.ndarray:
        """One checked dataset, charged to the memory the weights may take together."""
        array = hdf5_guard.read_dataset(self.h5, where, self.source, what, self.limit,
                                        self.file_size, self.used)
        self.used += array.nbytes
        return array

    def read_v3(self, wpath: str, name: str, use_bias: bool) -> list[np.ndarray]:
        """Kernel (and bias) of a .keras layer: ``<wpath>/vars/0`` and ``/1``."""
        where = f"{wpath}/vars"
        group = hdf5_guard.get_group(self.h5, where, self.source, "the variables")
        if group is None:  # files written by Keras 2.13 name the list differently
            where = wpath.replace("layers", "_layer_checkpoint_dependencies") + "/vars"
            group = hdf5_guard.get_group(self.h5, where, self.source, "the variables")
        if group is None:
            raise _LayerProblem(f"{WEIGHTS_MEMBER} has no variables at "
                                f"{shown(wpath + '/vars')}")
        try:
            owner = _text(group.attrs.get("name"))  # Keras 3.15 writes the layer name
        except hdf5_guard.H5_ERRORS:
            owner = None
        if owner is not None and owner != name:
            raise _LayerProblem(f"the variables at {shown(where)} belong to layer "
                                f"{shown(owner)}, says the file")
        out = [self.dataset(f"{where}/0", "the kernel")]
        return out + [self.dataset(f"{where}/1", "the bias")] if use_bias else out

    def _build_index(self) -> dict[str, dict[str, list[str]]]:
        """Layer name -> {group: its weight names}, from the ``weight_names`` of every group in
        ``model_weights`` (read once: a lookup per layer is then constant time)."""
        import h5py

        root = hdf5_guard.get_group(self.h5, "model_weights", self.source, "the group")
        root, self._prefix = (self.h5, "") if root is None else (root, "model_weights/")
        index: dict[str, dict[str, list[str]]] = {}
        for raw in root.id:
            key = raw.decode("utf-8", "replace")
            try:
                obj = h5py.h5o.open(root.id, raw)
                if not isinstance(obj, h5py.h5g.GroupID):
                    continue
                names = _weight_names(h5py.Group(obj).attrs.get("weight_names"))
            except _LayerProblem as err:
                self._index_problems[key] = str(err)
                continue
            except hdf5_guard.H5_ERRORS as err:
                self._index_problems[key] = f"weight_names cannot be read ({err})"
                continue
            for n in names:
                owner = n.rpartition("/")[0] or key  # Keras 1 names carry no layer path
                parts = owner.split("/")
                for i in range(len(parts)):  # "model/block/conv": conv, block/conv, ...
                    index.setdefault("/".join(parts[i:]), {}).setdefault(key, []).append(n)
        return index

    def read_legacy(self, name: str, use_bias: bool) -> list[np.ndarray]:
        """Kernel (and bias) of layer ``name``: listed as ``.../<name>/kernel`` in the
        ``weight_names`` of its group ``model_weights/<name>``, or of a nested model's."""
        if self._index is None:
            self._index = self._build_index()
        groups = self._index.get(name, {})
        key = name if name in groups else next(iter(groups), None)
        if key is None:
            problem = self._index_problems.get(name)
            raise _LayerProblem(f"group {shown(name)}: {problem}" if problem else
                                "the file lists no weights for this layer (in any "
                                "group's weight_names)")
        prefix = self._prefix
        mine = groups[key]
        tails = [n.rsplit("/", 1)[-1].split(":")[0] for n in mine]
        kernels = [n for n, t in zip(mine, tails, strict=True) if "kernel" in t]
        biases = [n for n, t in zip(mine, tails, strict=True) if "bias" in t]
        if not kernels:
            raise _LayerProblem(f"its weight_names {shown(mine, 60)} name no kernel")
        out = [self.dataset(f"{prefix}{key}/{kernels[0]}", "the kernel")]
        if not use_bias:
            return out
        if not biases:
            raise _LayerProblem(f"use_bias is true but its weight_names {shown(mine, 60)} name "
                                "no bias")
        return out + [self.dataset(f"{prefix}{key}/{biases[0]}", "the bias")]


# -- opening the file -----------------------------------------------------------------------


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
        raise ModelImportError(f"{where} is {_found(data)}, expected an object (a model)")
    return data


def _member(z: zipfile.ZipFile, name: str, limit: int, why: str, path: str) -> bytes:
    """The zip member ``name`` if its declared size is at most ``limit`` (zipfile never
    returns more than the declared size)."""
    try:
        info = z.getinfo(name)
    except KeyError:
        raise ModelImportError(f"{path}: a .keras zip without {name}") from None
    if info.file_size > limit:
        raise ModelImportError(f"{path}: {name} is {gib(info.file_size)} uncompressed, "
                               f"more than {why} ({gib(limit)}): not read")
    return z.read(info)


def _open_zip(path: str, h5py, limit: int) -> tuple[dict, object, int]:
    """config.json and model.weights.h5 of a .keras zip, read into memory (nothing is
    extracted) after checking their declared sizes."""
    try:
        with zipfile.ZipFile(path) as z:
            raw = _member(z, CONFIG_MEMBER, MAX_CONFIG_BYTES, "a config may be", path)
            data = _member(z, WEIGHTS_MEMBER, limit, "the memory limit", path)
    except ModelImportError:
        raise
    except ZIP_ERRORS as err:
        raise ModelImportError(f"{path}: not a readable .keras zip ({type(err).__name__}: "
                               f"{err})") from None
    config = _parse_config(raw, f"{path}: {CONFIG_MEMBER}")
    try:
        h5 = h5py.File(io.BytesIO(data), "r")
    except hdf5_guard.H5_ERRORS as err:
        raise ModelImportError(f"{path}: {WEIGHTS_MEMBER} is not a readable HDF5 file "
                               f"({type(err).__name__}: {err})") from None
    return config, h5, len(data)


def _legacy_config(h5, path: str) -> dict:
    try:
        raw = h5.attrs.get("model_config")
    except hdf5_guard.H5_ERRORS as err:
        raise ModelImportError(f"{path}: the model_config attribute cannot be read "
                               f"({type(err).__name__}: {err})") from None
    if raw is None:
        raise ModelImportError(f"{path}: an HDF5 file without a model_config attribute "
                               "(a weights-only file has no layer attributes)")
    if isinstance(raw, np.ndarray) and raw.shape == () or isinstance(raw, np.bytes_):
        raw = raw.item() if isinstance(raw, np.ndarray) else bytes(raw)
    if not isinstance(raw, str | bytes):
        raise ModelImportError(f"{path}: the model_config attribute is {shown(raw, 60)}, "
                               "expected a JSON string")
    if len(raw) > MAX_CONFIG_BYTES:
        raise ModelImportError(f"{path}: the model_config attribute has {gib(len(raw))}, "
                               f"more than a config may have ({gib(MAX_CONFIG_BYTES)})")
    return _parse_config(raw, f"{path}: the model_config attribute")


def _open(path: str, h5py, limit: int) -> _Reader:
    """The file's config and an open :class:`_Reader` (its HDF5 file checked)."""
    try:
        hdf5 = h5py.is_hdf5(path)
        is_zip = not hdf5 and zipfile.is_zipfile(path)
        size = os.path.getsize(path)
    except OSError as err:
        raise ModelImportError(f"{path}: cannot read the file ({err.strerror or err})") from None
    if is_zip:
        config, h5, size = _open_zip(path, h5py, limit)
        source = f"{path}: {WEIGHTS_MEMBER}"
    elif hdf5:
        try:
            h5 = h5py.File(path, "r")
        except hdf5_guard.H5_ERRORS as err:
            raise ModelImportError(f"{path}: not a readable HDF5 file ({type(err).__name__}: "
                                   f"{err})") from None
        source, config = path, None
    else:
        raise ModelImportError(f"{path}: not a Keras model (neither a .keras zip nor an HDF5 "
                               "file)")
    try:
        hdf5_guard.check_file(h5, source)
        if config is None:
            config = _legacy_config(h5, path)
    except BaseException:
        h5.close()
        raise
    return _Reader(path, h5, source, size, limit, legacy=not is_zip, config=config)


def _layer_list(reader: _Reader) -> list:
    top = reader.config.get("config", _MISSING)
    if not isinstance(top, dict):
        raise reader.fail(f"the model config's \"config\" is {_found(top)}, expected an object")
    layers = top.get("layers", _MISSING)
    if not isinstance(layers, list):
        raise reader.fail(f"the model config's \"layers\" are {_found(layers)}, expected a list")
    return layers


def read_keras(path: str, memory_limit: int = DEFAULT_MEMORY_LIMIT) -> ModelLayers:
    """The Conv2D / DepthwiseConv2D layers of a ``.keras`` or ``.h5`` Keras model; the weights
    read together, and each zip member read, fit ``memory_limit`` bytes."""
    h5py = need_module("h5py", "a Keras model")
    reader = _open(path, h5py, memory_limit)
    found_layers = ModelLayers([], {}, {})
    with reader.h5:
        for wpath, name, entry, previous in reader.walk(_layer_list(reader), "layers",
                                                        "$.config.layers"):
            kind = entry["class_name"]
            said = f"layer {shown(name)}"
            if kind in CONV_CLASSES:
                try:
                    found_layers.layers.append(reader.conv_layer(name, entry, previous, wpath))
                except _LayerProblem as err:
                    found_layers.refused[name] = f"{said}: {err} (in {path})"
                except ModelImportError as err:  # a dataset's problem names the file already
                    text = str(err)
                    found_layers.refused[name] = (f"{said}: {text}" if text.startswith(path)
                                                  else f"{text} (in {path})")
            elif kind in OTHER_CONV_CLASSES:
                found_layers.refused[name] = (f"{said}: {kind} cannot be imported, Conv2D and "
                                              f"DepthwiseConv2D only (in {path})")
            else:
                shown_kind = kind if re.fullmatch(r"[\w.]{1,80}", kind, re.ASCII) else shown(kind)
                found_layers.others[name] = f"{said}: {shown_kind} is not a conv layer"
    return found_layers

