"""Help > User Guide: the guide's pages (:mod:`engine.cli.guide`, ``assets/guide/*.md``) in a
window.

A QTextBrowser renders a page's Markdown; the pages are listed on the left. A relative link to
another page opens it here (at the heading its ``#anchor`` names), a web link opens in the
system browser, and Back / Forward step through the pages seen. Pictures are scaled down to
the page's width (:data:`MAX_PICTURE_WIDTH` at most); one that is missing shows its caption
instead (the screenshots ship as package data: tests/test_guide_package_data.py).
"""

from __future__ import annotations

import re
from pathlib import Path

from PySide6 import QtCore, QtGui, QtWidgets

from engine.cli import guide

#: Widest picture shown, in pixels (the screenshots are 1600 wide): the page's width at most,
#: but never narrower than the minimum.
MAX_PICTURE_WIDTH = 900
MIN_PICTURE_WIDTH = 300
#: Link schemes handed to the system (the browser, the mail program).
EXTERNAL_SCHEMES = ("http", "https", "mailto")
_PICTURE = re.compile(r"!\[([^\]]*)\]\(\s*([^)\s]+)\s*\)")
OBJECT_NAME = "gradblocks_user_guide"


def page_url(topic: str, anchor: str = "") -> QtCore.QUrl:
    url = QtCore.QUrl.fromLocalFile(str(guide.page_path(topic)))
    if anchor:
        url.setFragment(anchor)
    return url


def topic_of(url: QtCore.QUrl) -> str | None:
    """The topic a local URL is the page of (None for anything else)."""
    if not url.isLocalFile():
        return None
    path = Path(url.toLocalFile())
    topics = guide.topics()
    if path.suffix == guide.SUFFIX and path.parent == guide.GUIDE_DIR and path.stem in topics:
        return path.stem
    return None


class GuideBrowser(QtWidgets.QTextBrowser):
    """Renders the pages; links are followed by :class:`GuideWindow` (``anchorClicked``)."""

    def loadResource(self, kind: int, url: QtCore.QUrl):  # Qt calls it for pages, pictures
        url = self.source().resolved(url) if url.isRelative() else url
        if kind == QtGui.QTextDocument.MarkdownResource and url.isLocalFile():
            path = Path(url.toLocalFile())
            try:
                return caption_missing_pictures(path.read_text(encoding="utf-8"), path)
            except OSError as err:
                return f"# Page not found\n\n`{path}`: {err.strerror or err}\n"
        if kind == QtGui.QTextDocument.ImageResource and url.isLocalFile():
            image = QtGui.QImage(url.toLocalFile())
            width = min(MAX_PICTURE_WIDTH, max(MIN_PICTURE_WIDTH, self.viewport().width() - 30))
            if image.width() > width:
                image = image.scaledToWidth(width, QtCore.Qt.SmoothTransformation)
            return image
        return super().loadResource(kind, url)


def caption_missing_pictures(text: str, page: Path) -> str:
    """``text`` with each picture whose file is missing replaced by its caption in italics."""
    def picture(match: re.Match) -> str:
        alt, target = match.groups()
        if not guide.is_relative(target) or (page.parent / target).is_file():
            return match.group(0)
        return f"*(picture not installed: {alt})*"

    return _PICTURE.sub(picture, text)


class GuideWindow(QtWidgets.QMainWindow):
    """The User Guide: the list of pages, the page, Back / Forward / Contents."""

    def __init__(self, parent: QtWidgets.QWidget | None = None):
        super().__init__(parent)
        self.setObjectName(OBJECT_NAME)
        self.setWindowFlag(QtCore.Qt.Window)
        self.setWindowTitle("GradBlocks User Guide")
        self.pages = QtWidgets.QListWidget()
        self.pages.setObjectName("guide_pages")
        for topic in guide.topics():
            try:
                name = guide.title(guide.page_path(topic).read_text(encoding="utf-8")) or topic
            except OSError:
                name = topic
            item = QtWidgets.QListWidgetItem(name)
            item.setData(QtCore.Qt.UserRole, topic)
            self.pages.addItem(item)
        self.browser = GuideBrowser()
        self.browser.setObjectName("guide_browser")
        self.browser.setOpenLinks(False)  # followed by follow(): pages here, the web outside
        # a long code line or path breaks anywhere rather than running past the right edge
        self.browser.setWordWrapMode(QtGui.QTextOption.WrapAtWordBoundaryOrAnywhere)
        self.browser.anchorClicked.connect(self.follow)
        self.browser.sourceChanged.connect(self._on_source_changed)
        self.pages.currentItemChanged.connect(self._on_page_picked)
        splitter = QtWidgets.QSplitter()
        splitter.addWidget(self.pages)
        splitter.addWidget(self.browser)
        splitter.setStretchFactor(1, 1)
        self.setCentralWidget(splitter)
        self._build_toolbar()
        for keys in (QtGui.QKeySequence(QtCore.Qt.Key_Escape), QtGui.QKeySequence.Close):
            QtGui.QShortcut(keys, self, self.close, context=QtCore.Qt.WindowShortcut)
        self.resize(1100, 800)
        splitter.setSizes([290, 810])
        self.open_topic(guide.INDEX)

    def _build_toolbar(self) -> None:
        bar = self.addToolBar("Navigation")
        bar.setObjectName("guide_navigation")
        bar.setMovable(False)
        style = self.style()
        self.act_back = bar.addAction(style.standardIcon(QtWidgets.QStyle.SP_ArrowBack), "Back",
                                      self.browser.backward)
        self.act_back.setShortcut(QtGui.QKeySequence.Back)
        self.act_forward = bar.addAction(style.standardIcon(QtWidgets.QStyle.SP_ArrowForward),
                                         "Forward", self.browser.forward)
        self.act_forward.setShortcut(QtGui.QKeySequence.Forward)
        self.act_contents = bar.addAction("Contents", lambda: self.open_topic(guide.INDEX))
        self.act_back.setEnabled(False)
        self.act_forward.setEnabled(False)
        self.browser.backwardAvailable.connect(self.act_back.setEnabled)
        self.browser.forwardAvailable.connect(self.act_forward.setEnabled)

    def topic(self) -> str | None:
        """The topic of the page shown."""
        return topic_of(self.browser.source())

    def open_topic(self, topic: str, anchor: str = "") -> None:
        if topic in guide.topics():
            self.browser.setSource(page_url(topic, anchor))
        else:
            self.browser.setMarkdown(f"# The User Guide is not installed\n\nNo page "
                                     f"`{topic}` in `{guide.GUIDE_DIR}`.\n")

    def follow(self, url: QtCore.QUrl) -> None:
        """A clicked link: a page of the guide opens here, a web link in the system browser, a
        local file (a picture) in its application; anything else is a status message."""
        if url.scheme() in EXTERNAL_SCHEMES:
            QtGui.QDesktopServices.openUrl(url)
            return
        target = self.browser.source().resolved(url)
        if topic_of(target) is not None:
            self.browser.setSource(target)
        elif target.isLocalFile() and Path(target.toLocalFile()).is_file():
            QtGui.QDesktopServices.openUrl(target)
        else:
            self.statusBar().showMessage(f"No such page: {url.toString()}", 5000)

    def _on_source_changed(self, url: QtCore.QUrl) -> None:
        wrap_code_blocks(self.browser.document())
        topic = topic_of(url)
        self.setWindowTitle("GradBlocks User Guide" if topic == guide.INDEX
                            else f"GradBlocks User Guide: {self._title_of(topic)}")
        for row in range(self.pages.count()):
            if self.pages.item(row).data(QtCore.Qt.UserRole) == topic:
                blocker = QtCore.QSignalBlocker(self.pages)
                self.pages.setCurrentRow(row)
                del blocker
        self._scroll_to_heading(topic, url.fragment())

    def _title_of(self, topic: str | None) -> str:
        for row in range(self.pages.count()):
            if self.pages.item(row).data(QtCore.Qt.UserRole) == topic:
                return self.pages.item(row).text()
        return topic or ""

    def _scroll_to_heading(self, topic: str | None, anchor: str) -> None:
        """Show the heading of ``topic`` whose anchor (:func:`engine.cli.guide.anchors`) is
        ``anchor`` at the top (Qt's Markdown gives headings no anchors of their own); the page's top
        when none is."""
        bar = self.browser.verticalScrollBar()
        try:
            names = guide.anchors(guide.read_page(topic)) if anchor and topic else []
        except (OSError, ValueError):
            names = []
        if anchor not in names:
            bar.setValue(0)
            return
        wanted = names.index(anchor)
        block = self.browser.document().begin()
        while block.isValid():
            if block.blockFormat().headingLevel():
                if wanted == 0:
                    self.browser.setTextCursor(QtGui.QTextCursor(block))
                    layout = self.browser.document().documentLayout()
                    bar.setValue(int(layout.blockBoundingRect(block).top()))
                    return
                wanted -= 1
            block = block.next()

    def _on_page_picked(self, item: QtWidgets.QListWidgetItem | None) -> None:
        if item is not None:
            self.open_topic(item.data(QtCore.Qt.UserRole))


def wrap_code_blocks(document: QtGui.QTextDocument) -> None:
    """Let the page's code blocks (Qt's Markdown makes them non-breaking) wrap at the page's
    width, as the prose does."""
    cursor = QtGui.QTextCursor(document)
    block = document.begin()
    cursor.beginEditBlock()
    while block.isValid():
        if block.blockFormat().nonBreakableLines():
            fmt = block.blockFormat()
            fmt.setNonBreakableLines(False)
            cursor.setPosition(block.position())
            cursor.setBlockFormat(fmt)
        block = block.next()
    cursor.endEditBlock()


def show_guide(parent: QtWidgets.QWidget, topic: str | None = None) -> GuideWindow:
    """Show ``parent``'s User Guide window (made on first use), raised, on ``topic`` if given."""
    window = parent.findChild(GuideWindow, OBJECT_NAME)
    if window is None:
        window = GuideWindow(parent)
    if topic is not None:
        window.open_topic(topic)
    window.show()
    window.raise_()
    window.activateWindow()
    return window
