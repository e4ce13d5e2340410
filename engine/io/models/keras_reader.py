"""The conv layers of a Keras model file (Conv2D, DepthwiseConv2D; SeparableConv2D,
Conv2DTranspose and the 1-D convs Conv1D / DepthwiseConv1D / SeparableConv1D / Conv1DTranspose
through :mod:`engine.io.models.keras_layers`), each with its input size from the
config's walk (:mod:`engine.io.models.keras_graph`), read with ``h5py`` and the file's own config
JSON (no TensorFlow; ``h5py`` is in the ``models`` extra; opening: :mod:`.keras_open`).

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

import re
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from engine.base.memory_limit import DEFAULT_MEMORY_LIMIT
from engine.base.names import escaped, shown
from engine.io.models import keras_graph
from engine.io.models.keras_layers import (
    MISSING,
    LayerProblem,
    activation_of,
    as_2d,
    common,
    found_text,
    is_count,
    positive_int,
    separable_layer,
    transposed_layer,
)
from engine.io.models.keras_open import (  # noqa: F401  (the limits, named here too)
    CONFIG_MEMBER,
    MAX_CONFIG_BYTES,
    MAX_CONFIG_DEPTH,
    WEIGHTS_MEMBER,
    ZIP_ERRORS,
    open_keras,
)
from engine.io.models.keras_weights import KerasWeights
from engine.io.models.model_import import (
    ConvLayer,
    ModelImportError,
    ModelLayers,
    check_layer,
    float_weights,
    need_module,
)

CONV_CLASSES = ("Conv2D", "DepthwiseConv2D", "SeparableConv2D", "Conv2DTranspose", "Conv1D",
                "DepthwiseConv1D", "SeparableConv1D", "Conv1DTranspose", "Conv3D",
                "Conv3DTranspose")
#: The 3-D conv classes (TensorFlow's Conv3D and its input gradient).
CONV_3D = ("Conv3D", "Conv3DTranspose")
#: The 1-D conv classes, imported as the 2-D convs of height 1 (:func:`keras_layers.as_2d`).
CONV_1D = {"Conv1D": "Conv2D", "DepthwiseConv1D": "DepthwiseConv2D",
           "SeparableConv1D": "SeparableConv2D", "Conv1DTranspose": "Conv2DTranspose"}
#: The variables of the conv layers beyond Conv2D / DepthwiseConv2D, in Keras's order.
VARIABLES = {"SeparableConv2D": ("depthwise_kernel", "pointwise_kernel", "bias"),
             "Conv2DTranspose": ("kernel", "bias"), "Conv3DTranspose": ("kernel", "bias")}
MODEL_CLASSES = ("Sequential", "Functional", "Model")
#: Keras's data_format -> the canvas layout (Keras's default, null, is channels_last).


def snake_case(class_name: str) -> str:
    """Keras's ``naming.to_snake_case`` of a class name: Conv2D -> conv2d,
    DepthwiseConv2D -> depthwise_conv2d."""
    name = re.sub(r"\W+", "", class_name)
    name = re.sub("(.)([A-Z][a-z]+)", r"\1_\2", name)
    return re.sub("([a-z])([A-Z])", r"\1_\2", name).lower()


def _input_hw(shape: object, config: dict) -> tuple[tuple[int, ...] | None, str | None]:
    """A conv layer's input sizes (rows and columns; depth, rows and columns of a 3-D conv's
    rank-5 input) from its input ``shape`` (the walk's), or None and why they are unknown."""
    if isinstance(shape, str):
        return None, shape
    if isinstance(shape, tuple) and len(shape) == 3:  # a 1-D conv's [N, W, C]: height 1
        w = shape[2] if config.get("data_format") == "channels_first" else shape[1]
        if not is_count(w):
            return None, f"its input shape {list(shape)} leaves the size open"
        return (1, w), None
    if not isinstance(shape, tuple) or len(shape) not in (4, 5):
        return None, f"its input shape is {shown(shape, 60)}, expected 4 dimensions"
    hw = shape[2:] if config.get("data_format") == "channels_first" else shape[1:-1]
    if not all(is_count(v) for v in hw):
        return None, f"its input shape {list(shape)} leaves the size open"
    return tuple(hw), None


@dataclass(kw_only=True)
class _Reader(KerasWeights):
    """One open Keras file: its config and where messages say it is, over its weights
    (:class:`~engine.io.models.keras_weights.KerasWeights`)."""

    path: str
    config: dict

    def fail(self, message: str) -> ModelImportError:
        return ModelImportError(f"{escaped(self.path)}: {message}")

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
                raise self.fail(f"the layer at {at} is {found_text(entry)}, expected an object")
            kind = entry.get("class_name", MISSING)
            if not isinstance(kind, str):
                raise self.fail(f"the layer at {at} has class_name {found_text(kind)}, expected a "
                                "string")
            config = entry.get("config", MISSING)
            name = config.get("name", MISSING) if isinstance(config, dict) else MISSING
            name = entry.get("name", MISSING) if name is MISSING else name
            if not isinstance(name, str):
                raise self.fail(f"the {shown(kind)} layer at {at} has name {found_text(name)}, "
                                "expected a string")
            snake = snake_case(kind)
            used[snake] = used.get(snake, -1) + 1
            path = f"{prefix}/{snake}" + (f"_{used[snake]}" if used[snake] else "")
            if kind in MODEL_CLASSES:
                inner = config.get("layers", MISSING) if isinstance(config, dict) else config
                if not isinstance(inner, list):
                    raise self.fail(f"model {shown(name)} at {at}: its layers are "
                                    f"{found_text(inner)}, expected a list")
                yield from self.walk(inner, f"{path}/layers", f"{at}.config.layers")
            else:
                yield path, name, entry, previous
            previous = entry

    def conv_layers(self, name: str, entry: dict, wpath: str,
                    shape: object) -> list[ConvLayer]:
        """The conv layer of this config entry, attributes checked before weights are read;
        ``shape`` is its input shape from the walk (:mod:`engine.io.models.keras_graph`) or why
        it is unknown."""
        kind, c = entry["class_name"], entry.get("config", MISSING)
        if not isinstance(c, dict):
            raise LayerProblem(f"its config is {found_text(c)}, expected an object")
        hw, unknown = _input_hw(shape, c)
        causal = None
        if kind in CONV_1D:
            c, causal = as_2d(c, transposed=kind == "Conv1DTranspose")
            if CONV_1D[kind] not in VARIABLES:
                return [self.conv_layer(name, CONV_1D[kind], c, wpath, hw, unknown, True,
                                        causal)]
        if kind in VARIABLES or kind in CONV_1D:
            return [self.variables_layer(name, CONV_1D.get(kind, kind), c, wpath, hw, unknown,
                                         kind in CONV_1D, causal)]
        return [self.conv_layer(name, kind, c, wpath, hw, unknown)]

    def variables_layer(self, name: str, kind: str, c: dict, wpath: str,
                        hw: tuple[int, ...] | None, unknown: str | None, one_d: bool,
                        causal: tuple[int, int, int, int] | None) -> ConvLayer:
        """A :data:`VARIABLES` layer (``kind``), its variables read by role; ``one_d``: a 1-D
        layer's config made 2-D, its kernels [k, ...] read as [1, k, ...]."""
        roles = VARIABLES[kind]
        common(c, 3 if kind in CONV_3D else 2)  # the attributes first
        if c.get("use_bias", True) is False:
            roles = roles[:-1]
        weights = self.read_roles(wpath, name, roles)
        if one_d:  # the kernels (rank 3), not the bias
            weights = [w.reshape(1, *w.shape) if w.ndim == 3 else w for w in weights]
        if kind in ("Conv2DTranspose", "Conv3DTranspose"):
            return transposed_layer(name, c, weights, hw, unknown, 3 if kind in CONV_3D else 2,
                                    one_d)
        return separable_layer(name, c, weights, hw, unknown, one_d, causal)

    def conv_layer(self, name: str, kind: str, c: dict, wpath: str,
                   input_hw: tuple[int, ...] | None, unknown: str | None,
                   one_d: bool = False,
                   causal: tuple[int, int, int, int] | None = None) -> ConvLayer:
        """A Conv2D, DepthwiseConv2D or Conv3D layer (``causal``: a 1-D conv's config made 2-D,
        with these explicit pads when its padding is causal)."""
        rank = 3 if kind == "Conv3D" else 2
        kernel, strides, dilations, padding, fmt, use_bias = common(c, rank)
        depthwise = kind == "DepthwiseConv2D"
        if depthwise:
            multiplier, groups, filters = positive_int(c, "depth_multiplier", 1), 1, None
        else:
            multiplier, groups = None, positive_int(c, "groups", 1)
            filters = positive_int(c, "filters") if "filters" in c else None
        weights = self.read_legacy(name, use_bias) if self.legacy else self.read_v3(
            wpath, name, use_bias)
        w = float_weights(name, "kernel", weights[0])
        if one_d and w.ndim == 3:  # [k, in, out]: [1, k, in, out]
            w = w.reshape(1, *w.shape)
        if w.ndim != rank + 2:
            raise LayerProblem(f"the kernel has shape {list(w.shape)}, expected {rank + 2} "
                               f"dimensions ({'D, ' if rank == 3 else ''}H, W, in, "
                               f"{'multiplier' if depthwise else 'out'})")
        cin, cout = int(w.shape[-2]), int(w.shape[-1])
        if tuple(w.shape[:-2]) != kernel:
            raise LayerProblem(f"kernel_size is {list(kernel)} but the kernel has shape "
                               f"{list(w.shape)}")
        if depthwise:
            if cout != multiplier:
                raise LayerProblem(f"depth_multiplier is {multiplier} but the kernel has shape "
                                   f"{list(w.shape)}")
            groups, in_channels, out = cin, cin, cin * cout
        else:
            if filters is not None and cout != filters:
                raise LayerProblem(f"filters is {filters} but the kernel has shape "
                                   f"{list(w.shape)}")
            if cout % groups:
                raise LayerProblem(f"groups {groups} does not divide the kernel's {cout} "
                                   "output channels")
            in_channels, out = cin * groups, cout
            if groups > 1 and cin == 1 and rank == 2:  # one input channel per group: TF's
                w = w.reshape(*kernel, groups, cout // groups)  # depthwise layout
        bias = float_weights(name, "bias", weights[1]) if use_bias else None
        layer = ConvLayer(name=name, kernel=kernel, strides=strides, dilations=dilations,
                          padding="EXPLICIT" if causal else padding,
                          pads=causal or (0, 0, 0, 0), groups=groups, conv1d=one_d,
                          in_channels=in_channels, out_channels=out, data_format=fmt,
                          weights=np.ascontiguousarray(w), bias=bias, input_hw=input_hw,
                          input_unknown=unknown, activation=activation_of(c))
        check_layer(layer)
        return layer

def _layer_list(reader: _Reader) -> list:
    top = reader.config.get("config", MISSING)
    if not isinstance(top, dict):
        raise reader.fail(f"the model config's \"config\" is {found_text(top)}, expected an object")
    layers = top.get("layers", MISSING)
    if not isinstance(layers, list):
        raise reader.fail(f"the model config's \"layers\" are {found_text(layers)}, expected a list")
    return layers


def read_keras(path: str, memory_limit: int = DEFAULT_MEMORY_LIMIT) -> ModelLayers:
    """The conv layers (:data:`CONV_CLASSES`) of a ``.keras`` or ``.h5`` Keras model; the weights
    read together, and each zip member read, fit ``memory_limit`` bytes."""
    h5py = need_module("h5py", "a Keras model")
    config, h5, source, size, legacy = open_keras(path, h5py, memory_limit)
    reader = _Reader(path=path, h5=h5, source=source, file_size=size, limit=memory_limit,
                     legacy=legacy, config=config)
    found_layers = ModelLayers([], {}, {})
    with reader.h5:
        layers = _layer_list(reader)
        shapes = keras_graph.layer_inputs(reader.config)
        for wpath, name, entry, _previous in reader.walk(layers, "layers", "$.config.layers"):
            kind = entry["class_name"]
            said = f"layer {shown(name)}"
            if kind in CONV_CLASSES:
                try:
                    found_layers.layers += reader.conv_layers(
                        name, entry, wpath, shapes.get(id(entry), "the walk did not reach it"))
                except LayerProblem as err:
                    found_layers.refused[name] = f"{said}: {err} (in {escaped(path)})"
                except ModelImportError as err:  # a dataset's problem names the file already
                    text = str(err)
                    found_layers.refused[name] = (f"{said}: {text}" if text.startswith(escaped(path))
                                                  else f"{text} (in {escaped(path)})")
            else:
                shown_kind = kind if re.fullmatch(r"[\w.]{1,80}", kind, re.ASCII) else shown(kind)
                found_layers.others[name] = f"{said}: {shown_kind} is not a conv layer"
    return found_layers

