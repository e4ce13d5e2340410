"""Qt's xcb plugin failing (issue 34 2.9): one line naming the missing libraries and the
packages to install, exit 2, before Qt can abort with a core dump."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from app import platform_check
from tests.cli_support import one_error

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux") or not shutil.which("cc"),
                                reason="Linux with a C compiler (the fake plugins are built)")


def _shared(tmp: Path, name: str, needs: str | None = None) -> Path:
    """A shared library ``name`` in ``tmp``; with ``needs``, one whose DT_NEEDED names a library
    built beside it and then deleted (so the loader cannot find it)."""
    src = tmp / "empty.c"
    src.write_text("int gradblocks_fake(void) { return 0; }\n")
    out = tmp / name
    args = ["cc", "-shared", "-fPIC", "-o", str(out), str(src)]
    if needs:
        dep = tmp / needs
        subprocess.run(["cc", "-shared", "-fPIC", f"-Wl,-soname,{needs}", "-o", str(dep),
                        str(src)], check=True)
        args += ["-Wl,--no-as-needed", str(dep)]
    subprocess.run(args, check=True)
    if needs:
        (tmp / needs).unlink()
    return out


def _app(env_extra: dict[str, str]) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items()
           if k not in ("QT_QPA_PLATFORM", "WAYLAND_DISPLAY", "XDG_SESSION_TYPE")}
    env.update(env_extra)
    return subprocess.run([sys.executable, "-m", "app"], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=120, check=False)


def test_a_missing_library_is_one_line_naming_it_and_exit_2(tmp_path):
    plugins = tmp_path / "platforms"
    plugins.mkdir()
    _shared(plugins, "libqxcb.so", needs="libgradblocks-missing-xcb.so.3")
    proc = _app({"DISPLAY": ":0", "QT_QPA_PLATFORM_PLUGIN_PATH": str(plugins)})
    line = one_error(proc, "xcb platform plugin", "libgradblocks-missing-xcb.so.3", "not found")
    assert "Aborted" not in line and "core" not in line


def test_no_x_server_is_one_line_and_exit_2(tmp_path):
    plugins = tmp_path / "platforms"
    plugins.mkdir()
    _shared(plugins, "libqxcb.so")
    display = next(f":{n}" for n in range(77, 200)
                   if not Path(f"/tmp/.X11-unix/X{n}").exists())
    proc = _app({"DISPLAY": display, "QT_QPA_PLATFORM_PLUGIN_PATH": str(plugins)})
    one_error(proc, "no X server answers on DISPLAY", repr(display))


def test_the_libraries_that_are_missing_here_are_named_with_their_packages(tmp_path):
    """The library table itself: each listed soname the loader cannot load is reported, with
    its package; the ones it loads are not."""
    plugin = _shared(tmp_path, "libqxcb.so", needs="libxcb-cursor.so.0-gone")
    missing = platform_check.missing_libraries(plugin)
    for name in platform_check.XCB_PACKAGES:
        assert (name in missing) == bool(platform_check._loads(name)), name
    assert missing[-1] == "libxcb-cursor.so.0-gone"
    assert platform_check.missing_libraries(_shared(tmp_path, "ok.so")) == []


def test_qt_is_not_checked_off_xcb():
    assert not platform_check.uses_xcb({"QT_QPA_PLATFORM": "offscreen"})
    assert not platform_check.uses_xcb({"QT_QPA_PLATFORM": "wayland;xcb"})
    assert not platform_check.uses_xcb({"WAYLAND_DISPLAY": "wayland-0",
                                        "XDG_SESSION_TYPE": "wayland"})
    assert platform_check.uses_xcb({"DISPLAY": ":0"})
    assert platform_check.uses_xcb({"QT_QPA_PLATFORM": "xcb:display=:1"})


def test_the_guide_lists_the_same_packages():
    text = (ROOT / "assets" / "guide" / "app.md").read_text()
    listed = re.search(r"sudo apt-get install ([\w\s-]+)`", text).group(1).split()
    assert listed == list(platform_check.XCB_PACKAGES.values())
