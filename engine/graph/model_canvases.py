"""Every conv layer of a model at once: ``gradblocks import MODEL --all -o DIR`` and the
per-layer plan that ``--list`` prints.

``DIR`` gets one canvas per importable conv layer, at its model's input size or, when the model
gives none, ``--input-size`` (:func:`given_size`) (:func:`engine.graph.layer_canvas.
write_layer_canvas`: ``<layer>.gbc.json`` and its arrays, the file name the layer's name made safe
by :func:`engine.base.names.safe_stems`: unique ignoring case, never a Windows device name) and
``index.json``: a list with one object per conv layer, in the reader's order, ``{"layer", "op",
"input_shape", "output_shape", "attrs", "canvas"}`` (``layer`` the model's own name, ``canvas``
its file, relative to DIR, shapes in the canvas layout, ``attrs`` the forward block's) or
``{"layer", "op", "skipped": why}`` (``op`` null when the reader refused the layer before
knowing it).

All or nothing: the whole set is written into a build folder first (a temporary name
:func:`engine.base.atomic.temp_name` gives; a killed run's is removed by a later write there,
as stale temporary files are). A DIR that does not exist or is empty is then replaced by it in
one rename. Into a DIR holding files the set's files are moved, index.json last (the commit);
then the files of the old set (its index's canvases and their arrays, and arrays an import
wrote for these canvases, named by their content's hash) that the new set does not use are
removed; other files stay. An interrupted run therefore leaves DIR as it was, or, while moving,
files holding exactly what a rerun writes there: the rerun takes them.

Which DIR is refused (:func:`dir_problem`): a path that exists and is not a folder (a file, a
FIFO...); a folder where a file the set would write exists (ignoring case) and is not one a
previous ``--all`` wrote (a canvas, or an array the canvas names, listed in DIR/index.json) nor
holds exactly what the set writes there, so no file the user made is ever replaced.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from engine.base.atomic import (
    TEMP_RANDOM_BYTES,
    fsync_folder,
    not_regular,
    sweep_stale_temps,
    temp_name,
    write_bytes_atomically,
)
from engine.base.names import escaped, safe_stems
from engine.graph.import_files import ARRAY_IDS, CANVAS_SUFFIX, array_name, owned_arrays
from engine.graph.layer_canvas import plan_layer, size_mismatch, write_layer_canvas
from engine.io.models.model_import import ConvLayer, ModelImportError, ModelLayers, list_rows

INDEX_NAME = "index.json"
#: The test hook (read only by tests): ``K:SIGNAL`` (e.g. ``3:SIGKILL``) makes
#: :func:`write_model_canvases` send its own process that signal after its K-th step (each
#: canvas set written into the build folder, index.json there, each file moved into DIR).
SIGNAL_AFTER_STEP_ENV = "GRADBLOCKS_TEST_SIGNAL_AFTER_STEP"


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
    input_hw: tuple[int, ...] | None = None  # the size given (--input-size), else the model's


def given_size(layer: ConvLayer, input_hw: tuple[int, ...] | None) -> tuple[int, ...] | None:
    """The size ``--all --input-size`` gives ``layer``: None (the model's) when the model states
    one or none is given, else ``input_hw`` (a 1-D layer's W is made 1,W by
    :func:`engine.graph.layer_canvas.plan_layer`). A 1-D layer refuses (a
    one-line :class:`ModelImportError` naming it) a height other than 1: one size for every
    layer means the 2-D layers' H,W, not a 1-D conv on rows; other counts that do not fit are
    refused by :func:`engine.graph.layer_canvas.plan_layer`."""
    if input_hw is None or layer.input_hw is not None:
        return None
    if layer.conv1d and (len(input_hw) > 2 or (len(input_hw) == 2 and input_hw[0] != 1)):
        raise ModelImportError(size_mismatch(layer, input_hw))
    return tuple(input_hw)


def plan_model(found: ModelLayers, batch: int = 1, layout: str | None = None,
               input_hw: tuple[int, ...] | None = None) -> list[Planned]:
    """Each conv layer of ``found`` planned as its import would plan it (same checks, same
    messages), at ``input_hw`` when its model states no size (:func:`given_size`); the refused
    layers last, with the reader's reason."""
    out = []
    for layer in found.layers:
        try:
            size = given_size(layer, input_hw)
            conv, shape = plan_layer(layer, size, batch, layout)
        except ModelImportError as err:
            out.append(Planned(layer.name, layer.op, layer, skipped=str(err)))
            continue
        out.append(Planned(layer.name, layer.op, layer, tuple(conv.input_shape), tuple(shape),
                           dict(conv.attrs), input_hw=size))
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
    # an importable plan has its layer; the others have their reason (``skipped``)
    rows = list_rows([p.layer for p in plans if importable(p) and p.layer is not None])
    return rows, [escaped(p.skipped) for p in plans
                  if not importable(p) and p.skipped is not None]


def canvas_names(plans: list[Planned]) -> dict[int, str]:
    """Position in ``plans`` -> the canvas file name in DIR of each planned layer: the layer's
    name made safe and unique ignoring case (:func:`engine.base.names.safe_stems`)."""
    planned = [i for i, p in enumerate(plans) if p.skipped is None]
    stems = safe_stems(plans[i].name for i in planned)
    return {i: stem + CANVAS_SUFFIX for i, stem in zip(planned, stems, strict=True)}


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


def _imported_array(folder: Path, name: str, stems: tuple[str, ...]) -> bool:
    """``name`` is an array an import of one of ``stems`` wrote: ``<stem>.<id>.<hash12>.npy``
    whose content has that hash (a name no other writer gives)."""
    for stem in stems:
        for node_id in ARRAY_IDS:
            head = f"{stem}.{node_id}."
            if name.startswith(head) and name.endswith(".npy"):
                try:
                    data = (folder / name).read_bytes()
                except OSError:
                    return False
                return name == array_name(stem, node_id, data)
    return False


def _same_bytes(a: Path, b: Path) -> bool:
    try:
        return os.path.isfile(a) and not os.path.islink(a) and a.read_bytes() == b.read_bytes()
    except OSError:
        return False


def _not_a_folder(folder: Path) -> str | None:
    kind = not_regular(folder)
    if kind is None and folder.exists():
        kind = "a file"
    return f"is {kind}, not a folder" if kind is not None and kind != "a folder" else None


def dir_problem(folder: Path, names: dict[int, str], built: Path) -> str | None:
    """Why ``folder`` cannot take the set written in ``built`` (see the module docstring), or
    None: a file holding exactly what the set puts there is not in the way."""
    problem = _not_a_folder(folder)
    if problem or not folder.exists():
        return problem
    mine = {n.lower() for n in previous_files(folder)}
    canvases = {n.lower() for n in names.values()} | {INDEX_NAME}
    stems = tuple(n[: -len(CANVAS_SUFFIX)] for n in names.values())
    prefixes = tuple(f"{stem.lower()}." for stem in stems)
    for entry in sorted(os.listdir(folder)):
        key = entry.lower()
        if not (key in canvases or key.startswith(prefixes)) or key in mine:
            continue
        if _same_bytes(folder / entry, built / entry) or _imported_array(folder, entry, stems):
            continue
        return (f"holds {escaped(entry, 80)!r}, a file no earlier `import --all` wrote "
                "(it would be replaced): choose an empty or new folder")
    return None


def _stepper() -> Callable[[], None]:
    """The test hook (see the module docstring): sends this process the signal
    :data:`SIGNAL_AFTER_STEP_ENV` names after the step it names; does nothing when unset."""
    hook = os.environ.get(SIGNAL_AFTER_STEP_ENV, "")
    k, _, name = hook.partition(":")
    counter = itertools.count(1)

    def step() -> None:
        if hook and str(next(counter)) == k:
            os.kill(os.getpid(), getattr(signal, name))
    return step


def _build(plans: list[Planned], names: dict[int, str], build: Path, step: Callable[[], None],
           batch: int, layout: str | None, protected: tuple[str, ...]) -> list[dict]:
    """Write every canvas (and its arrays) and index.json into the empty folder ``build``."""
    index: list[dict] = []
    for i, p in enumerate(plans):
        if p.skipped is not None:
            index.append({"layer": p.name, "op": p.op, "skipped": p.skipped})
            continue
        # a plan not skipped is complete (plan_model)
        assert p.layer is not None and p.input_shape is not None and p.output_shape is not None
        write_layer_canvas(p.layer, str(build / names[i]), input_hw=p.input_hw, batch=batch,
                           layout=layout, protected=protected)
        step()
        index.append({"layer": p.name, "op": p.op, "input_shape": list(p.input_shape),
                      "output_shape": list(p.output_shape), "attrs": p.attrs,
                      "canvas": names[i]})
    text = "[\n" + ",\n".join(json.dumps(item, ensure_ascii=True) for item in index) + "\n]\n"
    write_bytes_atomically(build / INDEX_NAME, text.encode("ascii"))
    step()
    return index


def _move_in(build: Path, folder: Path, names: dict[int, str], step: Callable[[], None]) -> None:
    """Move the set from ``build`` into the existing ``folder``: arrays, canvases, index.json
    last (the commit); then remove what the old set had that the new one does not (see the
    module docstring)."""
    old = previous_files(folder)
    stems = tuple(n[: -len(CANVAS_SUFFIX)] for n in names.values())
    new = sorted(os.listdir(build), key=lambda n: (n == INDEX_NAME, n.endswith(CANVAS_SUFFIX), n))
    for name in new:
        os.replace(build / name, folder / name)
        step()
    fsync_folder(folder)
    stale = {n for n in old if n not in new}
    stale |= {n for n in os.listdir(folder)
              if n not in new and _imported_array(folder, n, stems)}
    for name in sorted(stale):
        try:
            if os.path.isfile(folder / name) and not os.path.islink(folder / name):
                os.unlink(folder / name)
        except OSError:  # gone already, or not ours to remove: the new set is written
            pass
    fsync_folder(folder)


def write_model_canvases(found: ModelLayers, out_dir: str, *, batch: int = 1,
                         layout: str | None = None, protected: tuple[str, ...] = (),
                         input_hw: tuple[int, ...] | None = None) -> list[dict]:
    """Write DIR all or nothing (see the module docstring); returns the index's objects.
    ``input_hw`` is the input size of every layer whose model states none (:func:`given_size`;
    a layer it does not fit is skipped, saying why)."""
    plans = plan_model(found, batch, layout, input_hw)
    names = canvas_names(plans)
    folder = Path(out_dir)
    problem = _not_a_folder(folder)
    if problem:
        raise ModelImportError(f"{escaped(out_dir, 120)!r} {problem}")
    whole = Path(os.path.abspath(folder))
    fresh = whole.name != "" and (not os.path.lexists(whole) or (
        not whole.is_symlink() and not os.listdir(whole)))
    home = whole.parent if fresh else whole  # the build folder's: the same file system
    home.mkdir(parents=True, exist_ok=True)
    sweep_stale_temps(home)
    build = home / temp_name(whole.name if fresh else INDEX_NAME, os.getpid(),
                             os.urandom(TEMP_RANDOM_BYTES))
    step = _stepper()
    build.mkdir()
    try:
        index = _build(plans, names, build, step, batch, layout, protected)
        fsync_folder(build)
        if fresh:
            try:
                os.replace(build, whole)  # over nothing or an empty folder: the commit
            except OSError:  # the folder got files meanwhile (or the system refuses)
                if not whole.is_dir():
                    raise
            else:
                fsync_folder(home)
                return index
        problem = dir_problem(whole, names, build)
        if problem:
            raise ModelImportError(f"{escaped(out_dir, 120)!r} {problem}")
        _move_in(build, whole, names, step)
    finally:
        if os.path.lexists(build):
            shutil.rmtree(build, ignore_errors=True)
    return index
