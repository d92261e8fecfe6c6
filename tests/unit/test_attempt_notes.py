"""taskq.broker.ops.attempt_notes: a job's error told in one short line."""

from __future__ import annotations

from taskq.broker.ops.attempt_notes import ERROR_MESSAGE_CHARS, error_brief


def test_an_error_is_its_type_and_the_first_line_of_its_message() -> None:
    error = {"type": "KeyError", "message": "  'x'\n  in   a\n", "traceback": "Traceback ..."}
    assert error_brief(error) == "KeyError: 'x'"


def test_a_long_message_is_clipped_and_its_spaces_closed_up() -> None:
    said = error_brief({"type": "E", "message": "a  b " + "c" * 200})
    assert said == "E: " + ("a b " + "c" * 200)[: ERROR_MESSAGE_CHARS - 1] + "…"


def test_an_error_without_a_message_or_type_still_names_something() -> None:
    assert error_brief({"type": "Timeout"}) == "Timeout"
    assert error_brief({"message": "gone"}) == "Error: gone"
    assert error_brief(None) == error_brief({}) == ""
