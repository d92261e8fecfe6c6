"""A submit by name checks each value against its parameter's annotation, where the
annotation's text says for certain what it takes (taskq/broker/client/call_check.py).

The values are those a job would receive: the Python client's before JSON
encoding (a tuple for a list), the command line's, the console's and the
HTTP API's as JSON decodes them. The store's side (nothing written) is in
tests/integration/test_declared_functions.py, over HTTP in
tests/integration/test_http_client.py.
"""

from __future__ import annotations

import json
import pathlib
import re
import typing
from typing import Any

import pytest

from taskq import errors
from taskq.broker.client.call_check import check_arguments, parameters_of
from taskq.broker.ops.functions import Declaration, Parameter

NAME = "lab:resize"
ARG = "POSITIONAL_OR_KEYWORD"


def one(annotation: str | None, kind: str = ARG, default: str | None = None) -> Declaration:
    """``lab:resize(value: ANNOTATION)``."""
    return Declaration(
        name=NAME, parameters=(Parameter("value", kind, default=default, annotation=annotation),)
    )


def refusal(declaration: Declaration, *args: Any, **kwargs: Any) -> str:
    """What the check says of the call; "" when it takes it."""
    try:
        check_arguments(declaration, args, kwargs)
    except errors.InvalidJob as exc:
        refused = exc
    else:
        return ""
    assert refused.field == "args"
    return str(refused)


# Each annotation the check knows, with values it takes and values it refuses.
CHECKED: list[tuple[str, list[Any], list[Any]]] = [
    # True for an int: Python's typing takes it (bool is an int's subclass).
    ("int", [5, -3, 2**70, 0, True], [5.0, "5", None, [5]]),
    # An int for a float, as PEP 484 says; a bool is an int.
    ("float", [0.5, 5, -1e300, False], ["five", "0.5", None, [0.5]]),
    ("str", ["a", ""], [1, None, ["a"], b"a"]),
    # Only True and False for a flag: 1 is refused, as a type checker refuses it.
    ("bool", [True, False], [1, 0, "true", None]),
    ("None", [None], [0, "", "None", []]),
    # A tuple is a JSON array as a list is: the job receives a list either way.
    ("list", [[], [1, "a"], (1, 2)], ["abc", {"a": 1}, None]),
    ("tuple", [[], [1, "a"], (1,)], ["ab", {}, None]),
    ("dict", [{}, {"a": [1]}], [[], "x", None]),
    ("int | None", [None, 3], ["3", 3.5, [3]]),
    ("None | int", [None, 3], ["3"]),
    ("Optional[int]", [None, 3], ["3", 3.5]),
    ("typing.Optional[str]", ["a", None], [1]),
    ("Optional[list[int]]", [None, [1, 2]], [[1, "2"], "12"]),
    ("list[str]", [[], ["a", "b"], ("a",)], [["a", 1], "ab", None, [None]]),
    ("List[int]", [[1]], [["1"]]),
    ("typing.List[float]", [[1, 0.5]], [[1, "0.5"]]),
    ("list[int] | None", [None, [1, 2, 3]], [[1, "2"], 1]),
    ("list[list[int]]", [[], [[1], []]], [[[1, "a"]], [1]]),
    ("dict[str, int]", [{}, {"a": 1}], [{"a": "1"}, [["a", 1]], None]),
    ("Dict[str, int]", [{"a": 1}], [{"a": 1.5}]),
    ("dict[str, list[float]]", [{"a": [1, 0.5]}], [{"a": [1, "x"]}, {"a": 1}]),
    ("dict[str, int | None]", [{"a": None, "b": 2}], [{"a": "2"}]),
    ("tuple[int, ...]", [[1, 2, 3], ()], [[1, "a"], "12"]),
    ("tuple[int, str]", [[1, "a"], (1, "a")], [[1, 2], [1], [1, "a", 2], "1a"]),
    ("Tuple[int, str]", [[1, "a"]], [["a", 1]]),
    ("tuple[()]", [[], ()], [[1]]),
    # A union whose every member is known takes what any of them takes.
    ("int | str", [1, "a"], [1.5, None]),
    ("typing.Union[int, str, None]", [1, "a", None], [1.5]),
    ("bool | None", [True, None], [1]),
]


@pytest.mark.parametrize(
    ("annotation", "taken", "refused"), CHECKED, ids=[each[0] for each in CHECKED]
)
def test_each_known_annotation_takes_its_values_and_refuses_others(
    annotation: str, taken: list[Any], refused: list[Any]
) -> None:
    declaration = one(annotation)
    for value in taken:
        assert refusal(declaration, value) == "", (annotation, value)
    for value in refused:
        told = refusal(declaration, value)
        assert told.startswith(
            f"{NAME}(value: {annotation}) refuses these arguments: value: {annotation} was "
            f"given {value!r}"
        ), (annotation, value, told)


# Annotations whose meaning the text alone does not make certain: any value goes.
UNCHECKED = [
    "Path",
    "pathlib.Path",
    "'Image'",
    "'int'",  # a quoted forward reference, even of a known name
    "Any",
    "typing.Any",
    "object",
    "complex",
    "Union[int, Path]",
    "int | Path",
    "Optional[Path]",
    "Path | None",
    "t.Optional[int]",  # typing imported under another name: may be anything
    "np.ndarray",
    "Literal['a', 'b']",
    "Sequence[int]",
    "Callable[..., int]",
    "Union[()]",
    "Optional[int, str]",
    "not an ( expression",
    "",
]


@pytest.mark.parametrize("annotation", UNCHECKED)
def test_an_annotation_of_uncertain_meaning_takes_any_value(annotation: str) -> None:
    declaration = one(annotation)
    for value in ("five", 5, 0.5, None, True, [1, "a"], {"a": 1}):
        assert refusal(declaration, value) == "", (annotation, value)


def test_a_parameter_without_an_annotation_takes_any_value() -> None:
    """As an older worker's declaration, or a function written without annotations, says."""
    for value in ("five", None, [1]):
        assert refusal(one(None), value) == ""


def test_a_known_container_of_unknown_items_checks_the_container_alone() -> None:
    assert refusal(one("list[Path]"), ["a", 1]) == ""
    assert "value: list[Path] was given 'a'" in refusal(one("list[Path]"), "a")
    assert refusal(one("dict[str, Any]"), {"a": object()}) == ""
    assert "was given [1]" in refusal(one("dict[str, Any]"), [1])
    assert refusal(one("tuple[int, Path]"), [1, "a"]) == ""
    assert "value[0] is 'a', a str, not int" in refusal(one("tuple[int, Path]"), ["a", "a"])


def test_the_refusal_names_the_parameter_its_annotation_and_the_value_given() -> None:
    declaration = Declaration(
        name=NAME,
        parameters=(
            Parameter("path", ARG, annotation="str"),
            Parameter("scale", ARG, annotation="float"),
            Parameter("sizes", "KEYWORD_ONLY", default="None", annotation="list[int] | None"),
        ),
    )
    signature = f"{NAME}(path: str, scale: float, *, sizes: list[int] | None = None)"
    with pytest.raises(errors.InvalidJob) as refused:
        check_arguments(declaration, ("a.png", "five"), {})
    assert str(refused.value) == (
        f"{signature} refuses these arguments: scale: float was given 'five', a str"
    )
    assert refused.value.field == "args"
    # Inside a value, the item at fault is named too.
    assert refusal(declaration, "a.png", 0.5, sizes=[800, "400"]) == (
        f"{signature} refuses these arguments: sizes: list[int] | None was given "
        "[800, '400'], a list: sizes[1] is '400', a str, not int"
    )
    assert refusal(declaration, None, 0.5) == (
        f"{signature} refuses these arguments: path: str was given None"
    )
    # The first parameter at fault, in the signature's order.
    assert ": path: str was given 1, an int" in refusal(declaration, 1, "five")
    # A huge value is cut short.
    assert len(refusal(declaration, "a.png", "x" * 10_000)) < len(signature) + 120


def test_star_parameters_check_each_value_they_gather() -> None:
    declaration = Declaration(
        name=NAME,
        parameters=(
            Parameter("sizes", "VAR_POSITIONAL", annotation="int"),
            Parameter("options", "VAR_KEYWORD", annotation="list[str]"),
        ),
    )
    assert refusal(declaration, 1, 2, 3, a=["x"], b=[]) == ""
    assert refusal(declaration, 1, "2") == (
        f"{NAME}(*sizes: int, **options: list[str]) refuses these arguments: "
        "*sizes: int: sizes[1] is '2', a str, not int"
    )
    assert refusal(declaration, a=["x", 2]).endswith(
        "**options: list[str]: options['a'][1] is 2, an int, not str"
    )


def test_a_default_is_not_checked_and_a_count_fault_is_told_first() -> None:
    declaration = Declaration(
        name=NAME,
        parameters=(
            Parameter("path", ARG, annotation="str"),
            Parameter("width", ARG, default="'auto'", annotation="int"),
        ),
    )
    assert refusal(declaration, "a.png") == ""  # width's default is the function's own
    assert refusal(declaration, path="a.png", width=3) == ""
    assert "width: int was given 'auto'" in refusal(declaration, "a.png", width="auto")
    told = refusal(declaration, 1, 2, 3)
    assert "3 positional arguments given, it takes 2" in told
    assert "was given" not in told


def test_values_as_the_command_line_and_the_http_api_decode_them() -> None:
    """``taskq submit lab:resize 5 '[1,2]'`` and ``"args": [5, [1, 2]]`` give JSON's values:
    an int where a float is asked for is taken; a quoted ``"five"`` is a string."""
    declaration = Declaration(
        name=NAME,
        parameters=(
            Parameter("scale", ARG, annotation="float"),
            Parameter("sizes", ARG, annotation="list[int]"),
        ),
    )
    assert refusal(declaration, *[json.loads(text) for text in ("5", "[1,2]")]) == ""
    assert refusal(declaration, *[json.loads(text) for text in ("0.5", "[1, 2]")]) == ""
    assert "scale: float was given 'five'" in refusal(declaration, json.loads('"five"'), [1])
    assert "sizes[1] is 2.5, a float, not int" in refusal(declaration, 1, json.loads("[1, 2.5]"))


def _annotated(value: Any) -> None:
    """A stand-in whose annotations are the objects a worker imports (no future import)."""


def test_the_text_a_worker_publishes_of_annotation_objects_is_understood() -> None:
    """A worker whose module does not defer annotations publishes inspect's text of each
    object: ``Optional[int]`` for typing's, ``pathlib.Path`` for a class."""
    for annotation, taken, refused in [
        (int, 3, "3"),
        (list[int], [3], ["3"]),
        (typing.Optional[int], None, "3"),  # noqa: UP045 (the typing form's own text)
        (int | None, None, "3"),
        (dict[str, float], {"a": 1}, {"a": "1"}),
        (typing.List[str], ["a"], [1]),  # noqa: UP006
    ]:
        _annotated.__annotations__ = {"value": annotation}
        declaration = Declaration(name=NAME, parameters=parameters_of(_annotated))
        assert refusal(declaration, taken) == "", annotation
        assert re.search(r"value: .+ was given", refusal(declaration, refused)), annotation
    _annotated.__annotations__ = {"value": pathlib.Path}
    declaration = Declaration(name=NAME, parameters=parameters_of(_annotated))
    assert declaration.parameters[0].annotation == "pathlib.Path"
    assert refusal(declaration, 5) == ""
