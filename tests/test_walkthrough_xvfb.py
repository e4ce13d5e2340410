"""A new user's walkthrough under a real X server, driven only by X events (issue 24, point 6).

Xvfb on a free display, the app as ``python -m app`` (``gradblocks`` with no subcommand) with
QT_QPA_PLATFORM=xcb and a temporary HOME, driven by ``xdotool`` key, type, mouse-move and click
events only: from an empty canvas, Tab search adds a Conv2DBackpropFilter; wires dragged from its
three input ports onto empty canvas add, through the wire-drop search, Tensor x [1, 5, 5, 2],
an IntVector filter_sizes [3, 3, 2, 4] and Tensor dy [1, 5, 5, 4] (seed 1), each renamed and
edited in the attribute panel (a field clicked, then typed into; Tab to the next ones); F5 runs it;
Ctrl+S saves it through the file dialog, ``gradblocks run saved.gbc.json --out r.npz`` runs it
headless and its filter gradient is compared with the float64 definition computed here; Ctrl+N
then Ctrl+O reopens the file; the window is made small and large again (the panels keep and get
back their widths). Positions come from screenshots, as a user's eyes would find
them: the canvas is the area in NodeGraphQt's background colour, ports are blobs of its port
border colour (the three stacked ones are the conv block's inputs), the attribute panel's title
field is its first field in the theme's base colour. The app exposes nothing special.

Skipped unless ``Xvfb``, ``xdotool`` and ``import`` (ImageMagick) are on PATH. The
screenshots go to a temporary folder and are copied to /tmp/walkthrough/; the time from app
start to the first correct gradient is printed (no timing assertion).
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("NodeGraphQt")
Image = pytest.importorskip("PIL.Image")

from NodeGraphQt.constants import PortEnum, ViewerEnum

from app.panel_widths import MIN_WIDTHS
from app.theme import COLORS
from engine.base.dtypes import RTOL

REPO = Path(__file__).resolve().parent.parent
SHOTS_COPY = Path("/tmp/walkthrough")
SCREEN = (1600, 1000)
TIMEOUT = 30.0  # seconds for any one expected state (the app's start included)
CANVAS_BG = tuple(ViewerEnum.BACKGROUND_COLOR.value)
PORT_RING = tuple(PortEnum.BORDER_COLOR.value[:3])
FIELD_BG = COLORS["base"]
PORT_RING_TOLERANCE = 12  # per RGB channel (a teal preview cell is 40 away)
MIN_PORT_PIXELS = 8  # a port's ring: ~24 pixels wired, ~47 free
PORT_STEP_MAX = 40  # pixels between a block's stacked input ports (about 22)
MIN_FIELD_HEIGHT = 12  # pixels of a text field's background (about 20)
MIN_PALETTE = MIN_WIDTHS["dock_blocks"]  # pixels: the palette's minimum width

_IMPORT = shutil.which("import")
pytestmark = pytest.mark.skipif(
    not (shutil.which("Xvfb") and shutil.which("xdotool") and _IMPORT),
    reason="needs Xvfb, xdotool and ImageMagick's import on PATH")


# --- the X server, the app, events and screenshots ------------------------------------------
class Desktop:
    """Xvfb on a free display, the app on it, xdotool events and screenshots."""

    def __init__(self, work: Path):
        self.work = work
        self.shots = work / "shots"
        self.shots.mkdir()
        self.xvfb: subprocess.Popen | None = None
        self.app: subprocess.Popen | None = None
        self.app_log = work / "app.log"
        self.count = 0
        self.rest = (SCREEN[0] - 5, SCREEN[1] - 5)  # where park_pointer puts the pointer
        self.display = ""
        self.env: dict[str, str] = {}

    def start_x(self) -> None:
        """Xvfb on the first free display (it says which), and the app's environment: that
        display, xcb, a fresh HOME and XDG folders (no settings, recent files or recovery
        files of the user's)."""
        read, write = os.pipe()
        with open(self.work / "xvfb.log", "wb") as log:
            self.xvfb = subprocess.Popen(
                ["Xvfb", "-displayfd", str(write), "-screen", "0",
                 f"{SCREEN[0]}x{SCREEN[1]}x24", "-nolisten", "tcp"], pass_fds=(write,),
                stdout=subprocess.DEVNULL, stderr=log, start_new_session=True)
        os.close(write)
        try:  # the number, then a newline in a second write: read both (closing the pipe
            number = b""  # between them kills Xvfb: "Cannot write display number to fd")
            deadline = time.monotonic() + TIMEOUT
            while not number.endswith(b"\n") and time.monotonic() < deadline:
                if not select.select([read], [], [], 0.5)[0]:
                    continue
                chunk = os.read(read, 64)
                if not chunk:
                    break
                number += chunk
        finally:
            os.close(read)
        number = number.decode().strip()
        if not number.isdigit():
            pytest.fail("Xvfb did not report a display number")
        self.display = f":{number}"
        home, runtime = self.work / "home", self.work / "runtime"
        for folder in (home, runtime):
            folder.mkdir(mode=0o700)
        drop = ("DISPLAY", "WAYLAND_DISPLAY", "XAUTHORITY", "SESSION_MANAGER")
        env = {k: v for k, v in os.environ.items()
               if k not in drop and not k.startswith(("XDG_", "QT_", "DESKTOP"))}
        env.update(DISPLAY=self.display, HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"),
                   XDG_DATA_HOME=str(home / ".local/share"), XDG_CACHE_HOME=str(home / ".cache"),
                   XDG_RUNTIME_DIR=str(runtime), QT_QPA_PLATFORM="xcb",
                   PYTHONPATH=os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH"))
                                              if p))
        self.env = env
        wait_for("the X server", lambda: subprocess.run(
            ["xdotool", "getdisplaygeometry"], env=env, capture_output=True, timeout=TIMEOUT,
            check=False).returncode == 0, self)

    def start_app(self) -> float:
        """Start ``python -m app`` (the app); returns its start time (monotonic)."""
        started = time.monotonic()
        with open(self.app_log, "wb") as log:
            self.app = subprocess.Popen([sys.executable, "-m", "app"], cwd=self.work,
                                        env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                        start_new_session=True)
        return started

    def app_alive(self) -> None:
        if self.app is not None and self.app.poll() is not None:
            pytest.fail(f"the app exited with {self.app.returncode}:\n{self.app_log.read_text()}")

    def xdo(self, *args: str) -> str:
        self.app_alive()
        done = subprocess.run(["xdotool", *args], env=self.env, capture_output=True, text=True,
                              timeout=TIMEOUT, check=False)
        return done.stdout.strip()

    def windows(self, name: str) -> list[str]:
        return self.xdo("search", "--onlyvisible", "--name", name).split()

    def geometry(self, window: str) -> tuple[int, int, int, int]:
        """(x, y, width, height) of a window on the screen."""
        shell = self.xdo("getwindowgeometry", "--shell", window)
        g = dict(line.split("=", 1) for line in shell.splitlines() if "=" in line)
        return int(g["X"]), int(g["Y"]), int(g["WIDTH"]), int(g["HEIGHT"])

    def painted(self, windows) -> bool:
        """Whether the windows are drawn: mostly not black (a new window is black at first)."""
        if not windows:
            return False
        rgb = self.shot()
        for window in windows:
            x, y, w, h = self.geometry(window)
            if (rgb[y:y + h, x:x + w] != 0).any(-1).mean() < 0.5:
                return False
        return True

    def title(self, window: str) -> str:
        return self.xdo("getwindowname", window)

    def key(self, *keys: str) -> None:
        self.xdo("key", "--clearmodifiers", *keys)
        time.sleep(0.15)

    def type(self, text: str) -> None:
        self.xdo("type", "--delay", "15", text)
        time.sleep(0.15)

    def click(self, x: float, y: float) -> None:
        self.xdo("mousemove", str(round(x)), str(round(y)))
        time.sleep(0.1)
        self.xdo("click", "1")
        time.sleep(0.2)

    def drag(self, start: tuple[float, float], end: tuple[float, float]) -> None:
        """Press the left button at ``start``, move there in steps, release at ``end``."""
        self.xdo("mousemove", str(round(start[0])), str(round(start[1])))
        time.sleep(0.15)
        self.xdo("mousedown", "1")
        for t in np.linspace(0.1, 1.0, 8):
            x, y = (start[i] + t * (end[i] - start[i]) for i in (0, 1))
            self.xdo("mousemove", str(round(x)), str(round(y)))
            time.sleep(0.04)
        time.sleep(0.15)
        self.xdo("mouseup", "1")
        time.sleep(0.2)

    def park_pointer(self) -> None:
        """Move the pointer to an empty corner of the canvas: off every port (a hovered port
        changes colour), over the window."""
        self.xdo("mousemove", *(str(v) for v in self.rest))
        time.sleep(0.1)

    def refocus(self) -> None:
        """Click an empty corner of the canvas. Without a window manager nobody gives the
        keyboard back to the main window when a dialog closes: a user clicks into it."""
        self.click(*self.rest)

    def shot(self, name: str | None = None) -> np.ndarray:
        """A screenshot of the whole screen as RGB; named ones are kept (and copied)."""
        if name is None:  # a look at the screen, not kept
            return grab(self.display, None, self.env).astype(np.int16)
        self.count += 1
        path = self.shots / f"{self.count:02d}_{name}.png"
        rgb = grab(self.display, path, self.env)
        SHOTS_COPY.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, SHOTS_COPY / path.name)
        return rgb.astype(np.int16)

    def close(self) -> None:
        for proc in (self.app, self.xvfb):
            if proc is None or proc.poll() is not None:
                continue
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)


def grab(display: str, path: Path | None, env: dict) -> np.ndarray:
    """The screen's RGB pixels (ImageMagick's import: xwd draws popups, which have their own
    visual, black), saved as PNG to ``path`` unless it is None."""
    raw = subprocess.run([_IMPORT, "-display", display, "-window", "root", "-depth", "8",
                          "rgb:-"], env=env, check=True, timeout=TIMEOUT,
                         capture_output=True).stdout
    rgb = np.frombuffer(raw, np.uint8).reshape(SCREEN[1], SCREEN[0], 3)
    if path is not None:
        Image.fromarray(rgb).save(path)
    return rgb


def wait_for(what: str, check, desk: Desktop, timeout: float = TIMEOUT):
    """Poll ``check()`` until it returns something truthy; fail naming ``what`` after
    ``timeout`` seconds (with a screenshot of that moment kept)."""
    deadline = time.monotonic() + timeout
    while True:
        desk.app_alive()
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            if desk.app is not None:
                desk.shot(f"timeout_{what.replace(' ', '_')[:40]}")
            pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.25)


# --- what the screen shows -------------------------------------------------------------------
def canvas_rect(rgb: np.ndarray) -> tuple[int, int, int, int] | None:
    """(left, top, right, bottom) of the canvas: the pixels of NodeGraphQt's background."""
    ys, xs = np.nonzero((rgb == CANVAS_BG).all(-1))
    if xs.size < 10_000:
        return None
    return int(xs.min()), int(ys.min()), int(xs.max()), int(ys.max())


def empty_corner(rgb: np.ndarray, rect) -> tuple[int, int]:
    """A corner of the canvas (inset) where only background and grid are drawn."""
    left, top, right, bottom = rect
    plain = (np.abs(rgb - CANVAS_BG) <= 12).all(-1)  # the grid lines are 10 lighter
    for x, y in ((left + 8, bottom - 8), (right - 8, bottom - 8), (left + 8, top + 8)):
        if plain[y - 4:y + 5, x - 4:x + 5].all():
            return x, y
    pytest.fail("no empty corner on the canvas")


def blobs(mask: np.ndarray) -> list[tuple[float, float, int]]:
    """(x, y, pixels) of each 8-connected blob of ``mask``."""
    seen = np.zeros_like(mask)
    found = []
    h, w = mask.shape
    for y0, x0 in zip(*np.nonzero(mask), strict=True):
        if seen[y0, x0]:
            continue
        seen[y0, x0] = True
        stack, pts = [(y0, x0)], []
        while stack:
            y, x = stack.pop()
            pts.append((y, x))
            for yy in (y - 1, y, y + 1):
                for xx in (x - 1, x, x + 1):
                    if 0 <= yy < h and 0 <= xx < w and mask[yy, xx] and not seen[yy, xx]:
                        seen[yy, xx] = True
                        stack.append((yy, xx))
        arr = np.array(pts)
        found.append((float(arr[:, 1].mean()), float(arr[:, 0].mean()), len(pts)))
    return found


def ports(rgb: np.ndarray, rect) -> list[tuple[float, float]]:
    """Screen positions of the ports drawn on the canvas (their rings' colour)."""
    left, top, right, bottom = rect
    area = rgb[top:bottom + 1, left:right + 1]
    mask = (np.abs(area - PORT_RING) <= PORT_RING_TOLERANCE).all(-1)
    return [(x + left, y + top) for x, y, n in blobs(mask) if n >= MIN_PORT_PIXELS]


def conv_inputs(found: list[tuple[float, float]]) -> list[tuple[float, float]] | None:
    """The conv block's three input ports (input, filter_sizes, out_backprop), top to bottom:
    the one column of three ports stacked a port's step apart."""
    columns = []
    for x, y in sorted(found, key=lambda p: p[1]):
        column = next((c for c in columns if abs(c[0][0] - x) <= 3), None)
        if column is None:
            columns.append([(x, y)])
        else:
            column.append((x, y))
    triples = [c[i:i + 3] for c in columns for i in range(len(c) - 2)
               if all(0 < c[i + k + 1][1] - c[i + k][1] < PORT_STEP_MAX for k in (0, 1))]
    return triples[0] if len(triples) == 1 else None


def wired(found: list[tuple[float, float]], count: int) -> bool:
    """``count`` ports on the canvas, the conv block's three inputs among them."""
    return len(found) == count and conv_inputs(found) is not None


def fields(rgb: np.ndarray, rect) -> list[tuple[int, int]]:
    """The attribute panel's text fields, top to bottom (the block's title first): the runs of
    the theme's base colour down the middle of the panel right of the canvas."""
    _left, top, right, bottom = rect
    window_right = int(np.nonzero((rgb[top + 5] != 0).any(-1))[0].max())
    x = (right + window_right) // 2
    column = (rgb[top:bottom, x] == FIELD_BG).all(-1)
    runs, start = [], None
    for y, inside in enumerate([*column, False]):
        if inside and start is None:
            start = y
        elif not inside and start is not None:
            if y - start >= MIN_FIELD_HEIGHT:
                runs.append((x, top + (start + y) // 2))
            start = None
    return runs


# --- the reference --------------------------------------------------------------------------
def backprop_filter_f64(x: np.ndarray, dy: np.ndarray, kh: int, kw: int) -> np.ndarray:
    """dw[i,j,q,o] = sum over n, r, c of x_pad[n, r+i, c+j, q] * dy[n, r, c, o] (NHWC, SAME,
    strides and dilations 1: x padded by (k-1)//2 before, the rest after), in float64."""
    x, dy = x.astype(np.float64), dy.astype(np.float64)
    n, h, w, _q = x.shape
    ph, pw = (kh - 1) // 2, (kw - 1) // 2
    xp = np.pad(x, ((0, 0), (ph, kh - 1 - ph), (pw, kw - 1 - pw), (0, 0)))
    dw = np.zeros((kh, kw, x.shape[3], dy.shape[3]))
    for i in range(kh):
        for j in range(kw):
            for b in range(n):
                for r in range(h):
                    for c in range(w):
                        dw[i, j] += np.outer(xp[b, r + i, c + j], dy[b, r, c])
    return dw


# --- the walkthrough ------------------------------------------------------------------------
# conv input port -> (search text, title, edits after the title). The first field is clicked:
# Tab from the title field goes to the panel's scroll area, then the viewer's tabs and its Pin
# button, never to the fields (a defect reported in issue 24's walkthrough note).
SOURCES = (
    (0, "tensor", "x", []),
    (1, "intvector", "filter_sizes", [("field", 1), ("text", "3, 3, 2, 4")]),
    # shape, then Tab past dtype and fill to seed
    (2, "tensor", "dy", [("field", 1), ("text", "1, 5, 5, 4"), ("tab", 3), ("text", "1")]),
)


def test_walkthrough_from_empty_canvas_to_reopened_filter_gradient(tmp_path):
    desk = Desktop(tmp_path)
    try:
        desk.start_x()
        _walkthrough(desk, tmp_path)
    finally:
        desk.close()


def _walkthrough(desk: Desktop, tmp: Path) -> None:
    started = desk.start_app()
    main = wait_for("the main window", lambda: desk.windows("GradBlocks"), desk)[0]
    wait_for("an empty canvas", lambda: canvas_rect(desk.shot()), desk)
    shown = time.monotonic()
    rgb = desk.shot("empty_canvas")
    rect = canvas_rect(rgb)
    assert ports(rgb, rect) == [], "the canvas starts empty"
    assert desk.title(main) == "untitled — GradBlocks"

    # Tab over the canvas, type a few letters, Enter: the block lands at the pointer
    left, top, right, bottom = rect
    desk.rest = empty_corner(rgb, rect)
    desk.click(left + 0.55 * (right - left), top + 0.3 * (bottom - top))
    desk.key("Tab")
    desk.type("backprop filter")
    desk.shot("tab_search")
    desk.key("Return")
    desk.park_pointer()
    wait_for("the conv block's input ports", lambda: conv_inputs(ports(desk.shot(), rect)), desk)
    desk.shot("conv_added")

    for index, query, title, edits in SOURCES:
        found = ports(desk.shot(), rect)
        before, port = len(found), conv_inputs(found)[index]
        drop = (max(left + 60, port[0] - 230), port[1] - 60 + 70 * index)
        before_drag = set(desk.windows(""))
        desk.drag(port, drop)
        wait_for("the wire-drop search", lambda w=before_drag: desk.painted(
            set(desk.windows("")) - w), desk)
        desk.type(query)
        desk.shot(f"wire_drop_{title}")
        desk.key("Return")
        desk.park_pointer()
        wait_for(f"{title} wired in", lambda b=before: wired(ports(desk.shot(), rect), b + 1),
                 desk)
        # the new block is selected: its attributes are on the right
        rename(desk, rect, title)
        for kind, value in edits:
            if kind == "text":
                desk.type(value)
                continue
            if kind == "field":  # click the n-th field (the title is the 0th)
                desk.click(*fields(desk.shot(), rect)[value])
            else:
                desk.key(*["Tab"] * value)
            desk.key("ctrl+a")  # the field's text, replaced by what is typed next
        desk.key("Return")
        desk.park_pointer()
        desk.shot(f"edited_{title}")

    # select the conv block (its title bar, above its first port) and run with F5
    first = conv_inputs(ports(desk.shot(), rect))[0]
    desk.click(first[0] + 60, first[1] - 20)
    rename(desk, rect, "dW")
    desk.key("Return")
    idle = desk.shot("conv_selected")
    desk.key("F5")
    desk.park_pointer()
    ran = time.monotonic()
    _wait_run(desk, rect, idle)
    desk.shot("after_F5")

    saved = tmp / "saved.gbc.json"
    desk.key("ctrl+s")
    dialog = wait_for("the Save dialog", lambda: desk.windows("Save canvas as"), desk)[0]
    _type_file_name(desk, dialog, saved)
    wait_for("the saved file and title", lambda: saved.exists()
             and desk.title(main) == "saved — GradBlocks", desk)
    desk.shot("saved")

    out = tmp / "r.npz"
    proc = subprocess.run([sys.executable, "-m", "engine.cli", "run", str(saved), "--out",
                           str(out)], cwd=tmp, env=desk.env, capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with np.load(out) as r:
        results = {k: r[k] for k in r.files}
    assert sorted(results) == ["dW", "dy", "filter_sizes", "x"], sorted(results)
    x, dy, dw = results["x"], results["dy"], results["dW"]
    assert x.shape == (1, 5, 5, 2) and dy.shape == (1, 5, 5, 4)
    assert results["filter_sizes"].tolist() == [3, 3, 2, 4]
    nodes = {n["title"]: n for n in json.loads(saved.read_text())["nodes"]}
    assert nodes["dy"]["attrs"]["seed"] == 1 and nodes["x"]["attrs"].get("seed", 0) == 0
    expected = backprop_filter_f64(x, dy, 3, 3)
    bound = backprop_filter_f64(np.abs(x), np.abs(dy), 3, 3)
    assert dw.dtype == np.float32 and dw.shape == (3, 3, 2, 4)
    assert (np.abs(dw - expected) <= RTOL["float32"] * bound).all(), \
        float(np.abs(dw - expected).max())
    first_correct = time.monotonic()
    print(f"\nwalkthrough: window up {shown - started:.1f} s, F5 {ran - started:.1f} s after "
          f"the app started; first correct "
          f"filter gradient (saved and checked) {first_correct - started:.1f} s after it; "
          f"max |dw - float64| {float(np.abs(dw - expected).max()):.2e}")

    # New empties the canvas; Open brings the file back
    desk.key("ctrl+n")
    wait_for("an empty canvas after New", lambda: not ports(desk.shot(), rect)
             and desk.title(main) == "untitled — GradBlocks", desk)
    desk.key("ctrl+o")
    dialog = wait_for("the Open dialog", lambda: desk.windows("Open canvas"), desk)[0]
    _type_file_name(desk, dialog, saved)
    wait_for("the reopened canvas", lambda: desk.title(main) == "saved — GradBlocks"
             and conv_inputs(ports(desk.shot(), rect)), desk)
    rgb = desk.shot("reopened")
    assert len(ports(rgb, rect)) == 7  # 3 conv inputs, its output, 3 source outputs
    desk.key("F5")
    desk.park_pointer()
    _wait_run(desk, rect, rgb)
    desk.shot("reopened_after_F5")
    _shrink_and_grow(desk, main, rect)
    desk.key("ctrl+q")
    try:
        assert desk.app.wait(TIMEOUT) == 0  # a clean canvas quits without asking
    except subprocess.TimeoutExpired:
        desk.shot("quit_hangs")
        pytest.fail("Ctrl+Q did not close the app")


def _shrink_and_grow(desk: Desktop, main: str, rect) -> None:
    """The window made small, then as large as before (issue 34 part 2, defect 4): while small
    the palette keeps its usable width (the canvas starts at least MIN_PALETTE pixels from
    the window's left edge), and afterwards the canvas has its old width back, so the panels
    got theirs back too."""
    x0, _, w0, h0 = desk.geometry(main)
    desk.xdo("windowsize", main, "760", "520")
    wait_for("the smaller window", lambda: desk.geometry(main)[2] <= 800
             and canvas_rect(desk.shot()) is not None, desk)
    time.sleep(0.5)
    small = canvas_rect(desk.shot("window_small"))
    assert small is not None and small[0] - x0 >= MIN_PALETTE, small
    desk.xdo("windowsize", main, str(w0), str(h0))
    wait_for("the window at its size again", lambda: desk.geometry(main)[2:] == (w0, h0), desk)
    time.sleep(0.5)
    again = canvas_rect(desk.shot("window_large_again"))
    assert again is not None
    assert abs((again[2] - again[0]) - (rect[2] - rect[0])) <= 8, (rect, again)


def rename(desk: Desktop, rect, title: str) -> None:
    """Click the selected block's title field (the panel's first) and type ``title``."""
    desk.click(*wait_for("the attribute panel", lambda: fields(desk.shot(), rect), desk)[0])
    desk.key("ctrl+a")
    desk.type(title)


def _type_file_name(desk: Desktop, dialog: str, path: Path) -> None:
    """In a file dialog: point at it, replace the file name with ``path``, Enter."""
    wait_for("the dialog drawn", lambda: desk.painted([dialog]), desk)
    x, y, w, h = desk.geometry(dialog)
    desk.xdo("mousemove", str(x + w // 2), str(y + h // 2))
    desk.key("ctrl+a")
    desk.type(str(path))
    desk.shot("file_dialog")
    desk.key("Return")
    wait_for("the dialog to close", lambda: dialog not in desk.windows(""), desk)
    desk.refocus()


def _wait_run(desk: Desktop, rect, idle: np.ndarray) -> None:
    """Wait until the canvas differs from ``idle`` (the previews of a run appear) and then
    stays the same for half a second (the run has ended). Only the canvas is compared: a text
    cursor blinks elsewhere."""
    left, top, right, bottom = rect

    def canvas() -> np.ndarray:
        return desk.shot()[top:bottom, left:right]

    last = [idle[top:bottom, left:right]]

    def settled() -> bool:
        time.sleep(0.5)
        now = canvas()
        done = not np.array_equal(now, idle[top:bottom, left:right]) and np.array_equal(
            now, last[0])
        last[0] = now
        return done

    wait_for("the run's previews", settled, desk)
