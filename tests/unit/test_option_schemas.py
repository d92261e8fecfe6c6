"""The schemas of a job's ``limits`` and ``retry`` admit exactly what the server accepts.

Each value is sent as ``taskq serve`` reads it (JSON, decoded into the job's
body) and checked as the broker checks a job; the schema is read by a JSON
Schema validator (jsonschema-rs, which came with schemathesis: regular
expressions as ECMA-262 reads them). Both must say the same, for values
near every bound as for values far off.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jsonschema_rs
import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from taskq import errors
from taskq.broker import job_validation
from taskq.broker.client.job_request import JobRequest
from taskq.broker.client.option_schemas import limits_schema, retry_schema
from taskq.broker.limits import FORMS, UNITS, Form, Limits, LimitsInvalid, parse_size, size_pattern
from taskq.retry import POLICY_BOUNDS, RetryPolicy

_LIMITS = jsonschema_rs.Draft202012Validator(limits_schema())
_RETRY = jsonschema_rs.Draft202012Validator(retry_schema())
_MOST_BYTES = int(job_validation.LIMITS["memory_bytes"].high or 0)


def _server_accepts(member: str, value: Any) -> bool:
    """Whether ``taskq serve`` takes a job whose ``member`` is ``value``, sent as JSON."""
    body = msgspec.json.encode({"target": "m:f", member: value})
    try:
        job_validation.check_spec(msgspec.json.decode(body, type=JobRequest).spec("tester"))
    except (errors.InvalidJob, msgspec.ValidationError):
        return False
    return True


def _around(most: float) -> st.SearchStrategy[Any]:
    """Numbers at and past the bounds of a value from 0 to ``most``, and anywhere between."""
    edges = [0, 1, -1, most, most + 1, 0.5, most - 0.5, 10**30, 2**64]
    return st.one_of(
        st.sampled_from(edges),
        st.integers(-10, int(most) + 10),
        st.floats(-1, most * 2),
        st.floats(allow_nan=False, allow_infinity=False),
    )


_SPACE = st.text(alphabet=" \t\n\x0b\x0c\r\xa0\u2003", max_size=2)
# A unit, or near one, in any letter case.
_UNIT = st.sampled_from([*UNITS, "", "kb", "KB", "iB", "Mi", "bytes"]).flatmap(
    lambda unit: st.tuples(*(st.sampled_from([c.lower(), c.upper()]) for c in unit)).map("".join)
)
_NUMERAL = st.one_of(
    st.integers(0, 2**64).map(str),
    st.sampled_from(["0", "00", "٣", "1.5", "-1", "+1", "1_000"]),
    st.tuples(st.integers(0, 3), st.integers(0, 2**64)).map(lambda z: "0" * z[0] + str(z[1])),
)
_SIZE_TEXT = st.one_of(
    st.tuples(_SPACE, _NUMERAL, _SPACE, _UNIT, _SPACE).map("".join),
    st.text(max_size=12),
)


def _parsed_within(text: str) -> bool:
    try:
        return 1 <= parse_size("memory_bytes", text) <= _MOST_BYTES
    except LimitsInvalid:
        return False


@settings(max_examples=400, deadline=None)
@given(_SIZE_TEXT)
def test_the_size_pattern_matches_exactly_the_sizes_read_within_the_ceiling(text: str) -> None:
    pattern = {"type": "string", "pattern": size_pattern(_MOST_BYTES)}
    assert jsonschema_rs.is_valid(pattern, text) is _parsed_within(text), repr(text)


def test_the_largest_size_of_each_unit_is_matched_and_one_more_is_not() -> None:
    pattern = {"type": "string", "pattern": size_pattern(_MOST_BYTES)}
    for unit, factor in UNITS.items():
        most = _MOST_BYTES // factor
        assert jsonschema_rs.is_valid(pattern, f"{most}{unit}")
        assert not jsonschema_rs.is_valid(pattern, f"{most + 1}{unit}")


_LIMIT_VALUE = st.one_of(
    _around(2**63),
    _around(2**31),
    _SIZE_TEXT,
    st.sampled_from([True, None, "", [], {}]),
)


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(st.sampled_from([*FORMS, "memory", "cpu"]), _LIMIT_VALUE, max_size=3))
def test_the_limits_schema_admits_exactly_what_the_server_accepts(limits: dict[str, Any]) -> None:
    assert _LIMITS.is_valid(limits) is _server_accepts("limits", limits), limits


_NAME = st.one_of(
    st.sampled_from(["ValueError", "os.error", "_x.Y_1", "a..b", "1x", "Überfehler", "a.", ""]),
    st.from_regex(r"[A-Za-z_][A-Za-z0-9_.]{0,8}", fullmatch=True),
    st.text(max_size=6),
)
_RETRY_VALUE = st.one_of(
    _around(365 * 86_400),
    _around(1000),
    _NAME,
    st.lists(_NAME, max_size=3),
    st.dictionaries(_NAME, st.integers(), max_size=2),
    st.sampled_from([True, None]),
)


@settings(max_examples=400, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from([*RetryPolicy.__struct_fields__, "delay"]), _RETRY_VALUE, max_size=3
    )
)
def test_the_retry_schema_admits_exactly_what_the_server_accepts(retry: dict[str, Any]) -> None:
    assert _RETRY.is_valid(retry) is _server_accepts("retry", retry), retry


def test_each_limit_is_declared_once_with_its_form_and_its_bounds() -> None:
    assert list(FORMS) == [field.name for field in dataclasses.fields(Limits)]
    assert set(job_validation.LIMITS) == set(FORMS)
    whole = {name for name, form in FORMS.items() if form is not Form.SECONDS}
    assert whole == {f.name for f in dataclasses.fields(Limits) if f.type in ("int", int)}
    assert set(POLICY_BOUNDS) < set(RetryPolicy.__struct_fields__)
