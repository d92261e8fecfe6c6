"""Whether a call fits a job's parameters, and the one refusal when it does not.

A job's parameters come from two places: a declaration a worker published
(:class:`~taskq.broker.ops.functions.Declaration`), for a submit by name, or
the function itself, for a submit of a function this process imports
(:func:`parameters_of` reads them as a worker would publish them). Either
way a bad call is refused in the same words, naming the job's signature and
the argument at fault.

A submit by name also checks each argument's value against its parameter's
annotation, where the annotation's text has a meaning that is certain
(:func:`_value_check`): ``"five"`` for ``scale: float`` is refused at once
rather than failing on a worker. Any other annotation takes any value.
"""

from __future__ import annotations

import ast
import functools
import inspect
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from taskq import errors
from taskq.broker.ops.functions import Declaration, Parameter
from taskq.close_names import did_you_mean

# Stands for a published default, whose value is only known as text.
_HAS_DEFAULT = object()


def check_arguments(
    declaration: Declaration, args: Sequence[Any], kwargs: Mapping[str, Any], *, hint: str = ""
) -> None:
    """Refuse a call its parameters do not take, naming the argument at fault.

    ``hint`` follows the refusal: what the caller most likely meant.
    """
    shape = _shape(declaration.parameters)
    try:
        bound = shape.signature.bind(*args, **kwargs)
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
    given = bound.arguments
    for parameter, check in shape.checks:
        # A parameter not given takes its default: the function's own, never checked.
        if parameter.name in given and not check.fits(given[parameter.name]):
            told = _misfit(parameter, check, given[parameter.name])
            raise errors.InvalidJob(
                f"{declaration.signature()} refuses these arguments: {told}{hint}", field="args"
            )


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


class _Shape(NamedTuple):
    """What a call is checked against: the signature it binds to, and the checks of the
    values of the parameters whose annotations have a certain meaning, in their order."""

    signature: inspect.Signature
    checks: tuple[tuple[Parameter, _Check], ...]


@functools.lru_cache(maxsize=1024)
def _shape(parameters: tuple[Parameter, ...]) -> _Shape:
    """The shape the published ``parameters`` make: built once, since every submit by name
    is checked against one (building the signature cost a single submit 5% of its CPU)."""
    signature = inspect.Signature(
        [
            inspect.Parameter(
                each.name,
                getattr(inspect.Parameter, each.kind),
                default=inspect.Parameter.empty if each.default is None else _HAS_DEFAULT,
            )
            for each in parameters
        ]
    )
    checks = []
    for each in parameters:
        check = None if each.annotation is None else _value_check(each.annotation)
        if check is None:
            continue
        # bind gives *args as a tuple of the extra positional values, **kwargs as a dict.
        if each.kind == "VAR_POSITIONAL":
            check = _Items(each.annotation or "", check)
        elif each.kind == "VAR_KEYWORD":
            check = _Values(each.annotation or "", check)
        checks.append((each, check))
    return _Shape(signature, tuple(checks))


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


# The values of an annotation's check: what the Python client is given before JSON
# encoding it, what the command line, the console and the HTTP API decode from JSON.
# A tuple is as good as a list: both are JSON arrays, and the job receives a list.
_ARRAYS = (list, tuple)
_NONE = (type(None),)
# The annotations whose meaning the text alone makes certain, as names (a typing
# alias is known by its usual name, bare or after ``typing.``; after another
# module's name it may be anything). ``int`` takes a bool, as Python's typing
# does (bool is an int's subclass; True is 1 to the job): a worker would run
# such a call, and Python code making it would pass a type checker. ``float``
# takes an int, as PEP 484 says it does. ``bool`` takes only True and False:
# 1 for a flag is refused by a type checker too.
_TYPES: dict[str, tuple[type, ...]] = {
    "int": (int,),
    "float": (int, float),
    "str": (str,),
    "bool": (bool,),
    "list": _ARRAYS,
    "List": _ARRAYS,
    "tuple": _ARRAYS,
    "Tuple": _ARRAYS,
    "dict": (dict,),
    "Dict": (dict,),
}
_TYPING = frozenset({"List", "Tuple", "Dict", "Optional", "Union"})


class _Fault(NamedTuple):
    """The innermost part of a value that does not fit: where it is, it, and what it must be."""

    where: str
    value: Any
    wanted: str


class _Check:
    """The values one annotation takes: :meth:`fits` is the quick verdict of every submit,
    :meth:`fault` says where a refused value goes wrong, for its refusal."""

    shape: tuple[type, ...] = ()
    """What a value that fits is at the outside, for a container: a union's refusal of a
    value of that shape points inside it."""

    def __init__(self, text: str) -> None:
        self.text = text

    def fits(self, value: Any) -> bool:
        raise NotImplementedError

    def fault(self, value: Any, where: str) -> _Fault | None:
        """The innermost part of ``value`` (called ``where``) that does not fit; None: all do."""
        return None if self.fits(value) else _Fault(where, value, self.text)


class _Instance(_Check):
    """A value of one of ``types``: ``int``, ``str | None``, a bare ``list``..."""

    def __init__(self, text: str, types: tuple[type, ...]) -> None:
        super().__init__(text)
        self.types = types

    def fits(self, value: Any) -> bool:
        return isinstance(value, self.types)


class _Union(_Check):
    """A value that any of ``members`` takes, not all of them plain types: ``list[int] | None``.

    Its plain types are tried first, in one isinstance: most often None, the
    value most often given for an ``X | None``."""

    def __init__(self, text: str, members: Sequence[_Check]) -> None:
        super().__init__(text)
        self.members = tuple(members)
        self.types = _plain_types(members)
        self.rest = tuple(each for each in members if not isinstance(each, _Instance))

    def fits(self, value: Any) -> bool:
        if isinstance(value, self.types):
            return True
        for member in self.rest:  # noqa: SIM110 (any() of a generator costs 0.5 us more a call)
            if member.fits(value):
                return True
        return False

    def fault(self, value: Any, where: str) -> _Fault | None:
        if self.fits(value):
            return None
        # [1, "2"] for list[int] | None: the fault is its item, where one member has its shape.
        shaped = [member for member in self.rest if isinstance(value, member.shape)]
        if len(shaped) == 1:
            return shaped[0].fault(value, where)
        return _Fault(where, value, self.text)


class _Items(_Check):
    """An array whose every item ``item`` takes: ``list[X]``, ``tuple[X, ...]``, ``*args: X``."""

    shape = _ARRAYS

    def __init__(self, text: str, item: _Check) -> None:
        super().__init__(text)
        self.item = item

    def fits(self, value: Any) -> bool:
        return isinstance(value, _ARRAYS) and _all_fit(self.item, value)

    def fault(self, value: Any, where: str) -> _Fault | None:
        if not isinstance(value, _ARRAYS):
            return _Fault(where, value, self.text)
        for index, each in enumerate(value):
            fault = self.item.fault(each, f"{where}[{index}]")
            if fault is not None:
                return fault
        return None


class _Fixed(_Check):
    """An array of one item for each of ``items``, in order: ``tuple[int, str]``."""

    shape = _ARRAYS

    def __init__(self, text: str, items: Sequence[_Check]) -> None:
        super().__init__(text)
        self.items = tuple(items)

    def fits(self, value: Any) -> bool:
        return (
            isinstance(value, _ARRAYS)
            and len(value) == len(self.items)
            and all(item.fits(each) for item, each in zip(self.items, value, strict=True))
        )

    def fault(self, value: Any, where: str) -> _Fault | None:
        if not isinstance(value, _ARRAYS) or len(value) != len(self.items):
            return _Fault(where, value, self.text)
        for index, (item, each) in enumerate(zip(self.items, value, strict=True)):
            fault = item.fault(each, f"{where}[{index}]")
            if fault is not None:
                return fault
        return None


class _Values(_Check):
    """A dict whose every value ``value`` takes: ``dict[str, X]``, ``**kwargs: X``.

    Its keys are not checked: JSON's are always strings, and the payload's
    check refuses any other with its own words."""

    shape = (dict,)

    def __init__(self, text: str, value: _Check) -> None:
        super().__init__(text)
        self.value = value

    def fits(self, value: Any) -> bool:
        return isinstance(value, dict) and _all_fit(self.value, value.values())

    def fault(self, value: Any, where: str) -> _Fault | None:
        if not isinstance(value, dict):
            return _Fault(where, value, self.text)
        for key, each in value.items():
            fault = self.value.fault(each, f"{where}[{key!r}]")
            if fault is not None:
                return fault
        return None


_ANYTHING = _Instance("object", (object,))


def _all_fit(check: _Check, values: Iterable[Any]) -> bool:
    """Whether ``check`` takes each of ``values``. Loops, not all() of a generator, which
    cost twice as much on the short arrays jobs are given (0.2 us more for three ints)."""
    if isinstance(check, _Instance):
        types = check.types  # the common list[int]: an isinstance an item, no call of ours
        for each in values:  # noqa: SIM110
            if not isinstance(each, types):
                return False
        return True
    for each in values:  # noqa: SIM110
        if not check.fits(each):
            return False
    return True


@functools.lru_cache(maxsize=1024)
def _value_check(annotation: str) -> _Check | None:
    """The check of the values ``annotation`` (as written) takes; None where its meaning is
    not certain from the text alone (``Path``, ``'Image'``, ``Any``...): any value then."""
    try:
        return _check_of(ast.parse(annotation.strip(), mode="eval").body)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None  # not an expression Python reads: nothing certain in it


def _check_of(node: ast.expr) -> _Check | None:
    if isinstance(node, ast.Constant) and node.value is None:
        return _Instance("None", _NONE)
    text = ast.unparse(node)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _union(text, [node.left, node.right])
    name = _name(node)
    if name in _TYPES:
        return _Instance(text, _TYPES[name])
    if not isinstance(node, ast.Subscript):
        return None
    base = _name(node.value)
    inner = list(node.slice.elts) if isinstance(node.slice, ast.Tuple) else [node.slice]
    if base == "Optional" and len(inner) == 1:
        return _union(text, [inner[0], ast.Constant(None)])
    if base == "Union" and inner:
        return _union(text, inner)
    if base in {"list", "List"} and len(inner) == 1:
        item = _check_of(inner[0])
        return _Instance(text, _ARRAYS) if item is None else _Items(text, item)
    if base in {"tuple", "Tuple"}:
        return _tuple(text, inner)
    if base in {"dict", "Dict"} and len(inner) == 2:
        value = _check_of(inner[1])
        return _Instance(text, (dict,)) if value is None else _Values(text, value)
    return None


def _name(node: ast.expr) -> str:
    """The name ``node`` is, ``typing.`` left off a typing alias; "" for any other node."""
    if isinstance(node, ast.Name):
        return node.id
    if (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "typing"
        and node.attr in _TYPING
    ):
        return node.attr
    return ""


def _union(text: str, nodes: Sequence[ast.expr]) -> _Check | None:
    """A value any of ``nodes`` takes; None (any value) if one of them takes any value."""
    members: list[_Check] = []
    for node in nodes:
        member = _check_of(node)
        if member is None:
            return None
        members.extend(member.members if isinstance(member, _Union) else [member])
    if all(isinstance(member, _Instance) for member in members):
        # One isinstance with every type: the common X | None costs no more than X.
        return _Instance(text, _plain_types(members))
    return _Union(text, members)


def _plain_types(members: Sequence[_Check]) -> tuple[type, ...]:
    """The types of the plain members of a union (those a bare isinstance checks)."""
    return tuple(kind for each in members if isinstance(each, _Instance) for kind in each.types)


def _tuple(text: str, items: Sequence[ast.expr]) -> _Check:
    """``tuple[X, ...]``, ``tuple[X, Y]`` or ``tuple[()]``; an array at least, however odd."""
    ellipsis = [isinstance(each, ast.Constant) and each.value is Ellipsis for each in items]
    if ellipsis == [False, True]:
        item = _check_of(items[0])
        return _Instance(text, _ARRAYS) if item is None else _Items(text, item)
    if any(ellipsis):
        return _Instance(text, _ARRAYS)
    return _Fixed(text, [_check_of(each) or _ANYTHING for each in items])


def _misfit(parameter: Parameter, check: _Check, value: Any) -> str:
    """What a refusal says of ``value`` given for ``parameter``: the parameter, its
    annotation, the value, and where inside the value it goes wrong."""
    fault = check.fault(value, parameter.name) or _Fault(parameter.name, value, check.text)
    said = parameter.text().partition(" =")[0]
    if fault.where == parameter.name:
        return f"{said} was given {_shown(value)}"
    # *args and **kwargs gather what the call gave: name the one at fault alone.
    given = "" if parameter.kind.startswith("VAR_") else f" was given {_shown(value)}"
    return f"{said}{given}: {fault.where} is {_shown(fault.value)}, not {fault.wanted}"


def _shown(value: Any) -> str:
    """``value`` and its type: ``'five', a str``; cut short, as a refused value may be huge."""
    import reprlib  # Imported here, not with the module: only a refusal needs it

    if value is None:
        return "None"
    kind = type(value).__name__
    return f"{reprlib.repr(value)}, {'an' if kind[:1] in 'aeiou' else 'a'} {kind}"
