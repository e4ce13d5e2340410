"""Sets of files are written all or nothing, and only where they may be (issue 20, point 2).

``export --to jax|tensorflow|pytorch`` writes a script and its ``.sources.<hash>.npz``;
``import --layer`` a canvas and its ``.<id>.<hash>.npy`` arrays (:func:`engine.base.atomic.
write_file_set`). Each is driven as a user drives it (the real CLI in a subprocess) and stopped
at every step of the write (the test hook :data:`engine.base.atomic.STOP_AFTER_STEP_ENV`) to receive
SIGKILL, SIGINT or SIGTERM there; a real full tmpfs and a simulated full disk (every byte
position) fail it; a property test interrupts random sets at random points. After each, the
files on disk are the whole old set or the whole new one: the main file names its companions
and they are the matching ones. Targets that are not regular files, files the canvas reads, the
model and the --input file are never replaced; symlinked targets keep every member beside the
real file; an import canvas that ``check`` would refuse is never written.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
import types
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.base import atomic
from engine.cli import commands
from engine.export import frameworks
from engine.graph import targets
from engine.graph.canvas import Canvas
from engine.graph.canvas_file import load_canvas, save_canvas
from engine.graph.compiler import compile_canvas
from engine.graph.report import problem_lines

REPO = Path(__file__).parents[1]
SIGNALS = {"SIGKILL": (signal.SIGKILL, -signal.SIGKILL), "SIGINT": (signal.SIGINT, 130),
           "SIGTERM": (signal.SIGTERM, 143)}
#: Guard against a regression that would block on a FIFO (never an assertion about speed).
WATCHDOG_SECONDS = 120


def gradblocks(*args, cwd=None, env=None, timeout=WATCHDOG_SECONDS):
    return subprocess.run([sys.executable, "-m", "engine.cli", *map(str, args)],
                          capture_output=True, text=True, check=False, cwd=cwd or REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
                          timeout=timeout)


def in_process(capsys, *args) -> tuple[int, list[str], str]:
    """``cli.main(args)``: (status, stderr lines, stdout)."""
    code = commands.main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.err.splitlines(), out.out


def one_line(lines: list[str], *words: str) -> str:
    assert len(lines) == 1, lines
    assert "Traceback" not in lines[0]
    for word in words:
        assert word in lines[0], (word, lines[0])
    return lines[0]


def listing(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir()}


def temps(folder: Path) -> set[str]:
    return {n for n in listing(folder) if n.endswith(".tmp")}


@pytest.fixture
def watchdog():
    """SIGALRM raises after WATCHDOG_SECONDS: a blocking open() of a FIFO fails the test."""
    def fire(_signum, _frame):
        raise TimeoutError("blocked: a FIFO was opened?")
    previous = signal.signal(signal.SIGALRM, fire)
    signal.alarm(WATCHDOG_SECONDS)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


# -- canvases and models ---------------------------------------------------------------------

def reading_canvas(folder: Path, seed: int = 0, size: int = 5) -> Path:
    """A canvas reading ``w.npy`` (fill=file) and ``photo.png`` (fill=image), with a conv."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    if not (folder / "w.npy").exists():
        np.save(folder / "w.npy", rng.standard_normal((3, 3, 2, 4)).astype(np.float32))
        Image.new("RGB", (4, 3), (10, 20, 30)).save(folder / "photo.png")
    c = Canvas()
    c.add_node("Tensor", id="x", attrs={"fill": "random_normal", "shape": [1, size, size, 2],
                                        "seed": seed})
    c.add_node("Tensor", id="w", attrs={"fill": "file", "path": "w.npy"})
    c.add_node("Tensor", id="photo", attrs={"fill": "image", "path": "photo.png"})
    c.add_node("Conv2D", id="conv", attrs={"padding": "SAME"})
    c.add_node("Output", id="out", attrs={"name": "y"})
    c.add_node("Output", id="xv", attrs={"name": "x values"})
    c.add_node("Output", id="wv", attrs={"name": "w values"})
    c.connect(("x", "output"), ("xv", "input"))
    c.connect(("w", "output"), ("wv", "input"))
    c.connect(("x", "output"), ("conv", "input"))
    c.connect(("w", "output"), ("conv", "filter"))
    c.connect(("conv", "output"), ("out", "input"))
    path = folder / f"c{seed}.gbc.json"
    save_canvas(c, path)
    return path


def weights_model(folder: Path, dtype=np.float32, name: str = "w.npz") -> Path:
    """A .npz of two conv layers ``a`` and ``b`` (OIHW weights and biases)."""
    rng = np.random.default_rng(11)
    path = folder / name
    np.savez(path, **{"a.weight": rng.standard_normal((3, 2, 3, 3)).astype(dtype),
                      "a.bias": np.arange(3, dtype=dtype),
                      "b.weight": rng.standard_normal((4, 2, 1, 2)).astype(dtype),
                      "b.bias": np.ones(4, dtype)})
    return path


#: The input size a weights file does not say.
SIZE = ("--input-size", "6,5")


def input_array(folder: Path, hw=(6, 5)) -> Path:
    np.save(folder / "x.npy",
            np.random.default_rng(12).standard_normal((1, 2, *hw)).astype(np.float32))
    return folder / "x.npy"


# -- what a set on disk is -------------------------------------------------------------------

def export_reference(folder: Path, canvas: Path, script: str = "s.py") -> dict:
    """A clean ``export --to jax`` into ``folder``: the script's body (the dated first line
    aside), the companion's name and arrays."""
    folder.mkdir(exist_ok=True)
    proc = gradblocks("export", canvas, "--to", "jax", "-o", folder / script)
    assert proc.returncode == 0, proc.stderr
    return export_state(folder, script)


def export_state(folder: Path, script: str = "s.py") -> dict:
    """The set at ``folder/script``, checked whole: the script names a companion beside it
    whose arrays hash to the name."""
    text = (folder / script).read_text(encoding="utf-8")
    name = frameworks.named_companion(folder / script)
    assert name is not None and (folder / name).is_file(), (name, listing(folder))
    with np.load(folder / name, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    digest = frameworks.sources_digest(arrays)
    assert name == frameworks.companion_name(script, digest)  # the matching values
    return {"body": text.split("\n", 1)[1], "companion": name,
            "arrays": {k: (v.dtype.str, v.shape, v.tobytes()) for k, v in arrays.items()}}


def import_state(canvas: Path) -> dict:
    """The import set at ``canvas``, checked whole: ``gradblocks check`` passes on it (the same
    compile) and every array it names exists."""
    plan = compile_canvas(load_canvas(canvas), canvas.resolve().parent)
    assert plan.ok, problem_lines(plan)
    nodes = load_canvas(canvas).nodes
    arrays = {}
    for node_id in ("filter", "input", "bias"):
        if node_id in nodes and nodes[node_id].attrs.get("fill") == "file":
            arrays[node_id] = (canvas.resolve().parent / nodes[node_id].attrs["path"]).read_bytes()
    return {"text": canvas.read_text(encoding="utf-8"), "arrays": arrays,
            "files": {nodes[n].attrs["path"] for n in arrays}}


# == 1. targets that are not regular files ===================================================

def _special(kind: str, path: Path) -> None:
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    elif kind == "socket":
        s = socket.socket(socket.AF_UNIX)
        s.bind(path.name)  # relative: the cwd is its folder (a socket path is short)
        s.close()
    elif kind == "link-to-fifo":
        os.mkfifo(path.parent / "real-fifo")
        path.symlink_to("real-fifo")


KIND_WORDS = {"fifo": "is a FIFO, not a regular file: refusing to replace it",
              "socket": "is a socket, not a regular file: refusing to replace it",
              "link-to-fifo": "is a FIFO, not a regular file: refusing to replace it",
              "folder": "is a folder"}
COMMANDS = {
    "run": ("t.npz", lambda c, t, m: ["run", c, "--out", t]),
    "export": ("t.py", lambda c, t, m: ["export", c, "-o", t]),
    "export-jax": ("t.py", lambda c, t, m: ["export", c, "--to", "jax", "-o", t]),
    "import": ("t.gbc.json", lambda c, t, m: ["import", m, "--layer", "a", "-o", t, *SIZE]),
    "geometry": ("t.png", lambda c, t, m: ["geometry", c, "conv", "-o", t]),
}


@pytest.mark.parametrize("kind", list(KIND_WORDS))
@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_target_that_is_not_a_regular_file_is_refused_and_kept(tmp_path, monkeypatch, capsys,
                                                                 watchdog, kind, command):
    monkeypatch.chdir(tmp_path)
    canvas, model = reading_canvas(tmp_path), weights_model(tmp_path)
    name, argv = COMMANDS[command]
    target = tmp_path / name
    _special(kind, target)
    before = listing(tmp_path)
    mode = os.lstat(target).st_mode
    code, err, out = in_process(capsys, *argv(canvas, target, model))
    assert code == 2 and out == ""
    one_line(err, KIND_WORDS[kind])
    assert os.lstat(target).st_mode == mode  # still the FIFO / socket / folder / link
    assert listing(tmp_path) == before


def test_a_device_is_refused_by_the_check_and_by_the_writer_without_writing(tmp_path):
    """/dev/null only through the check functions: as root a write would replace it."""
    words = "is a character device, not a regular file: refusing to replace it"
    assert targets.target_problem("/dev/null") == words
    (tmp_path / "null.npz").symlink_to("/dev/null")
    assert targets.target_problem(str(tmp_path / "null.npz")) == words
    assert atomic.not_regular("/dev/null") == "a character device"
    assert atomic.not_regular(tmp_path / "null.npz") == "a character device"
    assert atomic.not_regular(tmp_path) == "a folder"
    assert atomic.not_regular(tmp_path / "missing") is None


@pytest.mark.parametrize("writer", ["single", "set"])
def test_the_writers_themselves_never_replace_a_fifo(tmp_path, watchdog, writer):
    """Defence in depth: write_atomically / write_file_set refuse what target_problem refuses."""
    fifo = tmp_path / "f.bin"
    os.mkfifo(fifo)
    with pytest.raises(OSError, match="is a FIFO, not a regular file"):
        if writer == "single":
            atomic.write_bytes_atomically(fifo, b"x")
        else:
            atomic.write_file_set(fifo, lambda f: f.write(b"x"),
                                  [atomic.Member("m.bin", lambda f: f.write(b"m"))])
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and listing(tmp_path) == {"f.bin"}
    os.mkfifo(tmp_path / "m.bin")  # a member's name
    with pytest.raises(OSError, match="is a FIFO"):
        atomic.write_file_set(tmp_path / "main", lambda f: f.write(b"x"),
                              [atomic.Member("m.bin", lambda f: f.write(b"m"))])
    assert listing(tmp_path) == {"f.bin", "m.bin"}


def test_a_fifo_at_the_companions_name_is_refused(tmp_path, capsys, watchdog):
    canvas = reading_canvas(tmp_path)
    ref = export_reference(tmp_path / "scratch", canvas)
    out = tmp_path / "out"
    out.mkdir()
    os.mkfifo(out / ref["companion"])
    code, err, _ = in_process(capsys, "export", canvas, "--to", "jax", "-o", out / "s.py")
    assert code == 2
    one_line(err, ref["companion"], "is a FIFO")
    assert listing(out) == {ref["companion"]}


def test_a_fifo_at_an_array_name_is_refused(tmp_path, capsys, watchdog):
    model = weights_model(tmp_path)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    assert in_process(capsys, "import", model, "--layer", "a", "-o", scratch / "x.gbc.json",
                      *SIZE)[0] == 0
    name = import_state(scratch / "x.gbc.json")["files"]
    filt = next(n for n in name if ".filter." in n)
    out = tmp_path / "out"
    out.mkdir()
    os.mkfifo(out / filt)
    code, err, _ = in_process(capsys, "import", model, "--layer", "a", "-o", out / "x.gbc.json",
                              *SIZE)
    assert code == 2
    one_line(err, filt, "is a FIFO")
    assert listing(out) == {filt}


@pytest.mark.parametrize("command", ["export-jax", "import"])
def test_a_member_name_too_long_for_the_system_is_refused_before_writing(tmp_path, capsys,
                                                                         command):
    """The main file's name fits (NAME_MAX 255) but its companion's (22 or 25 bytes longer)
    does not: one line naming the companion, exit 2, nothing written."""
    canvas, model = reading_canvas(tmp_path), weights_model(tmp_path)
    before = listing(tmp_path)
    if command == "import":
        argv = ["import", model, "--layer", "a", "-o", tmp_path / ("s" * 240 + ".gbc.json"),
                *SIZE]
    else:
        argv = ["export", canvas, "--to", "jax", "-o", tmp_path / ("s" * 240 + ".py")]
    code, err, out = in_process(capsys, *argv)
    assert code == 2 and out == ""
    one_line(err, "longer than this system allows", "s" * 20)
    assert listing(tmp_path) == before


# == 2. never a file the canvas reads, the model or the --input file ==========================

@pytest.mark.parametrize("how", ["relative", "absolute", "dotdot", "symlink", "hardlink"])
@pytest.mark.parametrize("command, read", [
    ("run", "w.npy"), ("run", "photo.png"), ("export", "w.npy"), ("export-jax", "w.npy"),
    ("export-jax", "photo.png"), ("geometry", "photo.png")])
def test_a_file_the_canvas_reads_is_never_overwritten(tmp_path, monkeypatch, capsys, how,
                                                      command, read):
    monkeypatch.chdir(tmp_path)
    canvas = reading_canvas(tmp_path)
    (tmp_path / "sub").mkdir()
    suffix = Path(read).suffix
    target = {"relative": read, "absolute": str(tmp_path / read),
              "dotdot": f"sub/../{read}"}.get(how)
    if how == "symlink":
        (tmp_path / f"link{suffix}").symlink_to(read)
        target = f"link{suffix}"
    elif how == "hardlink":
        os.link(tmp_path / read, tmp_path / f"hard{suffix}")
        target = f"hard{suffix}"
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    argv = {"run": ["run", canvas, "--out", target], "export": ["export", canvas, "-o", target],
            "export-jax": ["export", canvas, "--to", "jax", "-o", target],
            "geometry": ["geometry", canvas, "conv", "-o", target]}[command]
    code, err, out = in_process(capsys, *argv)
    assert code == 2 and out == ""
    node = "w" if read == "w.npy" else "photo"
    one_line(err, f"is a file the canvas reads (block {node!r}): refusing to overwrite it")
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()} == before


def test_a_read_file_named_by_an_odd_spelling_in_the_canvas_is_still_protected(tmp_path,
                                                                                 capsys):
    canvas = reading_canvas(tmp_path)
    (tmp_path / "sub").mkdir()
    c = load_canvas(canvas)
    c.set_attr("w", "path", "./sub/../w.npy")
    save_canvas(c, canvas)
    before = (tmp_path / "w.npy").read_bytes()
    code, err, _ = in_process(capsys, "run", canvas, "--out", tmp_path / "w.npy")
    assert code == 2
    one_line(err, "a file the canvas reads")
    assert (tmp_path / "w.npy").read_bytes() == before


def test_the_block_reading_the_file_is_named_by_its_title(tmp_path, capsys):
    canvas = reading_canvas(tmp_path)
    c = load_canvas(canvas)
    c.set_title("w", "poids \u00fc 'x'")
    save_canvas(c, canvas)
    code, err, _ = in_process(capsys, "export", canvas, "-o", tmp_path / "w.npy")
    assert code == 2
    one_line(err, "is a file the canvas reads (block \"poids \u00fc 'x'\"): refusing")


def test_import_never_overwrites_its_input_file(tmp_path, capsys):
    model, x = weights_model(tmp_path), input_array(tmp_path)
    before = x.read_bytes()
    code, err, _ = in_process(capsys, "import", model, "--layer", "a", "-o", x, "--input", x)
    assert code == 2
    one_line(err, "is the --input file: refusing to overwrite it")
    code, err, _ = in_process(capsys, "import", model, "--layer", "a", "-o", model, *SIZE)
    assert code == 2
    one_line(err, "is the model being read: refusing to overwrite it")
    assert x.read_bytes() == before


def test_a_reimport_never_removes_its_input_file_even_when_the_old_canvas_owned_it(tmp_path,
                                                                                    capsys):
    """The old canvas's input array, given as --input to an import whose dtype differs, is
    stale for the new set: it is kept all the same."""
    model32, model64 = weights_model(tmp_path), weights_model(tmp_path, np.float64, "w64.npz")
    x, canvas = input_array(tmp_path), tmp_path / "c.gbc.json"
    assert in_process(capsys, "import", model32, "--layer", "a", "-o", canvas, "--input", x)[0] == 0
    old = import_state(canvas)
    own_input = tmp_path / load_canvas(canvas).nodes["input"].attrs["path"]
    code, err, _ = in_process(capsys, "import", model64, "--layer", "a", "-o", canvas,
                              "--input", own_input)
    assert code == 0, err
    new = import_state(canvas)
    assert own_input.read_bytes() == old["arrays"]["input"]  # kept, though no longer named
    gone = {n for n in old["files"] if n != own_input.name}
    assert not gone & listing(tmp_path) and new["files"] <= listing(tmp_path)


def test_a_reimport_removes_only_the_arrays_an_import_wrote(tmp_path, capsys):
    """An edited canvas names a user's file, a file in another folder and an array of the old
    naming: only the last (its own, by name) is removed; unrelated files stay."""
    model = weights_model(tmp_path)
    canvas = tmp_path / "x.gbc.json"
    (tmp_path / "mine").mkdir()
    np.save(tmp_path / "mine" / "important.npy", np.ones((3, 3, 2, 3), np.float32))
    np.save(tmp_path / "x.input.npy", np.ones((1, 2, 6, 5), np.float32))  # old-style name
    np.save(tmp_path / "x.bias.npy", np.ones(3, np.float32))  # not named by the canvas
    (tmp_path / "x.filter.0123456789ab.npy").write_bytes(b"not named by the canvas")
    c = Canvas()
    c.add_node("Tensor", id="filter", attrs={"fill": "file", "path": "mine/important.npy"})
    c.add_node("Tensor", id="input", attrs={"fill": "file", "path": "x.input.npy"})
    c.add_node("Tensor", id="bias", attrs={"fill": "file", "path": "../x.bias.0123456789ab.npy"})
    save_canvas(c, canvas)
    (tmp_path.parent / "x.bias.0123456789ab.npy").write_bytes(b"outside")
    try:
        code, err, _ = in_process(capsys, "import", model, "--layer", "a", "-o", canvas, *SIZE)
        assert code == 0, err
        names = listing(tmp_path)
        assert "x.input.npy" not in names  # its own, by the old naming
        assert {"mine", "x.bias.npy", "x.filter.0123456789ab.npy"} <= names
        assert (tmp_path.parent / "x.bias.0123456789ab.npy").read_bytes() == b"outside"
        assert (tmp_path / "mine" / "important.npy").is_file()
        import_state(canvas)
    finally:
        (tmp_path.parent / "x.bias.0123456789ab.npy").unlink()


# == 3. symlinks: every member beside the real target =========================================

def _fake_jax(monkeypatch) -> None:
    """A NumPy stand-in for jax (as tests/test_export_safety.py): the script runs here."""
    from tests.test_crosscheck import FAKE_PRELUDE

    fake = types.ModuleType("fakefw")
    fake.NAME, fake.MODULE, fake.PRELUDE = "jax", "numpy", FAKE_PRELUDE
    fake.known_defect = lambda *a: None
    monkeypatch.setitem(frameworks.TARGETS, "jax", fake)


def test_export_through_a_symlink_puts_the_companion_beside_the_real_script(tmp_path,
                                                                           monkeypatch,
                                                                           capsys):
    _fake_jax(monkeypatch)
    canvas = reading_canvas(tmp_path)
    real = tmp_path / "real"
    real.mkdir()
    (real / "s.py").write_text("old\n")
    links = tmp_path / "links"
    links.mkdir()
    (links / "link.py").symlink_to(real / "s.py")
    code, err, out = in_process(capsys, "export", canvas, "--to", "jax", "-o",
                                links / "link.py")
    assert code == 0, err
    assert (links / "link.py").is_symlink() and listing(links) == {"link.py"}
    companion = frameworks.sources_path(links / "link.py")
    assert companion.parent == real and companion.name.startswith("s.sources.")
    assert str(companion) in out
    state = export_state(real)
    assert listing(real) == {"s.py", state["companion"]}
    # the script runs through the link and loads the values beside its real file
    proc = subprocess.run([sys.executable, str(links / "link.py"), str(tmp_path / "o.npz")],
                          capture_output=True, text=True, cwd=tmp_path, check=False)
    assert proc.returncode == 0, proc.stderr
    ours = tmp_path / "ours.npz"
    assert in_process(capsys, "run", canvas, "--out", ours)[0] == 0
    with np.load(tmp_path / "o.npz") as got, np.load(ours) as want:
        for key in ("x values", "w values"):  # the sources, bit for bit (the conv is a stub)
            assert got[key].tobytes() == want[key].tobytes()


def test_export_through_a_dangling_symlink_creates_the_set_at_its_target(tmp_path, capsys):
    canvas = reading_canvas(tmp_path)
    (tmp_path / "real").mkdir()
    (tmp_path / "link.py").symlink_to("real/new.py")
    assert in_process(capsys, "export", canvas, "--to", "jax", "-o", tmp_path / "link.py")[0] == 0
    state = export_state(tmp_path / "real", "new.py")
    assert listing(tmp_path / "real") == {"new.py", state["companion"]}


def test_import_through_a_symlink_writes_a_canvas_that_finds_its_arrays(tmp_path, capsys):
    model = weights_model(tmp_path)
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link.gbc.json"
    link.symlink_to(real / "x.gbc.json")
    code, err, out = in_process(capsys, "import", model, "--layer", "a", "-o", link, *SIZE)
    assert code == 0, err
    assert link.is_symlink()
    state = import_state(link)  # `check` through the link: its arrays are found
    assert listing(real) == {"x.gbc.json", *state["files"]}
    assert all(str(real / n) in out for n in state["files"])
    proc = gradblocks("check", link)
    assert proc.returncode == 0, proc.stderr


# == 4. import writes only a canvas check accepts =============================================

def test_import_refuses_a_canvas_that_check_would_refuse_and_keeps_the_old_set(tmp_path,
                                                                              capsys):
    model = weights_model(tmp_path)
    canvas = tmp_path / "x.gbc.json"
    assert in_process(capsys, "import", model, "--layer", "a", "-o", canvas, *SIZE)[0] == 0
    old, before = import_state(canvas), listing(tmp_path)
    code, err, out = in_process(capsys, "import", model, "--layer", "b", "-o", canvas,
                                "--input-size", "40000,40000")  # a 12 GiB input
    assert code == 2 and out == ""
    one_line(err, "gradblocks check", "more than the memory limit 2.00 GiB")
    assert import_state(canvas) == old and listing(tmp_path) == before
    proc = gradblocks("check", canvas)
    assert proc.returncode == 0


def test_the_final_check_runs_on_the_written_arrays_before_anything_is_visible(
        tmp_path, monkeypatch, capsys):
    """The set's own check (layer_canvas.check_imported: the canvas as written, compiled with
    its arrays from their temporary files) with a smaller limit in force than the early one:
    it refuses, and the old set and the folder are as they were."""
    from engine.graph import layer_canvas

    model, x = weights_model(tmp_path), input_array(tmp_path)
    canvas = tmp_path / "x.gbc.json"
    assert in_process(capsys, "import", model, "--layer", "a", "-o", canvas, *SIZE)[0] == 0
    old, before = import_state(canvas), listing(tmp_path)
    seen = []
    real_check = layer_canvas.check_imported

    def spy(c, arrays, base, shown):
        seen.append({k: (p.name, p.read_bytes()) for k, p in arrays.items()})
        assert listing(tmp_path) == before | {p.name for p in arrays.values()} | temps(tmp_path)
        return real_check(c, arrays, base, shown)

    monkeypatch.setattr(layer_canvas, "check_imported", spy)
    monkeypatch.setattr(layer_canvas, "DEFAULT_MEMORY_LIMIT", 1000)  # bytes
    code, err, _ = in_process(capsys, "import", model, "--layer", "b", "-o", canvas,
                              "--input", x)
    assert code == 2
    one_line(err, "x.gbc.json", "would not pass `gradblocks check`", "memory limit")
    assert [sorted(s) for s in seen] == [["bias", "filter", "input"]]
    assert seen[0]["input"][1] == (tmp_path / "x.npy").read_bytes()  # the array being written
    assert all(name.endswith(".tmp") for name, _ in seen[0].values())
    assert import_state(canvas) == old and listing(tmp_path) == before


# == 5. reproducible names; only the old set's own companions removed =========================

def test_the_same_canvas_exports_the_same_set_and_a_new_one_replaces_it(tmp_path):
    a, b = reading_canvas(tmp_path, 0), reading_canvas(tmp_path, 1)
    out = tmp_path / "out"
    first = export_reference(out, a)
    assert export_reference(out, a) == first  # the same script and companion name
    assert listing(out) == {"s.py", first["companion"]}
    second = export_reference(out, b)
    assert second["companion"] != first["companion"]
    assert listing(out) == {"s.py", second["companion"]}  # the old companion removed


@pytest.mark.parametrize("line, removed", [
    ("SOURCES_FILE = 's.sources.0123456789ab.npz'", True),  # its own: named and of its form
    ("SOURCES_FILE = 't.sources.0123456789ab.npz'", False),  # another script's (a copy)
    ("SOURCES_FILE = 'important.npz'", False),
    ("SOURCES_FILE = '../s.sources.0123456789ab.npz'", False),
    ("SOURCES_FILE = '/tmp/s.sources.0123456789ab.npz'", False),
    ("SOURCES_FILE = __import__('os')._exit(9)", False),  # never evaluated
    ("SOURCES_FILE = 's.sources.0123456789AB.npz'", False),
    ("SOURCES_FILE = " + "'" + "a" * 100_000 + "'", False),
    ("path = os.path.splitext(os.path.abspath(__file__))[0] + \".sources.npz\"", True),  # legacy
])
def test_an_old_script_gets_only_its_own_companion_removed(tmp_path, capsys, line, removed):
    canvas = reading_canvas(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    victims = ["s.sources.0123456789ab.npz", "t.sources.0123456789ab.npz", "important.npz",
               "s.sources.0123456789AB.npz", "s.sources.npz"]
    for v in victims:
        (out / v).write_bytes(b"a user's file")
    (tmp_path / "s.sources.0123456789ab.npz").write_bytes(b"outside")
    (out / "s.py").write_text(f'"""old"""\nimport os\n{line}\n')
    code, err, _ = in_process(capsys, "export", canvas, "--to", "jax", "-o", out / "s.py")
    assert code == 0, err
    state = export_state(out)
    gone = set(victims) - listing(out)
    legacy = "splitext" in line
    expect = {("s.sources.npz" if legacy else "s.sources.0123456789ab.npz")} if removed else set()
    assert gone == expect
    assert listing(out) == {"s.py", state["companion"], *(set(victims) - gone)}
    assert (tmp_path / "s.sources.0123456789ab.npz").read_bytes() == b"outside"


# == 6. faults: the real CLI stopped at each step and signalled ===============================

def _state_letter(path: Path) -> str:
    """The process state of /proc/<pid>/stat ('T' when stopped)."""
    text = path.read_text()
    return text[text.rindex(")") + 2]


def stopped_at(args, step: int, sig: str) -> tuple[subprocess.CompletedProcess, bool]:
    """Run ``gradblocks ARGS`` stopped after step ``step`` of its set write, send ``sig``
    there (and SIGCONT); (the finished process, whether it stopped at all)."""
    env = {**os.environ, "PYTHONPATH": str(REPO), atomic.STOP_AFTER_STEP_ENV: str(step)}
    proc = subprocess.Popen([sys.executable, "-m", "engine.cli", *map(str, args)], cwd=REPO,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stat_file = Path(f"/proc/{proc.pid}/stat")
    stopped = False
    try:
        deadline = time.monotonic() + WATCHDOG_SECONDS  # a guard, not a measurement
        while proc.poll() is None and time.monotonic() < deadline:
            if _state_letter(stat_file) == "T":
                stopped = True
                break
            time.sleep(0.005)
        if stopped:
            proc.send_signal(SIGNALS[sig][0])
            if sig != "SIGKILL":
                proc.send_signal(signal.SIGCONT)
        out, err = proc.communicate(timeout=WATCHDOG_SECONDS)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return subprocess.CompletedProcess(args, proc.returncode, out, err), stopped


def check_after_fault(proc, stopped: bool, sig: str) -> None:
    """The process stopped at its step and ended by the signal: 130 or 143 after one line."""
    assert stopped
    assert proc.returncode == SIGNALS[sig][1], proc.stderr
    if sig != "SIGKILL":  # one line, never a traceback
        lines = proc.stderr.splitlines()
        assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
        assert lines[0].startswith("gradblocks: ")


@pytest.mark.parametrize("sig", list(SIGNALS))
def test_export_killed_at_every_step_leaves_the_old_set_or_the_new(tmp_path, sig):
    a, b = reading_canvas(tmp_path, 0), reading_canvas(tmp_path, 1, size=6)
    ref_a, ref_b = export_reference(tmp_path / "ref_a", a), export_reference(tmp_path / "ref_b", b)
    # steps: the companion's temporary, the script's, the companion renamed, the script
    # renamed (the commit), the old companion removed
    members, stale = 1, 1
    steps = 2 * members + 2 + stale
    for step in range(1, steps + 2):
        out = tmp_path / f"out{step}"
        shutil.copytree(tmp_path / "ref_a", out)  # the old set
        proc, stopped = stopped_at(["export", b, "--to", "jax", "-o", out / "s.py"], step, sig)
        if step > steps:  # the hook counts exactly these steps: the run finishes untouched
            assert not stopped and proc.returncode == 0
            assert export_state(out) == ref_b
            continue
        check_after_fault(proc, stopped, sig)
        state = export_state(out)
        new = step >= 2 * members + 2
        assert state == (ref_b if new else ref_a), (step, sig)
        others = listing(out) - {"s.py", state["companion"]}
        if sig == "SIGKILL":  # only temporaries and companions no script names may remain
            assert others <= temps(out) | {ref_a["companion"], ref_b["companion"]}
        elif step == 2 * members + 2:  # interrupted after the commit, before the removal
            assert others == {ref_a["companion"]}
        else:
            assert others == set(), (step, sig, others)


@pytest.mark.parametrize("sig", list(SIGNALS))
def test_import_killed_at_every_step_leaves_layer_a_or_layer_b_whole(tmp_path, sig):
    model, x = weights_model(tmp_path), input_array(tmp_path)

    def do_import(folder: Path, layer: str):
        folder.mkdir(exist_ok=True)
        proc = gradblocks("import", model, "--layer", layer, "-o", folder / "x.gbc.json",
                          "--input", x)
        assert proc.returncode == 0, proc.stderr
        return import_state(folder / "x.gbc.json")

    ref_a, ref_b = do_import(tmp_path / "ref_a", "a"), do_import(tmp_path / "ref_b", "b")
    assert ref_a["text"] != ref_b["text"]
    members = len(ref_b["files"])  # filter, input, bias
    stale = len(ref_a["files"] - ref_b["files"])  # the input array is the same file
    assert (members, stale) == (3, 2)
    steps = 2 * members + 2 + stale
    for step in range(1, steps + 2):
        out = tmp_path / f"out{step}"
        shutil.copytree(tmp_path / "ref_a", out)  # the old set
        proc, stopped = stopped_at(["import", model, "--layer", "b", "-o", out / "x.gbc.json",
                                    "--input", x], step, sig)
        if step > steps:
            assert not stopped and proc.returncode == 0
            assert import_state(out / "x.gbc.json") == ref_b
            continue
        check_after_fault(proc, stopped, sig)
        state = import_state(out / "x.gbc.json")  # check passes, arrays present
        new = step >= 2 * members + 2
        assert state == (ref_b if new else ref_a), (step, sig)
        others = listing(out) - {"x.gbc.json", *state["files"]}
        if sig == "SIGKILL":
            assert others <= temps(out) | ref_a["files"] | ref_b["files"]
        elif new:  # removals stop where the signal came: the rest of the old arrays remain
            removed = step - (2 * members + 2)
            assert others == set(sorted(ref_a["files"] - ref_b["files"])[removed:])
        else:
            assert others == set(), (step, sig, others)


# == 7. full disks ============================================================================

@pytest.fixture
def small_disk(tmp_path):
    """A 200 KiB tmpfs (as root; skipped where mounting is not permitted)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=200k", "tmpfs", str(disk)],
                          capture_output=True, check=False)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.decode(errors='replace').strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def fill(disk: Path, leave_pages: int = 0) -> Path:
    """Fill ``disk`` to the last byte, then free ``leave_pages`` 4 KiB pages."""
    filler = disk / "filler"
    with open(filler, "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 4096)
        except OSError as err:
            assert err.errno == errno.ENOSPC
    size = filler.stat().st_size
    os.truncate(filler, max(0, size - leave_pages * 4096))
    return filler


@pytest.mark.parametrize("room", ["none", "companion", "all but a page"])
def test_export_on_a_full_tmpfs_keeps_the_old_set_then_succeeds(tmp_path, small_disk, room):
    """No room, room for the companion only, room for all but the script's last page."""
    a, b = reading_canvas(tmp_path, 0), reading_canvas(tmp_path, 1, size=64)  # 32 KiB of values
    ref_b = export_reference(tmp_path / "ref_b", b)
    pages = {n: -(-(tmp_path / "ref_b" / n).stat().st_size // 4096)
             for n in ("s.py", ref_b["companion"])}
    leave = {"none": 0, "companion": pages[ref_b["companion"]],
             "all but a page": sum(pages.values()) - 1}[room]
    ref_a = export_reference(small_disk, a)
    filler = fill(small_disk, leave)
    proc = gradblocks("export", b, "--to", "jax", "-o", small_disk / "s.py")
    assert proc.returncode == 1
    one_line(proc.stderr.splitlines(), "No space left on device", "unchanged")
    assert export_state(small_disk) == ref_a
    assert listing(small_disk) == {"s.py", ref_a["companion"], "filler"}
    filler.unlink()
    proc = gradblocks("export", b, "--to", "jax", "-o", small_disk / "s.py")
    assert proc.returncode == 0, proc.stderr
    assert export_state(small_disk) == ref_b
    assert listing(small_disk) == {"s.py", ref_b["companion"]}


def test_import_and_run_on_a_full_tmpfs_keep_the_old_files(tmp_path, small_disk):
    model, x = weights_model(tmp_path), input_array(tmp_path, (60, 60))  # 28 KiB input
    canvas = small_disk / "x.gbc.json"
    proc = gradblocks("import", model, "--layer", "a", "-o", canvas, *SIZE)
    assert proc.returncode == 0, proc.stderr
    old = import_state(canvas)
    fill(small_disk)
    proc = gradblocks("import", model, "--layer", "b", "-o", canvas, "--input", x)
    assert proc.returncode == 1
    one_line(proc.stderr.splitlines(), "No space left on device", "unchanged")
    assert import_state(canvas) == old
    assert listing(small_disk) == {"x.gbc.json", "filler", *old["files"]}
    # run --out, a single file, on the same full disk
    results = small_disk / "r.npz"
    proc = gradblocks("run", reading_canvas(tmp_path), "--out", results)
    assert proc.returncode == 1 and not results.exists()
    assert "No space left on device" in proc.stderr and "Traceback" not in proc.stderr


class _Disk:
    """A simulated disk with ``free`` bytes: writes through ``os.fdopen`` (how the writers open
    their temporary files) fail with ENOSPC past it, after writing what fits."""

    def __init__(self, free: int):
        self.free = free
        self.real_fdopen = os.fdopen

    def fdopen(self, fd, mode="r", *args, **kwargs):
        f = self.real_fdopen(fd, mode, *args, **kwargs)
        return _LimitedFile(f, self) if "w" in mode else f


class _LimitedFile:
    def __init__(self, f, disk: _Disk):
        self._f, self._disk = f, disk

    def write(self, data) -> int:
        n = memoryview(data).nbytes
        if n > self._disk.free:
            self._f.write(memoryview(data)[: self._disk.free])
            self._disk.free = 0
            raise OSError(errno.ENOSPC, "No space left on device")
        self._disk.free -= n
        return self._f.write(data)

    def __getattr__(self, name):
        return getattr(self._f, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._f.close()


def _sizes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.iterdir())


@pytest.mark.parametrize("command", ["export", "import"])
def test_a_full_disk_at_every_byte_region_keeps_the_old_set(tmp_path, monkeypatch, capsys,
                                                            command):
    """ENOSPC simulated in-process at 40 points across the new set's bytes (inside each
    member, at their boundaries, inside the main file), then the fsync and each rename."""
    if command == "export":
        a, b = reading_canvas(tmp_path, 0), reading_canvas(tmp_path, 1, size=9)
        ref_new = export_reference(tmp_path / "ref", b)
        need = _sizes(tmp_path / "ref")
        argv = ["export", b, "--to", "jax", "-o"]
        main, state_of = "s.py", export_state

        def make_old(out):
            out.mkdir()
            assert in_process(capsys, "export", a, "--to", "jax", "-o", out / "s.py")[0] == 0
    else:
        model, x = weights_model(tmp_path), input_array(tmp_path)
        ref = tmp_path / "ref"
        ref.mkdir()
        assert in_process(capsys, "import", model, "--layer", "b", "-o", ref / "x.gbc.json",
                          "--input", x)[0] == 0
        ref_new, need = import_state(ref / "x.gbc.json"), _sizes(ref)
        argv = ["import", model, "--layer", "b", "--input", x, "-o"]
        main = "x.gbc.json"

        def state_of(out):
            return import_state(out / "x.gbc.json")

        def make_old(out):
            out.mkdir()
            assert in_process(capsys, "import", model, "--layer", "a", "-o",
                              out / "x.gbc.json", *SIZE)[0] == 0

    faults = [("bytes", free) for free in sorted({*range(0, need, max(1, need // 30)), need - 1})]
    faults += [("fsync", k) for k in (1, 2, 3, 4)] + [("replace", k) for k in (1, 2, 3, 4)]
    for i, (kind, k) in enumerate(faults):
        out = tmp_path / f"out{i}"
        make_old(out)
        old, before = state_of(out), listing(out)
        with monkeypatch.context() as m:
            if kind == "bytes":
                m.setattr(atomic.os, "fdopen", _Disk(k).fdopen)
            else:
                real, calls = getattr(os, kind), []

                def failing(*args, real=real, calls=calls, k=k, kind=kind):
                    calls.append(args)
                    if len(calls) == k:
                        raise OSError(errno.ENOSPC if kind == "fsync" else errno.EIO,
                                      "simulated failure")
                    return real(*args)
                m.setattr(atomic.os, kind, failing)
            code, err, _ = in_process(capsys, *argv, out / main)
        if code == 0:  # the fault came after the commit (a later fsync or rename) or never
            assert kind != "bytes" or k >= need  # fewer free bytes than the set cannot work
            assert state_of(out) == ref_new, (kind, k)
            continue
        assert code == 1, (kind, k, err)
        one_line(err, "cannot write", "unchanged")
        assert state_of(out) == old and listing(out) == before, (kind, k)


# == 8. property: random sets, interrupted at random points ===================================

def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:12]


def _main_bytes(contents: list[bytes], tag: int) -> bytes:
    return json.dumps({"tag": tag, "members": [f"m.{_sha(c)}.bin" for c in contents]}).encode()


def _owned(main: Path) -> list[str]:
    return json.loads(main.read_bytes())["members"]


class _Fault(BaseException):
    """What the property test raises at its fault point (a KeyboardInterrupt or an OSError
    is raised in its place; see below)."""


def _check_whole(files: dict[str, bytes], sets: dict[str, list[bytes]]) -> str:
    """``files`` (name -> bytes) hold one whole set: which one."""
    doc = json.loads(files["main"])
    label = f"t{doc['tag']}"
    assert label in sets
    for name, content in zip(doc["members"], sets[label], strict=True):
        assert files.get(name) == content, (label, name)
    return label


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(old=st.one_of(st.none(), st.lists(st.sampled_from([b"", b"a", b"bb" * 50, b"c" * 999]),
                                         max_size=3, unique=True)),
       new=st.lists(st.sampled_from([b"", b"a", b"d", b"bb" * 50, b"e" * 3000]), max_size=4,
                    unique=True),
       fault_at=st.integers(0, 30), when=st.sampled_from(["before", "after"]),
       exc=st.sampled_from(["interrupt", "disk-full"]), keep_old=st.booleans())
def test_property_random_sets_interrupted_anywhere_stay_whole(tmp_path_factory, old, new,
                                                               fault_at, when, exc, keep_old):
    """A fault at the n-th file operation (each byte write, fsync, rename, removal), before or
    after it: what a kill leaves at that moment (a snapshot) and what the unwinding leaves
    (KeyboardInterrupt or ENOSPC) are each the whole old set or the whole new one; the
    unwinding leaves no temporary file, and the kept files are never removed."""
    folder = tmp_path_factory.mktemp("set")
    main = folder / "main"
    sets = {"t1": new}
    if old is not None:
        sets["t0"] = old
        atomic.write_file_set(main, lambda f: f.write(_main_bytes(old, 0)),
                              [atomic.Member(f"m.{_sha(c)}.bin", lambda f, c=c: f.write(c))
                               for c in old], _owned)
    keep = [folder / f"m.{_sha(c)}.bin" for c in (old or [])] if keep_old else []
    snapshots: list[dict[str, bytes]] = []
    counter = [fault_at]

    def snapshot() -> dict[str, bytes]:
        return {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}

    def point(op):
        """Run ``op`` with the fault where the counter says."""
        counter[0] -= 1
        if counter[0] != 0:
            return op()
        if when == "after":
            op()
        snapshots.append(snapshot())
        raise KeyboardInterrupt if exc == "interrupt" else OSError(errno.ENOSPC, "full")

    def write_member(content: bytes):
        def write(f):
            for i in range(0, len(content), 700):
                point(lambda i=i: f.write(content[i:i + 700]))
        return write

    real = {name: getattr(os, name) for name in ("fsync", "replace", "unlink")}
    patched = {name: (lambda *a, fn=fn: point(lambda: fn(*a))) for name, fn in real.items()}
    members = [atomic.Member(f"m.{_sha(c)}.bin", write_member(c)) for c in new]
    try:
        for name, fn in patched.items():
            setattr(atomic.os, name, fn)
        try:
            atomic.write_file_set(main, write_member(_main_bytes(new, 1)), members, _owned,
                                  keep=keep)
        finally:
            for name, fn in real.items():
                setattr(atomic.os, name, fn)
    except (KeyboardInterrupt, OSError):
        pass
    after = snapshot()
    if old is None and "main" not in after:  # nothing was there, and nothing is
        assert after == {}
    else:
        label = _check_whole(after, sets)
        if label == "t0":  # unwound before the commit: exactly the old set, no temporaries
            assert set(after) == {"main", *(f"m.{_sha(c)}.bin" for c in old)}
    for snap in snapshots:  # what SIGKILL at that moment leaves
        if "main" in snap:
            _check_whole(snap, sets)
        else:
            assert old is None
    for path in keep:
        assert path.is_file()
    assert not any(n.endswith(".tmp") for n in after)
    shutil.rmtree(folder)


def test_members_get_the_main_files_permission_bits(tmp_path, capsys):
    """A private script (0o600) does not get a world-readable companion."""
    canvas = reading_canvas(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    (out / "s.py").write_text("old\n")
    (out / "s.py").chmod(0o600)
    assert in_process(capsys, "export", canvas, "--to", "jax", "-o", out / "s.py")[0] == 0
    state = export_state(out)
    for name in ("s.py", state["companion"]):
        assert stat.S_IMODE((out / name).stat().st_mode) == 0o600, name
