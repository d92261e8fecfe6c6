"""A form that submits a job: target, JSON arguments, queue and priority."""

from __future__ import annotations

import json
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static

from taskq import errors
from taskq.broker import operations
from taskq.broker.client import call_spec, default_submitter
from taskq.broker.records import JobSpec


class SubmitScreen(ModalScreen[JobSpec | None]):
    """Dismisses with a validated job, or None when the user backs out."""

    CSS_PATH = "modal.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss_form", "Back", id="submit-back"),
        Binding("ctrl+s", "submit", "Submit", id="submit-send"),
    ]

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static("Submit a job", classes="dialog-title")
            yield Label("Target (package.module:function)")
            yield Input(placeholder="mypkg.images:resize", id="target")
            yield Label("Arguments: a JSON array, or an object of keyword arguments")
            yield Input(value="[]", id="args")
            with Horizontal(classes="form-row"):
                with Vertical():
                    yield Label("Queue")
                    yield Input(value="default", id="queue")
                with Vertical():
                    yield Label("Priority (higher runs first)")
                    yield Input(value="0", type="integer", id="priority")
            yield Static(id="submit-error")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Submit (ctrl+s)", variant="primary", id="send")
                yield Button("Back (esc)", id="back")

    def on_mount(self) -> None:
        self.query_one("#target", Input).focus()

    def on_input_submitted(self) -> None:
        self.action_submit()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "send":
            self.action_submit()
        else:
            self.dismiss(None)

    def action_dismiss_form(self) -> None:
        self.dismiss(None)

    def action_submit(self) -> None:
        """Validate the form; dismiss with the job, or say what is wrong and stay."""
        try:
            spec = self._spec()
        except (ValueError, errors.InvalidJob) as exc:
            self.query_one("#submit-error", Static).update(Text(str(exc)))
            return
        self.dismiss(spec)

    def _spec(self) -> JobSpec:
        value = {name: self.query_one(f"#{name}", Input).value.strip() for name in _FIELDS}
        try:
            arguments = json.loads(value["args"] or "[]")
        except json.JSONDecodeError as exc:
            raise ValueError(f"arguments are not JSON: {exc}") from exc
        if isinstance(arguments, list):
            args, kwargs = arguments, {}
        elif isinstance(arguments, dict):
            args, kwargs = [], arguments
        else:
            raise ValueError("arguments must be a JSON array or object")
        try:
            priority = int(value["priority"] or "0")
        except ValueError as exc:
            raise ValueError(f"priority must be a whole number, got {value['priority']!r}") from exc
        spec = call_spec(
            value["target"],
            args,
            kwargs,
            queue=value["queue"],
            priority=priority,
            submitter=default_submitter(),
        )
        # The broker's own checks, so a refusal shows here instead of after a request.
        operations.validate_spec(spec)
        return spec


_FIELDS = ("target", "args", "queue", "priority")
