"""Bearer tokens of ``taskq serve``: digests, scopes, and refused configurations."""

from __future__ import annotations

import hashlib

import pytest

from taskq import errors
from taskq.config import TokenSection
from taskq.server.auth import Tokens


def test_a_token_is_known_by_its_digest_and_names_its_caller() -> None:
    digest = hashlib.sha256(b"s3cret").hexdigest()
    tokens = Tokens(
        [
            TokenSection(name="ci", scopes=["read", "submit"], sha256=digest),
            TokenSection(name="ops", scopes=["admin"], token="root-token"),
        ]
    )
    ci = tokens.caller("Bearer s3cret")
    assert ci.name == "ci"
    ci.require("submit")
    with pytest.raises(errors.Forbidden, match="lacks the 'admin' scope"):
        ci.require("admin")
    tokens.caller("bearer root-token").require("submit")  # admin holds every scope
    for header in (None, "", "Bearer", "Basic s3cret", "Bearer S3CRET"):
        with pytest.raises(errors.Unauthorized):
            tokens.caller(header)
    # Over HTTP the way to send a token is the header (a Python client says token=).
    with pytest.raises(errors.Unauthorized) as refused:
        tokens.caller(None)
    assert str(refused.value) == (
        "this server wants a token: send it as 'Authorization: Bearer TOKEN'"
    )


def test_no_tokens_is_an_open_server() -> None:
    tokens = Tokens([])
    assert tokens.open
    tokens.caller(None).require("admin")


@pytest.mark.parametrize(
    ("sections", "message"),
    [
        ([TokenSection(name="a", scopes=["read"])], "exactly one of sha256 and token"),
        (
            [TokenSection(name="a", scopes=["read"], token="x", sha256="0" * 64)],
            "exactly one of sha256 and token",
        ),
        (
            [
                TokenSection(name="a", scopes=["read"], token="x"),
                TokenSection(name="a", scopes=["read"], token="y"),
            ],
            "named twice",
        ),
    ],
)
def test_a_bad_token_list_is_refused(sections: list[TokenSection], message: str) -> None:
    with pytest.raises(errors.ConfigError, match=message):
        Tokens(sections)
