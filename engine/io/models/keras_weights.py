"""A Keras file's weights (HDF5: a .keras zip's model.weights.h5, or a legacy .h5), read checked
and within a memory limit: a layer's kernel and bias, or its variables by role, from the
``.keras`` variable groups or the legacy ``weight_names`` lists (indexed once per file).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from engine.base.names import article, shown
from engine.io.models import hdf5_guard
from engine.io.models.keras_layers import LayerProblem, found_text
from engine.io.models.keras_open import WEIGHTS_MEMBER


def _weight_names(value: object) -> list[str]:
    """A ``weight_names`` attribute as a list of names (Keras writes an empty float array for
    a layer without weights)."""
    if value is None:
        return []
    array = np.asarray(value)
    if array.size == 0:
        return []
    if array.ndim > 1 or array.dtype.kind not in "OSU":
        raise LayerProblem(f"weight_names is {article(f'{array.ndim}-D')} {array.dtype} attribute "
                           f"{shown(value, 60)}, expected a list of names")
    names = []
    for item in array.reshape(-1):
        text = _text(item)
        if text is None and isinstance(item, bytes | str):
            raw = item if isinstance(item, bytes) else item.encode("utf-8", "surrogateescape")
            raise LayerProblem(f"weight_names holds {shown(raw, 60)}, not UTF-8 text")
        if text is None:
            raise LayerProblem(f"weight_names holds {found_text(item)}, expected names")
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


@dataclass(kw_only=True)
class KerasWeights:
    """The HDF5 weights of one open Keras file, where messages say they are, and the memory
    the weights read so far take."""

    h5: Any  # an h5py.File (h5py has no type hints)
    source: str  # the HDF5 file as messages name it (the path, or "m.keras: model.weights.h5")
    file_size: int
    limit: int
    legacy: bool
    used: int = 0
    _index: dict | None = None
    _prefix: str = ""
    _index_problems: dict[str, str] = field(default_factory=dict)

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
            raise LayerProblem(f"{WEIGHTS_MEMBER} has no variables at "
                               f"{shown(wpath + '/vars')}")
        try:
            owner = _text(group.attrs.get("name"))  # Keras 3.15 writes the layer name
        except hdf5_guard.H5_ERRORS:
            owner = None
        if owner is not None and owner != name:
            raise LayerProblem(f"the variables at {shown(where)} belong to layer "
                               f"{shown(owner)}, says the file")
        out = [self.dataset(f"{where}/0", "the kernel")]
        return out + [self.dataset(f"{where}/1", "the bias")] if use_bias else out

    def _listed_weights(self, name: str) -> tuple[str, list]:
        """``(group, weight_names)`` listing layer ``name`` (its own group, else the first group
        naming it); a :class:`LayerProblem` when no group lists it."""
        if self._index is None:
            self._index = self._build_index()
        groups = self._index.get(name, {})
        key = name if name in groups else next(iter(groups), None)
        if key is None:
            problem = self._index_problems.get(name)
            raise LayerProblem(f"group {shown(name)}: {problem}" if problem else
                               "the file lists no weights for this layer (in any group's "
                               "weight_names)")
        return key, groups[key]

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
            except LayerProblem as err:
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
        key, mine = self._listed_weights(name)  # builds the index, which sets the prefix
        prefix = self._prefix
        tails = [n.rsplit("/", 1)[-1].split(":")[0] for n in mine]
        kernels = [n for n, t in zip(mine, tails, strict=True) if "kernel" in t]
        biases = [n for n, t in zip(mine, tails, strict=True) if "bias" in t]
        if not kernels:
            raise LayerProblem(f"its weight_names {shown(mine, 60)} name no kernel")
        out = [self.dataset(f"{prefix}{key}/{kernels[0]}", "the kernel")]
        if not use_bias:
            return out
        if not biases:
            raise LayerProblem(f"use_bias is true but its weight_names {shown(mine, 60)} name "
                               "no bias")
        return out + [self.dataset(f"{prefix}{key}/{biases[0]}", "the bias")]

    def read_roles(self, wpath: str, name: str, roles: tuple[str, ...]) -> list[np.ndarray]:
        """A layer's variables in Keras's order (``roles``: their names): ``.keras``
        ``<wpath>/vars/<i>``; ``.h5`` the ``weight_names`` whose last part is the role."""
        if not self.legacy:
            where = f"{wpath}/vars"
            if hdf5_guard.get_group(self.h5, where, self.source, "the variables") is None:
                raise LayerProblem(f"{WEIGHTS_MEMBER} has no variables at {shown(where)}")
            return [self.dataset(f"{where}/{i}", f"the {role}") for i, role in enumerate(roles)]
        key, listed = self._listed_weights(name)
        tails = {n.rsplit("/", 1)[-1].split(":")[0]: n for n in listed}
        missing = [r for r in roles if r not in tails]
        if missing:
            raise LayerProblem(f"its weight_names {shown(listed, 80)} name no {missing[0]}")
        return [self.dataset(f"{self._prefix}{key}/{tails[r]}", f"the {r}") for r in roles]
