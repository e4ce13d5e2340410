"""The report of a sweep in the Verify dialog (:mod:`app.verify_dialog`): a summary line, the
pass counts per edge class, the failure groups and the failures as tables, and each group's
minimal failure with its diagnosis and one-line reproduction (the terminal summary of
``gradblocks verify``, as widgets).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6 import QtCore, QtGui, QtWidgets

from app.message_label import MessageLabel

if TYPE_CHECKING:
    from engine.verify.report import VerifyReport

#: Failure rows shown in the table (the tab says how many there are).
SHOWN_FAILURES = 1000
CLASS_COLUMNS = ("edge class", "tried", "passed", "unsupported", "failed")
GROUP_COLUMNS = ("verdict", "cases", "elements", "diagnosis", "message")
FAILURE_COLUMNS = ("verdict", "edge class", "dtype", "elements", "max abs error",
                   "max rel error", "message")
BAD = QtGui.QColor("#d04040")


def _number(v: float | None) -> str:
    return "" if v is None else f"{v:.3g}"


def _item(text: str, tip: str = "", bad: bool = False) -> QtWidgets.QTableWidgetItem:
    item = QtWidgets.QTableWidgetItem(text)
    if tip:
        item.setToolTip(tip)
    if bad:
        item.setForeground(BAD)
    return item


def summary(report: VerifyReport) -> str:
    """The report's first line: what was verified, how many cases, how many failed."""
    state = "every case passed" if report.ok else f"{report.failed} failed"
    return (f"{report.target} as {report.convention} {report.op} ({', '.join(report.dtypes)}): "
            f"{report.cases} cases, {state}, {report.unsupported} unsupported "
            f"({report.seconds:.1f} s, seed {report.seed})")


def minimal_text(report: VerifyReport) -> str:
    """Each failure group (the most severe first) with its minimal case, diagnosis and one-line
    reproduction; or that every case passed."""
    if report.ok:
        return (f"Every case passed ({report.cases} tried, {report.unsupported} unsupported): "
                "no failure to shrink.")
    return "\n\n".join("\n".join(line.strip() for line in report.group_lines(m))
                       for m in report.minimal_failures)


def _table(columns: tuple[str, ...]) -> QtWidgets.QTableWidget:
    table = QtWidgets.QTableWidget(0, len(columns))
    table.setHorizontalHeaderLabels(list(columns))
    table.setEditTriggers(QtWidgets.QAbstractItemView.NoEditTriggers)
    table.setSelectionBehavior(QtWidgets.QAbstractItemView.SelectRows)
    table.verticalHeader().hide()
    table.verticalHeader().setDefaultSectionSize(table.fontMetrics().height() + 8)
    table.horizontalHeader().setStretchLastSection(True)
    return table


class ReportView(QtWidgets.QWidget):
    """``summary_label``, ``tabs`` (``class_table``, ``group_table``, ``failure_table``) over
    ``minimal_edit``."""

    def __init__(self, parent: QtWidgets.QWidget | None = None):
        super().__init__(parent)
        self.summary_label = MessageLabel()
        self.class_table = _table(CLASS_COLUMNS)
        self.group_table = _table(GROUP_COLUMNS)
        self.failure_table = _table(FAILURE_COLUMNS)
        self.tabs = QtWidgets.QTabWidget()
        self.tabs.addTab(self.class_table, "Edge classes")
        self.tabs.addTab(self.failure_table, "Failures")
        self.tabs.addTab(self.group_table, "Groups")
        self.minimal_edit = QtWidgets.QPlainTextEdit(readOnly=True)
        self.minimal_edit.setPlaceholderText("The minimal failure and its diagnosis show here.")
        split = QtWidgets.QSplitter(QtCore.Qt.Vertical)
        split.addWidget(self.tabs)
        split.addWidget(self.minimal_edit)
        split.setSizes([430, 200])
        box = QtWidgets.QVBoxLayout(self)
        box.setContentsMargins(0, 0, 0, 0)
        box.addWidget(self.summary_label)
        box.addWidget(split, 1)

    def show_report(self, report: VerifyReport | None) -> None:
        """Fill the tables and the minimal failures' text (None: clear them)."""
        from engine.verify.values import array_sizes

        self.class_table.setRowCount(0)
        self.failure_table.setRowCount(0)
        self.group_table.setRowCount(0)
        self.tabs.setTabText(1, "Failures")
        self.tabs.setTabText(2, "Groups")
        if report is None:
            self.summary_label.setText("")
            self.minimal_edit.setPlainText("")
            return
        self.summary_label.setText(summary(report))
        self.class_table.setRowCount(len(report.classes) + len(report.excluded))
        for r, (name, row) in enumerate(report.classes.items()):
            failed = row["tried"] - row["passed"] - row["unsupported"]
            for c, v in enumerate((name, row["tried"], row["passed"], row["unsupported"],
                                   failed)):
                self.class_table.setItem(r, c, _item(str(v), bad=failed > 0))
        from engine.verify.report import EXCLUDED  # loaded with the report itself

        for r, name in enumerate(report.excluded, len(report.classes)):
            for c, v in enumerate((name, "0", "-", EXCLUDED, "-")):
                self.class_table.setItem(r, c, _item(v))
        shown = report.failures[:SHOWN_FAILURES]
        self.failure_table.setRowCount(len(shown))
        for r, f in enumerate(shown):
            j = f.to_json()
            cells = (f.verdict.verdict, f.case.edge, f.case.dtype,
                     str(sum(array_sizes(f.case))), _number(f.verdict.max_abs_error),
                     _number(f.verdict.max_rel_error), j["message"])
            for c, text in enumerate(cells):
                self.failure_table.setItem(r, c, _item(text, f"case: {j['case']}"))
        groups = report.minimal_failures
        self.group_table.setRowCount(len(groups))
        for r, m in enumerate(groups):
            f = m.failure
            cells = (f.verdict.verdict, str(m.count), str(m.size),
                     m.diagnosis.id or "(no known mistake)", f.verdict.message)
            for c, text in enumerate(cells):
                self.group_table.setItem(r, c, _item(text, f"reproduce: {report.reproduce(m)}"))
        self.tabs.setTabText(2, f"Groups ({len(groups)})")
        for table in (self.class_table, self.failure_table, self.group_table):
            table.resizeColumnsToContents()
        more = f", the first {SHOWN_FAILURES} shown" if report.failed > SHOWN_FAILURES else ""
        self.tabs.setTabText(1, f"Failures ({report.failed}{more})")
        self.minimal_edit.setPlainText(minimal_text(report))
