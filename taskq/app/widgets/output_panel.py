"""An attempt's output in a panel that shows its end and follows it, as ``tail -f`` does."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll

from taskq.app.widgets.panels import AttemptOutput
from taskq.broker.records import Execution

_SCROLL = Binding.Group("Scroll", compact=True)


class OutputPanel(VerticalScroll, inherit_bindings=False):
    """Scrolls one attempt's ``AttemptOutput``: it opens at the end and stays there as the
    output grows, unless the reader has scrolled up; back at the end (``end``), it follows again.
    """

    # Ids, so that the keys can be remapped and the help lists them. The footer has room
    # beside the view's own keys for the arrows only; the border says "end: latest" when
    # the reader has scrolled up.
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "scroll_up", "Scroll up", id="output-up", group=_SCROLL),
        Binding("down", "scroll_down", "Scroll down", id="output-down", group=_SCROLL),
        Binding("pageup", "page_up", "Page up", id="output-page-up", show=False),
        Binding("pagedown", "page_down", "Page down", id="output-page-down", show=False),
        Binding("home", "scroll_home", "First line", id="output-first", show=False),
        Binding("end", "scroll_end", "Latest", id="output-latest", show=False),
    ]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._drawn: tuple[object, ...] | None = None
        self._following = False
        """Whether the panel keeps to the end of the text: it opened there, or the reader
        came back to it, and has not scrolled up since."""

    def compose(self) -> ComposeResult:
        yield AttemptOutput()

    def on_mount(self) -> None:
        self.border_title = "Output"
        self.watch(self, "scroll_y", self._moved, init=False)
        self.watch(self, "has_focus", self._hint, init=False)

    def on_resize(self) -> None:
        # The text or the panel changed size: it may now fit, or no longer. A scroll to the
        # end made before the layout had measured a new text stopped at the old end: the
        # end is known now.
        if self._following and not self.is_vertical_scroll_end:
            self.scroll_end(animate=False, x_axis=False, immediate=True)
        self._hint()

    def _moved(self) -> None:
        """The reader (or the panel itself) scrolled: it follows while at the end."""
        self._following = self.is_vertical_scroll_end
        self._hint()

    def show(self, execution: Execution | None) -> None:
        """Draw ``execution``'s output: at its end if it is another attempt's or the reader
        was at the end, else where the reader scrolled to."""
        drawn = _what_is_drawn(execution)
        if drawn == self._drawn:
            # Unchanged since the last poll: drawing it again would cost a wrap of every line.
            return
        # Another attempt's output opens at its end, whatever was scrolled in the last; the
        # same attempt's is followed only by a reader at its end, not one who scrolled up.
        another = self._drawn is None or drawn[0] != self._drawn[0]
        follow = another or self._following or self.is_vertical_scroll_end
        self._drawn = drawn
        if execution is None:
            self.border_title = "Output"
        else:
            self.border_title = f"Attempt {execution.attempt} on {execution.worker_id}"
        self.query_one(AttemptOutput).show(execution)
        if follow:
            # Once the layout has measured the new text, so as to know where it ends (and
            # again on the resize that measure brings, should it come later). Not
            # Widget.anchor(): it draws a text shorter than the panel at the panel's bottom.
            self._following = True
            self.scroll_end(animate=False, x_axis=False)

    def _hint(self) -> None:
        """Say in the border how to scroll, once there is more than fits."""
        if self.max_scroll_y <= 0:
            hint = ""
        elif not self.has_focus:
            hint = "tab: scroll"
        elif self.scroll_y < self.max_scroll_y:
            hint = "end: latest"
        else:
            hint = ""
        self.border_subtitle = hint


def _what_is_drawn(execution: Execution | None) -> tuple[object, ...]:
    """What the panel draws of ``execution``: when it changes, the panel draws again."""
    if execution is None:
        return (None,)
    return (
        execution.id,
        execution.attempt,
        execution.worker_id,
        execution.finished_at is None,
        execution.error,
        execution.log_tail,
    )
