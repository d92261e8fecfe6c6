"""Whether a call fits a job's parameters, and the one refusal when it does not.

A job's parameters come from two places: a declaration a worker published
(:class:`~taskq.broker.ops.functions.Declaration`), for a submit by name, or
the function itself, for a submit of a function this process imports
(:func:`parameters_of` reads them as a worker would publish them). Either
way a bad call is refused in the same words, naming the job's signature and
the argument at fault.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Mapping, Sequence
from typing import Any

from taskq import errors
from taskq.broker.client.close_names import did_you_mean
from taskq.broker.ops.functions import Declaration, Parameter

# Stands for a published default, whose value is only known as text.
_HAS_DEFAULT = object()


def check_arguments(
    declaration: Declaration, args: Sequence[Any], kwargs: Mapping[str, Any], *, hint: str = ""
) -> None:
    """Refuse a call its parameters do not take, naming the argument at fault.

    ``hint`` follows the refusal: what the caller most likely meant.
    """
    try:
        _signature(declaration.parameters).bind(*args, **kwargs)
    except TypeError as exc:
        told = _told(exc, declaration, args)
        # inspect names the first fault only; a misspelt keyword is most often a second one.
        unknown = _unknown_keywords(declaration, kwargs)
        if unknown and "unexpected keyword" not in told:
            told += f"; and it takes no keyword argument {', '.join(map(repr, unknown))}"
        told += did_you_mean(unknown, _keywords_left(declaration, kwargs))
        raise errors.InvalidJob(
            f"{declaration.signature()} refuses these arguments: {told}{hint}", field="args"
        ) from None


def parameters_of(function: Any) -> tuple[Parameter, ...]:
    """``function``'s parameters as a declaration publishes them; none if it has no signature."""
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return ()
    return tuple(
        Parameter(
            name=parameter.name,
            kind=parameter.kind.name,
            default=None if parameter.default is parameter.empty else repr(parameter.default),
            annotation=None
            if parameter.annotation is parameter.empty
            else _annotation_text(parameter.annotation),
        )
        for parameter in signature.parameters.values()
    )


def _annotation_text(annotation: Any) -> str:
    # Under `from __future__ import annotations` an annotation is already its text.
    if isinstance(annotation, str):
        return annotation
    return inspect.formatannotation(annotation)


def _unknown_keywords(declaration: Declaration, kwargs: Mapping[str, Any]) -> list[str]:
    """The keywords of ``kwargs`` no parameter takes (none, with a ``**`` parameter)."""
    parameters = declaration.parameters
    if any(each.kind == "VAR_KEYWORD" for each in parameters):
        return []
    named = {each.name for each in parameters if each.kind != "POSITIONAL_ONLY"}
    return [name for name in kwargs if name not in named]


def _keywords_left(declaration: Declaration, kwargs: Mapping[str, Any]) -> list[str]:
    """The parameters a keyword could still name: a misspelt one is most likely one of them."""
    return [
        each.name
        for each in declaration.parameters
        if each.kind in {"POSITIONAL_OR_KEYWORD", "KEYWORD_ONLY"} and each.name not in kwargs
    ]


@functools.lru_cache(maxsize=1024)
def _signature(parameters: tuple[Parameter, ...]) -> inspect.Signature:
    """The signature the published ``parameters`` make: built once, since every submit by
    name binds its call to one (building it cost a single submit 5% of its CPU)."""
    return inspect.Signature(
        [
            inspect.Parameter(
                each.name,
                getattr(inspect.Parameter, each.kind),
                default=inspect.Parameter.empty if each.default is None else _HAS_DEFAULT,
            )
            for each in parameters
        ]
    )


def _told(exc: TypeError, declaration: Declaration, args: Sequence[Any]) -> str:
    """``inspect``'s complaint, naming the parameters where it names none."""
    if str(exc) == "too many positional arguments":
        positional = [
            each.name
            for each in declaration.parameters
            if each.kind in {"POSITIONAL_ONLY", "POSITIONAL_OR_KEYWORD"}
        ]
        return f"{len(args)} positional arguments given, it takes {len(positional)}" + (
            f" ({', '.join(positional)})" if positional else ""
        )
    return str(exc)
