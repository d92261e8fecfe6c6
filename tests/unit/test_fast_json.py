"""The fast JSON codec gives the standard library's answers, including at orjson's edges."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from taskq import fast_json

# What a job may pass or return: any JSON value, with integers of any size.
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)


@given(json_values)
def test_a_value_survives_encoding_and_decoding_unchanged(value: object) -> None:
    assert fast_json.loads(fast_json.dumps(value)) == value


@given(json_values)
def test_decoding_agrees_with_the_standard_library(value: object) -> None:
    document = json.dumps(value)
    assert fast_json.loads(document) == json.loads(document)
    assert fast_json.loads(document.encode()) == json.loads(document)


@pytest.mark.parametrize(
    "integer", [2**63 - 1, 2**64 - 1, 2**64, -(2**63), -(2**63) - 1, 10**30, -(10**40)]
)
def test_integers_past_64_bits_keep_every_digit(integer: int) -> None:
    # orjson alone decodes 2**64 and up as a float and refuses to encode them.
    document = fast_json.dumps({"args": [integer]})
    decoded = fast_json.loads(document)
    assert decoded == {"args": [integer]}
    assert type(decoded["args"][0]) is int


def test_what_orjson_refuses_gets_the_standard_librarys_answer() -> None:
    assert math.isnan(fast_json.loads("NaN"))
    assert fast_json.loads('"\\ud800"') == "\ud800"
    assert fast_json.loads(fast_json.dumps({1: "a"})) == {"1": "a"}
    assert fast_json.loads(fast_json.dumps("\ud800")) == "\ud800"
    with pytest.raises(json.JSONDecodeError):
        fast_json.loads(b"{not json")


def test_default_encodes_what_json_cannot() -> None:
    class Opaque:
        def __str__(self) -> str:
            return "opaque"

    assert fast_json.loads(fast_json.dumps({"x": Opaque()}, default=str)) == {"x": "opaque"}
    assert fast_json.dumps_text([1, "é"]) == '[1,"é"]'
