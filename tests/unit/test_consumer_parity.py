"""API parity: ``consumer.Consumer`` is a drop-in for ``confluent_kafka.Consumer``.

Every public method of ``confluent_kafka.Consumer`` (plus ``__enter__``/``__exit__``, which
``with Consumer(...) as c`` uses) must exist on ``consumer.Consumer`` and accept every call that
confluent-kafka documents. confluent-kafka's methods are C functions without introspectable
signatures, so the documented ones come from its type stub ``confluent_kafka/cimpl.pyi``, parsed
with ``ast`` (overloads included). For each documented form the test binds a call with the
required arguments passed positionally, and one with every argument passed by keyword, against
our signature; literal defaults must match too (``poll()`` blocking forever by default is part of
the contract).

A difference is allowed only if it is listed in ``DELIBERATE_DIFFERENCES`` with its reason; a
listed difference that no longer exists fails as well, so the list stays true.

This test checks our class only: with ``KGM_CONSUMER_IMPL=confluent`` it still imports
``consumer.Consumer`` and fails clearly while the facade has not landed.
"""

from __future__ import annotations

import ast
import inspect
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest

#: "method" or "method(param)" -> why we differ on purpose. Keep it short and true.
DELIBERATE_DIFFERENCES: dict[str, str] = {}

#: Dunders applications rely on, besides the public methods.
USED_DUNDERS = ("__enter__", "__exit__")

STUB_PATH = Path(confluent_kafka.__file__).with_name("cimpl.pyi")

_KINDS = inspect.Parameter


@dataclass(frozen=True)
class StubParam:
    name: str
    kind: inspect._ParameterKind
    has_default: bool
    default: Any  # the literal default, or Ellipsis when the stub does not say


def our_consumer_class() -> type:
    try:
        from consumer import Consumer  # lands with the facade (issue #4)
    except ImportError as exc:
        pytest.fail(
            f"consumer.Consumer is missing ({exc}); the parity test checks our facade and "
            "cannot run until it lands"
        )
    return Consumer  # type: ignore[no-any-return]


def _literal(node: ast.expr | None) -> Any:
    if node is None:
        return Ellipsis
    try:
        return ast.literal_eval(node)
    except ValueError:
        return Ellipsis


def _params_of(func: ast.FunctionDef) -> list[StubParam]:
    args = func.args
    params: list[StubParam] = []
    positional = [(a, _KINDS.POSITIONAL_ONLY) for a in args.posonlyargs]
    positional += [(a, _KINDS.POSITIONAL_OR_KEYWORD) for a in args.args]
    first_default = len(positional) - len(args.defaults)
    for index, (arg, kind) in enumerate(positional):
        if index == 0 and arg.arg == "self":
            continue
        has_default = index >= first_default
        default = _literal(args.defaults[index - first_default]) if has_default else Ellipsis
        params.append(StubParam(arg.arg, kind, has_default, default))
    if args.vararg is not None:
        params.append(StubParam(args.vararg.arg, _KINDS.VAR_POSITIONAL, True, Ellipsis))
    for arg, default_node in zip(args.kwonlyargs, args.kw_defaults, strict=True):
        has_default = default_node is not None
        params.append(StubParam(arg.arg, _KINDS.KEYWORD_ONLY, has_default, _literal(default_node)))
    if args.kwarg is not None:
        params.append(StubParam(args.kwarg.arg, _KINDS.VAR_KEYWORD, True, Ellipsis))
    return params


def documented_methods() -> dict[str, list[list[StubParam]]]:
    """Method name -> the parameter lists of each documented form (overloads) in cimpl.pyi."""
    tree = ast.parse(STUB_PATH.read_text())
    cls = next(
        node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "Consumer"
    )
    forms: dict[str, list[list[StubParam]]] = {}
    for node in cls.body:
        if isinstance(node, ast.FunctionDef):
            forms.setdefault(node.name, []).append(_params_of(node))
    return forms


def methods_to_check() -> list[str]:
    public = [n for n in dir(confluent_kafka.Consumer) if not n.startswith("_")]
    return sorted(public) + list(USED_DUNDERS)


def call_forms(params: list[StubParam]) -> list[tuple[list[Any], dict[str, Any]]]:
    """Representative calls of one documented form: required args positionally; all by name."""
    sentinel = object()
    positional: list[Any] = []
    required_keywords: dict[str, Any] = {}
    all_keywords: dict[str, Any] = {}
    for param in params:
        if param.kind in (_KINDS.VAR_POSITIONAL, _KINDS.VAR_KEYWORD):
            continue
        if param.kind == _KINDS.POSITIONAL_ONLY:
            if not param.has_default:
                positional.append(sentinel)
            continue
        all_keywords[param.name] = sentinel
        if not param.has_default:
            if param.kind == _KINDS.POSITIONAL_OR_KEYWORD:
                positional.append(sentinel)
            else:
                required_keywords[param.name] = sentinel
    pos_only = [sentinel for p in params if p.kind == _KINDS.POSITIONAL_ONLY and not p.has_default]
    return [(positional, required_keywords), (pos_only, all_keywords)]


def _positional_names(params: list[StubParam]) -> list[str]:
    kinds = (_KINDS.POSITIONAL_ONLY, _KINDS.POSITIONAL_OR_KEYWORD)
    return [p.name for p in params if p.kind in kinds]


def signature_problems(
    name: str, ours: Any, forms: list[list[StubParam]], *, positional_only: bool = False
) -> list[tuple[str, str]]:
    """``(difference key, description)`` for each way our method departs from the stub."""
    try:
        signature = inspect.signature(ours)
    except (TypeError, ValueError):
        return [(name, f"{name}: our signature cannot be introspected")]
    problems: list[tuple[str, str]] = []
    for params in forms:
        calls = call_forms(params)
        if positional_only:  # the interpreter calls __enter__/__exit__ positionally
            calls = [([object()] * len(_positional_names(params)), {})]
        for args, kwargs in calls:
            try:
                signature.bind(None, *args, **kwargs)  # None stands for self
            except TypeError as exc:
                shown = [*(["<arg>"] * len(args)), *(f"{k}=" for k in kwargs)]
                problems.append((name, f"{name}({', '.join(shown)}) is refused: {exc}"))
        for param in params:
            if param.default is Ellipsis or param.name not in signature.parameters:
                continue
            our_default = signature.parameters[param.name].default
            if our_default != param.default:
                problems.append(
                    (
                        f"{name}({param.name})",
                        f"{name}({param.name}): default {our_default!r}, "
                        f"confluent {param.default!r}",
                    )
                )
    return problems


def test_stub_is_parsed() -> None:
    """Guards the test itself: the stub documents the methods we compare against."""
    forms = documented_methods()
    for name in ("poll", "consume", "subscribe", "commit", "close", "assignment"):
        assert name in forms, f"{name} missing from {STUB_PATH}"
    subscribe = {p.name for p in forms["subscribe"][0]}
    assert {"topics", "on_assign", "on_revoke", "on_lost"} <= subscribe
    assert len(forms["commit"]) >= 6, "commit overloads are read"
    poll_timeout = next(p for p in forms["poll"][0] if p.name == "timeout")
    assert poll_timeout.default == -1


def test_every_confluent_method_exists_with_a_compatible_signature() -> None:
    ours = our_consumer_class()
    forms = documented_methods()
    problems: dict[str, list[str]] = {}
    for name in methods_to_check():
        method = inspect.getattr_static(ours, name, None)
        if method is None:
            problems.setdefault(name, []).append(f"{name}: missing")
            continue
        if name in forms:
            found = signature_problems(
                name, getattr(ours, name), forms[name], positional_only=name in USED_DUNDERS
            )
            for key, problem in found:
                problems.setdefault(key, []).append(problem)
    undeclared = {k: v for k, v in problems.items() if k not in DELIBERATE_DIFFERENCES}
    stale = sorted(k for k in DELIBERATE_DIFFERENCES if k not in problems)
    report = "\n".join(f"  {p}" for v in undeclared.values() for p in v)
    assert not undeclared, (
        "differences from confluent_kafka.Consumer not listed in DELIBERATE_DIFFERENCES:\n" + report
    )
    assert not stale, f"DELIBERATE_DIFFERENCES lists differences that no longer exist: {stale}"


def test_constructor_takes_the_confluent_config_dict() -> None:
    ours = our_consumer_class()
    signature = inspect.signature(ours)
    config = {"bootstrap.servers": "localhost:9092", "group.id": "g"}
    signature.bind(config)  # Consumer(conf), the form every application uses


def test_our_extras_are_read_only_properties() -> None:
    ours = our_consumer_class()
    for name in ("state", "member_epoch"):
        attribute = inspect.getattr_static(ours, name, None)
        assert isinstance(attribute, property), f"consumer.Consumer.{name} must be a property"
        assert attribute.fset is None, f"consumer.Consumer.{name} must be read-only"
