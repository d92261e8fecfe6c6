"""The command line's JSON values: a bad one's refusal says what to write instead."""

from __future__ import annotations

import argparse

import pytest

from taskq.cli import values


def _refusal(text: str) -> str:
    with pytest.raises(argparse.ArgumentTypeError) as caught:
        values.json_value(text)
    return str(caught.value)


@pytest.mark.parametrize(
    ("given", "example"),
    [
        ("a=1", """--kwargs '{"a": 1}'"""),
        ("name=bob", """--kwargs '{"name": "bob"}'"""),
        ("sizes=[1, 2]", """--kwargs '{"sizes": [1, 2]}'"""),
    ],
)
def test_a_keyword_argument_is_pointed_to_kwargs(given: str, example: str) -> None:
    said = _refusal(given)
    assert said.startswith(f"{given!r} is not JSON")
    assert said.endswith(f"keyword arguments go in --kwargs as a JSON object, e.g. {example}")
    assert "JSON quotes" not in said


def test_the_kwargs_example_is_quoted_for_the_shell() -> None:
    assert _refusal("name=it's").endswith("""--kwargs '{"name": "it'"'"'s"}'""")


@pytest.mark.parametrize("given", ["hello", "x y=1", "=1", "1a=2"])
def test_other_words_are_pointed_to_json_quotes(given: str) -> None:
    assert _refusal(given).endswith(f"write strings in JSON quotes, e.g. '\"{given}\"'")
