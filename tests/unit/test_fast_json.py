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


@given(st.from_regex(r"-?(0|[1-9][0-9]{0,4})\.[0-9]{15,40}([eE][-+]?[0-9]{1,2})?", fullmatch=True))
def test_long_fractions_decode_to_the_same_float(number: str) -> None:
    # orjson decodes these itself: only integer digit runs need the standard library.
    assert fast_json.loads(f"[{number}]") == json.loads(f"[{number}]")


def test_a_long_fraction_is_not_taken_for_a_long_integer(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(document: object) -> object:
        raise AssertionError(f"decoded by json: {document!r}")

    monkeypatch.setattr(fast_json.json, "loads", refuse)
    frame = b'{"cpu_seconds":0.00032199999999998896,"peak":17158144}'
    assert fast_json.loads(frame) == {"cpu_seconds": 0.00032199999999998896, "peak": 17158144}


@given(json_values)
def test_re_encoding_a_decoded_value_means_what_json_means(value: object) -> None:
    text = fast_json.dumps_decoded(value)
    assert json.loads(text) == json.loads(json.dumps(value))


@pytest.mark.parametrize("number", [math.nan, math.inf, -math.inf])
def test_re_encoding_refuses_what_json_refuses(number: float) -> None:
    # orjson alone would write these as null.
    with pytest.raises(ValueError, match="JSON compliant"):
        fast_json.dumps_decoded({"result": [1, None, number]})


def test_re_encoding_keeps_integers_past_64_bits() -> None:
    assert json.loads(fast_json.dumps_decoded([2**64, -(2**70)])) == [2**64, -(2**70)]


@pytest.mark.parametrize(
    "document",
    [
        "[0.00032199999999998896, 18446744073709551616]",
        "[0.000321999999999988960000000000000001, -9223372036854775809]",
        '{"a": 0.12345678901234567890123, "b": "x", "c": [123456789012345678901234]}',
    ],
)
def test_a_long_integer_after_a_long_fraction_keeps_every_digit(document: str) -> None:
    decoded = fast_json.loads(document)
    assert decoded == json.loads(document)
    assert repr(decoded) == repr(json.loads(document))
