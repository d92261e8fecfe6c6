"""A form that submits a job: target, JSON arguments, queue and priority.

The jobs workers declare are offered as the target is typed; a declared
target shows its signature, fills in its declared queue and priority, and
its arguments are checked against its parameters before the form closes.
A target no worker declares is refused, with the closest declared names, as
``taskq submit`` refuses it, unless the user ticks "unchecked".

The form fits an 80x24 terminal. Its error line and buttons are docked to the
bottom of the dialog, so they stay on screen however the dialog is squeezed:
when the terminal is too short for every field, the fields scroll instead.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.suggester import SuggestFromList
from textual.widgets import Button, Checkbox, Input, Label, Static

from taskq import errors
from taskq.app.source import SOURCE_ERRORS
from taskq.broker.client import declarations
from taskq.broker.client.client import (
    DeclaredFunction,
    call_spec,
    default_submitter,
    validate_spec,
)
from taskq.broker.records import JobSpec


@dataclass(frozen=True, slots=True)
class Problem:
    """What is wrong with the form, and the field to fix (None: no one field)."""

    field: str | None
    message: str


class SubmitScreen(ModalScreen[JobSpec | None]):
    """Dismisses with a validated job, or None when the user backs out.

    ``declared`` reads the jobs workers declare (in the background: the form
    opens at once, and offers them once read).
    """

    CSS_PATH = "modal.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss_form", "Back", id="submit-back"),
        Binding("ctrl+s", "submit", "Submit", id="submit-send"),
    ]

    def __init__(
        self, declared: Callable[[], Awaitable[Sequence[DeclaredFunction]]] | None = None
    ) -> None:
        super().__init__()
        self._read_declared = declared
        self.declared: dict[str, DeclaredFunction] = {}
        # Whether the declared jobs were read (a target is refused as undeclared only then).
        self.read = False
        self._unread = "the declared jobs are being read: submit again in a moment"
        # The queue and priority last filled in from a declaration: the user's own stay.
        self._filled = {"queue": "default", "priority": "0"}

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="dialog", id="submit-form"):
            yield Static("Submit a job", classes="dialog-title")
            yield Label(_TARGET_LABEL, id="target-label")
            yield Input(placeholder="mypkg.images:resize", id="target")
            yield Checkbox(_UNCHECKED_LABEL, id="unchecked")
            yield Label("Arguments: a JSON array, or an object of keyword arguments")
            yield Input(value="[]", id="args")
            with Horizontal(classes="form-row"):
                with Vertical(classes="form-field"):
                    yield Label("Queue")
                    yield Input(value="default", id="queue")
                with Vertical(classes="form-field"):
                    yield Label("Priority (higher runs first)")
                    yield Input(value="0", type="integer", id="priority")
            # Last in the focus order, but docked to the dialog's bottom edge (see modal.tcss).
            with Vertical(id="submit-footer"):
                yield Static(id="submit-error")
                with Horizontal(classes="dialog-buttons"):
                    yield Button("Submit (ctrl+s)", variant="primary", id="send")
                    yield Button("Back (esc)", id="back")

    def on_mount(self) -> None:
        self.query_one("#target", Input).focus()
        if self._read_declared is not None:
            self.run_worker(self._offer_declared(self._read_declared), exclusive=True)

    async def _offer_declared(
        self, read: Callable[[], Awaitable[Sequence[DeclaredFunction]]]
    ) -> None:
        try:
            functions = await read()
        except SOURCE_ERRORS as exc:
            # Targets cannot be checked: only an unchecked submit goes.
            self._unread = f"cannot read the declared jobs ({exc})"
            return
        self.declared = {function.name: function for function in functions}
        self.read = True
        target = self.query_one("#target", Input)
        target.suggester = SuggestFromList(sorted(self.declared), case_sensitive=True)
        self._describe(target.value.strip())

    def on_input_submitted(self) -> None:
        self.action_submit()

    def on_input_changed(self, event: Input.Changed) -> None:
        # An edited field may be right now; the next submit says if it is not.
        event.input.remove_class("-problem")
        if event.input.id == "target":
            self._describe(event.value.strip())

    def _describe(self, target: str) -> None:
        """Show the declared target's signature, and fill in its queue and priority."""
        function = self.declared.get(target)
        label = self.query_one("#target-label", Label)
        if function is None:
            known = self.declared and target and ":" in target
            label.update(f"{_TARGET_LABEL}: no worker declares it" if known else _TARGET_LABEL)
            return
        label.update(f"Target: {function.signature}")
        declared = {
            "queue": function.queue,
            "priority": str(function.options.get("priority", 0)),
        }
        for name, value in declared.items():
            field = self.query_one(f"#{name}", Input)
            if field.value.strip() == self._filled[name]:
                field.value = value
                self._filled[name] = value

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "send":
            self.action_submit()
        else:
            self.dismiss(None)

    def action_dismiss_form(self) -> None:
        self.dismiss(None)

    def action_submit(self) -> None:
        """Validate the form; dismiss with the job, or say what is wrong and stay.

        Every bad field is marked and named on the error line, in form order,
        and the cursor goes to the first of them.
        """
        values = {name: self.query_one(f"#{name}", Input).value.strip() for name in _FIELDS}
        declared = self.declared.get(values["target"])
        spec, problems = _check(values, declared)
        if spec is not None and declared is None and not self.query_one(Checkbox).value:
            spec, problems = None, [Problem("target", self._undeclared(values["target"]))]
        blamed = {problem.field for problem in problems}
        for name in _FIELDS:
            self.query_one(f"#{name}", Input).set_class(name in blamed, "-problem")
        if spec is not None:
            self.dismiss(spec)
            return
        message = "\n".join(problem.message for problem in problems)
        self.query_one("#submit-error", Static).update(Text(message))
        first = next((name for name in _FIELDS if name in blamed), None)
        if first is not None:
            self.query_one(f"#{first}", Input).focus()

    def _undeclared(self, target: str) -> str:
        """Why a target no worker declares is refused, and how to submit it anyway."""
        if self._read_declared is not None and not self.read:
            return f"{self._unread}; or tick unchecked to submit {target} as it is"
        opt_out = "tick unchecked to submit it anyway"
        return str(declarations.unknown_name(target, sorted(self.declared), opt_out))


_FIELDS = ("target", "args", "queue", "priority")
_TARGET_LABEL = "Target (package.module:function)"
_UNCHECKED_LABEL = "unchecked: submit even if no worker declares it"

# The form's field for each field a broker refusal names (InvalidJob.field).
_FORM_FIELD = {
    "target": "target",
    "payload": "args",
    "args": "args",
    "kwargs": "args",
    "queue": "queue",
    "priority": "priority",
}


def _check(
    values: dict[str, str], declared: DeclaredFunction | None = None
) -> tuple[JobSpec | None, list[Problem]]:
    """The job the form describes, or None and every problem found, in form order.

    A ``declared`` target's options are the job's, under the form's queue and
    priority, and its arguments must fit its parameters.
    """
    problems: list[Problem] = []
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    try:
        args, kwargs = _arguments(values["args"])
    except ValueError as exc:
        problems.append(Problem("args", str(exc)))
    priority = 0
    try:
        priority = int(values["priority"] or "0")
    except ValueError:
        message = f"priority must be a whole number, got {values['priority']!r}"
        problems.append(Problem("priority", message))
    if declared is not None and not problems:
        try:
            declarations.check_listed_arguments(declared, args, kwargs)
        except errors.InvalidJob as exc:
            problems.append(Problem("args", str(exc)))
    options = dict(declared.options) if declared is not None else {}
    try:
        spec = call_spec(
            values["target"],
            args,
            kwargs,
            **{
                **options,
                "queue": values["queue"],
                "priority": priority,
                "submitter": default_submitter(),
            },
        )
    except errors.InvalidJob as exc:
        # call_spec checks the target only; the broker's checks need a whole job.
        problems.insert(0, Problem("target", str(exc)))
        return None, problems
    if problems:
        return None, problems
    try:
        # The broker's own checks, so a refusal shows here instead of after a request.
        validate_spec(spec)
    except errors.InvalidJob as exc:
        return None, [Problem(_FORM_FIELD.get(exc.field or ""), str(exc))]
    return spec, []


def _arguments(text: str) -> tuple[list[Any], dict[str, Any]]:
    """Positional and keyword arguments from the form's JSON (empty: no arguments)."""
    try:
        arguments = json.loads(text or "[]")
    except json.JSONDecodeError as exc:
        raise ValueError(f"arguments are not JSON: {exc}") from exc
    if isinstance(arguments, list):
        return arguments, {}
    if isinstance(arguments, dict):
        return [], arguments
    raise ValueError("arguments must be a JSON array or object")
