"""Run > Verify an Implementation...: the window's action, which opens the one dialog
(:mod:`app.verify_dialog`) and keeps it, and the sweep's shutdown when the window closes."""

from __future__ import annotations

from PySide6 import QtCore, QtGui

from app.verify_dialog import VerifyDialog


class VerifyAction(QtCore.QObject):
    """The Run > Verify an Implementation... action of ``window``; one dialog, kept."""

    def __init__(self, window):
        super().__init__(window)
        self.window = window
        self.dialog: VerifyDialog | None = None
        self.action = QtGui.QAction("&Verify an Implementation…", window)
        self.action.setObjectName("act_verify")
        self.action.setStatusTip("Check a Python conv or conv-gradient function against the "
                                 "exact reference, shrink each failure and say what is wrong")
        self.action.triggered.connect(self.open)

    def open(self) -> VerifyDialog:
        if self.dialog is None:
            self.dialog = VerifyDialog(self.window)
        self.dialog.show()
        self.dialog.raise_()
        self.dialog.activateWindow()
        return self.dialog

    def shutdown(self) -> None:
        """Cancel a sweep and wait for it (a QThread must not be destroyed while it runs)."""
        if self.dialog is not None:
            self.dialog.shutdown()
