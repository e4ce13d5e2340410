"""Help > User Guide driven as a user: the menu entry opens the guide window on the index, a
mouse click on a link opens that page, Back and Forward step through the pages seen, an #anchor
scrolls to its heading, a web link goes to the system browser, the list on the side opens
pages, and a picture that is not installed shows its caption."""

from __future__ import annotations

from pathlib import Path

from PySide6 import QtCore, QtGui, QtWidgets

from app.guide_window import OBJECT_NAME, GuideWindow, caption_missing_pictures
from engine.cli import guide


def open_guide(qtbot, window) -> GuideWindow:
    help_menu = next(a.menu() for a in window.menuBar().actions() if a.text() == "&Help")
    entry = next(a for a in help_menu.actions() if a.text() == "&User Guide…")
    entry.trigger()
    guide_window = window.findChild(GuideWindow, OBJECT_NAME)
    assert guide_window is not None
    qtbot.waitExposed(guide_window)
    return guide_window


def link_position(browser: QtWidgets.QTextBrowser, href: str) -> QtCore.QPoint:
    """The viewport position of the middle of the (first) link to ``href``."""
    block = browser.document().begin()
    while block.isValid():
        it = block.begin()
        while not it.atEnd():
            fragment = it.fragment()
            if fragment.charFormat().anchorHref() == href:
                cursor = QtGui.QTextCursor(browser.document())
                cursor.setPosition(fragment.position() + fragment.length() // 2)
                return browser.cursorRect(cursor).center()
            it += 1
        block = block.next()
    raise AssertionError(f"no link to {href!r} on the page")


def click_link(qtbot, browser: QtWidgets.QTextBrowser, href: str) -> None:
    pos = link_position(browser, href)
    browser.ensureCursorVisible()
    qtbot.mouseClick(browser.viewport(), QtCore.Qt.LeftButton, pos=pos)


def first_line(gw: GuideWindow) -> str:
    return gw.browser.document().firstBlock().text()


def test_help_user_guide_opens_on_the_index_and_a_click_follows_a_link(qtbot, window):
    gw = open_guide(qtbot, window)
    assert gw.topic() == guide.INDEX
    assert first_line(gw) == "GradBlocks User Guide"
    assert [gw.pages.item(r).data(QtCore.Qt.UserRole) for r in range(gw.pages.count())] == \
        list(guide.topics())
    assert gw.pages.currentItem().text() == "GradBlocks User Guide"
    assert not gw.act_back.isEnabled()

    click_link(qtbot, gw.browser, "app.md")  # a real mouse click on "The desktop app"
    qtbot.waitUntil(lambda: gw.topic() == "app")
    assert first_line(gw) == "The desktop app"
    assert gw.pages.currentItem().text() == "The desktop app"
    assert gw.windowTitle() == "GradBlocks User Guide: The desktop app"
    assert gw.act_back.isEnabled()

    gw.act_back.trigger()
    assert gw.topic() == guide.INDEX and first_line(gw) == "GradBlocks User Guide"
    assert gw.pages.currentItem().text() == "GradBlocks User Guide"
    assert gw.act_forward.isEnabled()
    gw.act_forward.trigger()
    assert gw.topic() == "app"

    # the same window again, not a second one
    assert open_guide(qtbot, window) is gw
    assert len(window.findChildren(GuideWindow)) == 1


def test_an_anchor_link_scrolls_to_its_heading(qtbot, window):
    gw = open_guide(qtbot, window)
    gw.follow(QtCore.QUrl("app.md"))
    assert gw.topic() == "app"
    gw.browser.anchorClicked.emit(QtCore.QUrl("cli.md#canvas-files"))  # as a click emits it
    assert gw.topic() == "cli"
    assert gw.browser.verticalScrollBar().value() > 0
    assert gw.browser.textCursor().block().text() == "Canvas files"
    gw.act_back.trigger()
    assert gw.topic() == "app" and gw.browser.verticalScrollBar().value() == 0


def test_web_links_open_in_the_system_browser(qtbot, window, monkeypatch):
    opened: list[str] = []
    monkeypatch.setattr(QtGui.QDesktopServices, "openUrl",
                        lambda url: opened.append(url.toString()) or True)
    gw = open_guide(qtbot, window)
    gw.browser.anchorClicked.emit(QtCore.QUrl("https://example.com/guide.md"))
    assert opened == ["https://example.com/guide.md"]
    assert gw.topic() == guide.INDEX  # the window stays where it was
    gw.browser.anchorClicked.emit(QtCore.QUrl("missing.md"))
    assert gw.topic() == guide.INDEX and opened == ["https://example.com/guide.md"]
    assert gw.statusBar().currentMessage().startswith("No such page: missing.md")


def test_the_page_list_opens_every_page(qtbot, window):
    gw = open_guide(qtbot, window)
    for row in range(gw.pages.count()):
        item = gw.pages.item(row)
        rect = gw.pages.visualItemRect(item)
        qtbot.mouseClick(gw.pages.viewport(), QtCore.Qt.LeftButton, pos=rect.center())
        topic = item.data(QtCore.Qt.UserRole)
        assert gw.topic() == topic
        assert first_line(gw) == guide.title(guide.read_page(topic)) == item.text()


def test_a_picture_that_is_not_installed_shows_its_caption(tmp_path):
    (tmp_path / "here.png").write_bytes(b"")
    page = tmp_path / "page.md"
    text = "![A caption](gone.png) and ![kept](here.png) and ![web](https://example.com/x.png)"
    shown = caption_missing_pictures(text, page)
    assert shown == ("*(picture not installed: A caption)* and ![kept](here.png) and "
                     "![web](https://example.com/x.png)")


def test_pictures_are_scaled_to_the_page(qtbot, window):
    gw = open_guide(qtbot, window)
    gw.follow(QtCore.QUrl("app.md"))
    url = QtCore.QUrl.fromLocalFile(str(Path(guide.GUIDE_DIR).parent / "screenshots"
                                        / "training_step.png"))
    image = gw.browser.loadResource(QtGui.QTextDocument.ImageResource, url)
    assert isinstance(image, QtGui.QImage)
    assert image.width() == min(900, gw.browser.viewport().width() - 30)  # 1600 wide on disk
    assert image.width() < 1600


def test_code_lines_wrap_inside_the_page(qtbot, window):
    """The command-line page's long code lines wrap: nothing runs past the right edge."""
    gw = open_guide(qtbot, window)
    gw.resize(900, 700)
    for topic in ("cli", "verify", "import"):
        gw.open_topic(topic)
        width = gw.browser.viewport().width()
        # idealWidth finishes the document's layout (Qt lays large pages out lazily): the
        # widest line, which a non-breaking code line makes wider than the page
        assert gw.browser.document().idealWidth() <= width, topic


def test_escape_and_ctrl_w_close_the_guide(qtbot, window):
    for key, modifier in ((QtCore.Qt.Key_Escape, QtCore.Qt.NoModifier),
                          (QtCore.Qt.Key_W, QtCore.Qt.ControlModifier)):
        gw = open_guide(qtbot, window)
        assert gw.isVisible()
        gw.activateWindow()
        qtbot.waitUntil(lambda gw=gw: QtWidgets.QApplication.activeWindow() is gw)
        gw.browser.setFocus()
        qtbot.keyClick(gw.browser, key, modifier)
        qtbot.waitUntil(lambda gw=gw: not gw.isVisible(), timeout=2000)
    assert window.isVisible()  # the main window stays
