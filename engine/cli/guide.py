"""The User Guide: the manual's pages, ``assets/guide/*.md``, shipped with the package.

``gradblocks guide [TOPIC]`` prints them (:mod:`engine.cli.commands`) and the app's Help > User
Guide window renders them (``app.guide_window``). A topic is a page's file name without ``.md``. The
index page lists the others: its links to pages are the topics and their reading order, so that
list is written in one place, the page a reader sees.
"""

from __future__ import annotations

import re
from pathlib import Path

from engine.base.errors import InvalidArgumentError
from engine.base.names import shown

#: The pages: ``assets/guide`` beside the installed packages (package data, as the example
#: canvases of ``app.canvas_paths``), so a ``pip install .`` finds them as a source checkout does.
GUIDE_DIR = Path(__file__).resolve().parents[2] / "assets" / "guide"
INDEX = "index"
SUFFIX = ".md"

_FENCE = re.compile(r"^ {0,3}(```|~~~)")
_CODE_SPAN = re.compile(r"(`+).*?\1", re.DOTALL)
#: ``[text](target)`` and ``![alt](target)``: the target, up to a space (a title) or ``)``.
_LINK = re.compile(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")


def page_path(topic: str) -> Path:
    """The file of ``topic`` (not checked: see :func:`find_topic`)."""
    return GUIDE_DIR / f"{topic}{SUFFIX}"


def _outside_fences(text: str) -> str:
    """``text`` without its fenced code blocks (a ``# comment`` there is not a heading)."""
    kept = []
    fenced = False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            kept.append(line)
    return "\n".join(kept)


def links(text: str) -> list[str]:
    """Every link and picture target of a Markdown ``text``, in order (code excluded)."""
    return _LINK.findall(_CODE_SPAN.sub("", _outside_fences(text)))


def is_relative(target: str) -> bool:
    """A link into the files beside the page (no scheme such as ``https:``, not absolute)."""
    return not re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", target) and not target.startswith("/")


def topics() -> tuple[str, ...]:
    """The index, then every page the index links to, in its order; () when the pages are not
    installed."""
    try:
        index = page_path(INDEX).read_text(encoding="utf-8")
    except OSError:
        return ()
    found = [INDEX]
    for target in links(index):
        name = target.split("#", 1)[0]
        if is_relative(target) and name.endswith(SUFFIX) and "/" not in name:
            topic = name[: -len(SUFFIX)]
            if topic not in found:
                found.append(topic)
    return tuple(found)


def find_topic(name: str) -> str:
    """The topic ``name`` means (case and a ``.md`` ending ignored), or InvalidArgumentError
    naming the topics."""
    known = topics()
    wanted = name.strip().lower().removesuffix(SUFFIX)
    if wanted in known:
        return wanted
    listed = ", ".join(known) if known else f"none: no pages in {GUIDE_DIR}"
    raise InvalidArgumentError(f"unknown topic {shown(name)} (topics: {listed})", "topic")


def read_page(topic: str) -> str:
    """The Markdown of ``topic`` (a name from :func:`topics`)."""
    return page_path(find_topic(topic)).read_text(encoding="utf-8")


def title(text: str) -> str:
    """The page's title: its first ``# `` heading ('' when it has none)."""
    for line in _outside_fences(text).splitlines():
        match = _HEADING.match(line)
        if match and len(match.group(1)) == 1:
            return match.group(2)
    return ""


def slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces to ``-``
    (``## The guide in the terminal`` -> ``the-guide-in-the-terminal``)."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(text: str) -> list[str]:
    """The anchors of a page's headings, in order (a repeated heading gets ``-1``, ``-2``)."""
    seen: dict[str, int] = {}
    found = []
    for line in _outside_fences(text).splitlines():
        match = _HEADING.match(line)
        if match:
            base = slug(match.group(2))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.append(base if count == 0 else f"{base}-{count}")
    return found

