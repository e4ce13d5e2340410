"""Every conv layer of a model at once: ``gradblocks import MODEL --all -o DIR`` and the
per-layer plan that ``--list`` prints.

``DIR`` gets one canvas per importable conv layer (:func:`engine.graph.layer_canvas.
write_layer_canvas`: ``<layer>.gbc.json`` and its arrays, the file name the layer's name made safe
by :func:`engine.base.names.file_stem`, ``_2``, ``_3``... when two names make the same stem) and
``index.json``, written last: a list with one object per conv layer, in the reader's order,
``{"layer", "op", "input_shape", "output_shape", "attrs", "canvas"}`` (``canvas`` relative to
DIR, shapes in the canvas layout, ``attrs`` the forward block's) or ``{"layer", "op",
"skipped": why}`` (``op`` null when the reader refused the layer before knowing it).

Which DIR is refused (:func:`dir_problem`): a path that exists and is not a folder (a file, a
FIFO...); a folder where a file the set would write exists and is not one a previous ``--all``
wrote (a canvas, or an array the canvas names, listed in DIR/index.json), so no file the user
made is ever replaced.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from engine.base.atomic import not_regular, write_bytes_atomically
from engine.base.names import escaped, file_stem
from engine.graph.layer_canvas import CANVAS_SUFFIX, owned_arrays, plan_layer, write_layer_canvas
from engine.io.models.model_import import ConvLayer, ModelImportError, ModelLayers, list_rows

INDEX_NAME = "index.json"


@dataclass(frozen=True)
class Planned:
    """One conv layer of a model: planned (``conv``, ``output_shape``) or ``skipped`` (why)."""

    name: str
    op: str | None
    layer: ConvLayer | None = None
    input_shape: tuple[int, ...] | None = None
    output_shape: tuple[int, ...] | None = None
    attrs: dict | None = None
    skipped: str | None = None


def plan_model(found: ModelLayers, batch: int = 1, layout: str | None = None) -> list[Planned]:
    """Each conv layer of ``found`` planned as its import would plan it (same checks, same
    messages); the refused layers last, with the reader's reason."""
    out = []
    for layer in found.layers:
        try:
            conv, shape = plan_layer(layer, None, batch, layout)
        except ModelImportError as err:
            out.append(Planned(layer.name, layer.op, layer, skipped=str(err)))
            continue
        out.append(Planned(layer.name, layer.op, layer, tuple(conv.input_shape), tuple(shape),
                           dict(conv.attrs)))
    out += [Planned(name, None, skipped=why) for name, why in found.refused.items()]
    return out


def importable(p: Planned) -> bool:
    """In --list's table (and selectable in the app's import dialog): planned, or only lacking
    an input size (``--input-size`` gives it)."""
    return p.skipped is None or (p.layer is not None and p.layer.input_hw is None)


def list_lines(plans: list[Planned]) -> tuple[list[list[str]], list[str]]:
    """``--list``: the table of the layers that import (:func:`engine.io.models.model_import.
    list_rows`; a layer whose model states no input size is listed: it imports with
    ``--input-size``) and one ``cannot import:`` reason per other conv layer."""
    rows = list_rows([p.layer for p in plans if importable(p)])  # type: ignore[misc]
    return rows, [escaped(p.skipped) for p in plans if not importable(p)]


def canvas_names(plans: list[Planned]) -> dict[str, str]:
    """Layer name -> its canvas file name in DIR (unique, safe)."""
    names: dict[str, str] = {}
    taken = {INDEX_NAME}
    for p in plans:
        if p.skipped is not None:
            continue
        stem, k = file_stem(p.name), 1
        while f"{stem}{'' if k == 1 else f'_{k}'}{CANVAS_SUFFIX}" in taken:
            k += 1
        names[p.name] = f"{stem}{'' if k == 1 else f'_{k}'}{CANVAS_SUFFIX}"
        taken.add(names[p.name])
    return names


def previous_files(folder: Path) -> set[str]:
    """The files a previous ``--all`` wrote in ``folder``: the canvases its index.json lists and
    the arrays each names (nothing when there is no readable index)."""
    try:
        index = json.loads((folder / INDEX_NAME).read_text("utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return set()
    files = {INDEX_NAME}
    for item in index if isinstance(index, list) else []:
        canvas = item.get("canvas") if isinstance(item, dict) else None
        if isinstance(canvas, str) and os.path.basename(canvas) == canvas:
            files.add(canvas)
            files.update(owned_arrays(folder / canvas))
    return files


def dir_problem(folder: Path, names: dict[str, str]) -> str | None:
    """Why ``folder`` cannot take the set (see the module docstring), or None."""
    kind = not_regular(folder)
    if kind is None and folder.exists():
        kind = "a file"
    if kind is not None and kind != "a folder":
        return f"is {kind}, not a folder"
    if not folder.exists():
        return None
    mine = previous_files(folder)
    stems = tuple(n[: -len(CANVAS_SUFFIX)] + "." for n in names.values())
    for entry in sorted(os.listdir(folder)):
        ours = entry in names.values() or entry == INDEX_NAME or entry.startswith(stems)
        if ours and entry not in mine:
            return (f"holds {escaped(entry, 80)!r}, a file no earlier `import --all` wrote "
                    "(it would be replaced): choose an empty or new folder")
    return None


def write_model_canvases(found: ModelLayers, out_dir: str, *, batch: int = 1,
                         layout: str | None = None, protected: tuple[str, ...] = ()
                         ) -> list[dict]:
    """Write DIR (see the module docstring); returns the index's objects."""
    plans = plan_model(found, batch, layout)
    names = canvas_names(plans)
    folder = Path(out_dir)
    problem = dir_problem(folder, names)
    if problem:
        raise ModelImportError(f"{escaped(out_dir, 120)!r} {problem}")
    folder.mkdir(parents=True, exist_ok=True)
    index = []
    for p in plans:
        if p.skipped is not None:
            index.append({"layer": p.name, "op": p.op, "skipped": p.skipped})
            continue
        write_layer_canvas(p.layer, str(folder / names[p.name]), batch=batch,  # type: ignore
                           layout=layout, protected=protected)
        index.append({"layer": p.name, "op": p.op, "input_shape": list(p.input_shape),
                      "output_shape": list(p.output_shape), "attrs": p.attrs,
                      "canvas": names[p.name]})
    text = "[\n" + ",\n".join(json.dumps(item, ensure_ascii=True) for item in index) + "\n]\n"
    write_bytes_atomically(folder / INDEX_NAME, text.encode("ascii"))
    return index
