"""A DataTable kept in step with fresh rows by key, never cleared under the reader.

Each poll hands :meth:`KeyedTable.sync` the rows as they should be; only the
difference is applied (changed cells updated, vanished rows removed, new rows
added, then the order fixed), and the cursor stays on the row it was on.

The table also sizes its columns to the room it has: each column is as wide
as its widest cell when they all fit, and only when they do not is text cut,
in the columns that allow it (see :func:`fit_widths`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from rich.cells import cell_len
from rich.text import Text
from textual import events
from textual.widgets import DataTable

from taskq.app import formatting


@dataclass(frozen=True, slots=True)
class Column:
    """A column: its key, its heading, its usual width, and where its text may be cut.

    ``width`` is kept for a column whose cells are narrower, so the layout
    does not jump as rows come and go; a column with wider cells grows to
    them. When the table has too little room, a column with ``elide`` set
    gives up width down to ``width``, its cells cut there; one without it is
    never cut. A column ``cut_first`` (``elide`` set too) holds what matters
    less than the rest of its row (what a worker takes and may run, beside
    which worker it is): it gives way before any other is cut, down to the
    width of its heading.
    """

    key: str
    label: str
    width: int
    elide: formatting.Elide | None = None
    cut_first: bool = False


@dataclass(frozen=True, slots=True)
class TableRow:
    """A row as it should be shown: its key and one cell per column, whole."""

    key: str
    cells: tuple[Text, ...]


def fit_widths(columns: Sequence[Column], natural: Sequence[int], room: int) -> list[int]:
    """The width of each column, given the width of its widest cell, in ``room`` cells.

    Each column gets the larger of its usual and its natural width. Over
    ``room``, blank space goes first (no column narrower than its cells), then
    the columns cut first give up width, the widest first, down to their
    headings; then the other columns that may be cut, down to their usual
    width; if that is still too wide, the table scrolls sideways.
    """
    pairs = list(zip(columns, natural, strict=True))
    widths = [max(column.width, width) for column, width in pairs]
    uncut = list(natural)
    first_cut = [cell_len(column.label) if column.cut_first else width for column, width in pairs]
    cut = [
        max(min(column.width, width), cell_len(column.label))
        if column.elide and not column.cut_first
        else floor
        for (column, width), floor in zip(pairs, first_cut, strict=True)
    ]
    for floors in (uncut, first_cut, cut):
        excess = sum(widths) - room
        while excess > 0:
            above = [index for index, width in enumerate(widths) if width > floors[index]]
            if not above:
                break
            widest = max(above, key=lambda index: widths[index])
            widths[widest] -= 1
            excess -= 1
    return widths


class KeyedTable(DataTable[Text]):
    """A row-cursor table whose subclasses declare ``COLUMNS`` and call :meth:`sync`."""

    COLUMNS: ClassVar[Sequence[Column]] = ()

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes, cursor_type="row", zebra_stripes=True)
        # The rows as last given, cells whole: refitted whenever the room changes.
        self._given: dict[str, TableRow] = {}
        self._widths: list[int] = []

    def on_mount(self) -> None:
        self.sync([])  # makes the columns, fitted to the room before any row comes
        # A vertical scrollbar, shown once the rows outgrow the table, takes
        # room from the columns without resizing the table.
        self.watch(self, "show_vertical_scrollbar", self._refit, init=False)

    def on_resize(self, _: events.Resize) -> None:
        self._refit()

    def _refit(self) -> None:
        # More room lets cut cells grow back; less makes some give way.
        self.sync(list(self._given.values()))

    @property
    def cursor_key(self) -> str | None:
        """The key of the row under the cursor, or None when the table is empty."""
        if not self.row_count:
            return None
        value = self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value
        return str(value) if value is not None else None

    def row_keys(self) -> list[str]:
        """The row keys in display order."""
        return [str(row.key.value) for row in self.ordered_rows]

    def cell_text(self, key: str, column: str) -> str:
        """The whole plain text of one cell, even where the table shows it cut."""
        index = [each.key for each in self.COLUMNS].index(column)
        return self._given[key].cells[index].plain

    def sync(self, rows: Sequence[TableRow]) -> None:
        """Make the table show ``rows`` in this order, touching only what changed."""
        self._given = {row.key: row for row in rows}
        widths = self._fit(rows)
        fitted = [self._cut(row, widths) for row in rows]
        if widths != self._widths:
            # DataTable has no way to resize a column in place: the columns
            # are made again, which happens only when the room or the widest
            # cell of a column changes.
            self._widths = widths
            self._refill(fitted, columns=True)
            return
        cursor_key = self.cursor_key
        wanted = {row.key for row in fitted}
        if not wanted.intersection(self.row_keys()):
            # Nothing shown stays (a new filter or page): no row under the cursor
            # to keep, and refilling at once is far cheaper than row by row.
            self._refill(fitted, columns=False)
            return
        for key in [key for key in self.row_keys() if key not in wanted]:
            self.remove_row(key)
        for row in fitted:
            if row.key in self.rows:
                self._update(row)
            else:
                self.add_row(*row.cells, key=row.key)
        order = [row.key for row in fitted]
        if self.row_keys() != order:
            self._reorder(order)
        self._keep_cursor(cursor_key)

    def _fit(self, rows: Sequence[TableRow]) -> list[int]:
        natural = [
            max([cell_len(column.label), *(row.cells[index].cell_len for row in rows)])
            for index, column in enumerate(self.COLUMNS)
        ]
        padding = 2 * self.cell_padding * len(self.COLUMNS)
        return fit_widths(self.COLUMNS, natural, self.scrollable_content_region.width - padding)

    def _cut(self, row: TableRow, widths: Sequence[int]) -> TableRow:
        cells = tuple(
            formatting.elide(cell, width, column.elide) if column.elide else cell
            for column, cell, width in zip(self.COLUMNS, row.cells, widths, strict=True)
        )
        return TableRow(key=row.key, cells=cells)

    def _refill(self, rows: Sequence[TableRow], *, columns: bool) -> None:
        cursor_key = self.cursor_key
        self.clear(columns=columns)
        if columns:
            for column, width in zip(self.COLUMNS, self._widths, strict=True):
                self.add_column(column.label, width=width, key=column.key)
        for row in rows:
            self.add_row(*row.cells, key=row.key)
        self._keep_cursor(cursor_key)

    def _keep_cursor(self, key: str | None) -> None:
        if key is not None and key in self.rows:
            index = self.get_row_index(key)
            if index != self.cursor_row:
                self.move_cursor(row=index, animate=False, scroll=False)

    def _update(self, row: TableRow) -> None:
        for column, cell in zip(self.COLUMNS, row.cells, strict=True):
            if not _same(self.get_cell(row.key, column.key), cell):
                self.update_cell(row.key, column.key, cell)

    def _reorder(self, order: list[str]) -> None:
        # DataTable.sort hands the key function cells, not row keys; the cell
        # objects of the first column are the ones stored, so their identity
        # leads back to each row's wanted position.
        first = self.COLUMNS[0].key
        position = {id(self.get_cell(key, first)): index for index, key in enumerate(order)}
        self.sort(first, key=lambda cell: position[id(cell)])


def _same(old: Text, new: Text) -> bool:
    # Text equality ignores the base style, so a recoloured cell (a worker
    # gone lost, a theme switch) would otherwise keep its old colour.
    return old.plain == new.plain and old.style == new.style and old.spans == new.spans
