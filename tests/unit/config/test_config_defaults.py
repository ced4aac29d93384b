"""One configuration story: every default is written once, in the key table (``_config/spec``).

The configuration dataclasses, the member core's ``MemberConfig``, the runtime's settings and
connection classes, and the Spark spec read their defaults from the table; these tests fail when a
default is written again anywhere else (as a literal) or differs from the table.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import consumer
from consumer._client.settings import cluster_settings, member_config
from consumer._config.spec import SPECS, spec_default
from consumer._runtime.background import ClusterSettings
from consumer._runtime.cluster import ClusterClient
from consumer._runtime.connection import BrokerConnection
from consumer._runtime.retry import CONNECT_RETRY, RetryPolicy
from consumer.config import ConsumerConfig, SecurityConfig, parse_config
from consumer.member import MemberConfig
from consumer.spark._spec import GroupSpec

PACKAGE = Path(consumer.__file__).parent
SPEC_FILE = PACKAGE / "_config" / "spec.py"

#: Settings named differently from their configuration key.
RENAMED: dict[str, str] = {
    "rebalance_timeout_ms": "max.poll.interval.ms",
    "auto_commit": "enable.auto.commit",
    "connect_timeout_ms": "socket.connection.setup.timeout.ms",
    "request_timeout_ms": "socket.timeout.ms",
    "initial_backoff_ms": "reconnect.backoff.ms",
    "max_backoff_ms": "reconnect.backoff.max.ms",
    "protocol": "security.protocol",
}
#: Every setting name that stands for a key with a default -> that key.
SETTING_KEYS: dict[str, str] = {
    name: key
    for name, key in {key.replace(".", "_"): key for key in SPECS}.items() | RENAMED.items()
    if SPECS[key].default is not None
}


def dataclass_defaults(cls: type) -> dict[str, object]:
    return {
        f.name: f.default for f in dataclasses.fields(cls) if f.default is not dataclasses.MISSING
    }


def parameter_defaults(function: Callable[..., object]) -> dict[str, object]:
    return {
        name: parameter.default
        for name, parameter in inspect.signature(function).parameters.items()
        if parameter.default is not inspect.Parameter.empty
    }


@pytest.mark.parametrize(
    "defaults",
    [
        pytest.param(dataclass_defaults(ConsumerConfig), id="ConsumerConfig"),
        pytest.param(dataclass_defaults(SecurityConfig), id="SecurityConfig"),
        pytest.param(dataclass_defaults(MemberConfig), id="MemberConfig"),
        pytest.param(dataclass_defaults(ClusterSettings), id="ClusterSettings"),
        pytest.param(dataclass_defaults(RetryPolicy), id="RetryPolicy"),
        pytest.param(parameter_defaults(BrokerConnection), id="BrokerConnection"),
        pytest.param(parameter_defaults(ClusterClient), id="ClusterClient"),
    ],
)
def test_defaults_are_the_key_tables(defaults: dict[str, object]) -> None:
    compared = {name: value for name, value in defaults.items() if name in SETTING_KEYS}
    assert compared, "nothing compared: the names no longer match the table"
    assert compared == {name: SPECS[SETTING_KEYS[name]].default for name in compared}


def test_member_config_defaults_are_a_default_consumers() -> None:
    config = parse_config({"bootstrap.servers": "b:9092", "group.id": "g"})
    assert member_config(config) == MemberConfig(group_id="g")
    settings = cluster_settings(config)
    assert settings == ClusterSettings(
        "b:9092", config.client_id, security=config.security, logger=None
    )
    assert (CONNECT_RETRY.initial_backoff_ms, CONNECT_RETRY.max_backoff_ms) == (
        settings.reconnect_backoff_ms,
        settings.reconnect_backoff_max_ms,
    )


def test_spark_rebalance_timeout_defaults_to_the_tables() -> None:
    spec = GroupSpec.create(bootstrap_servers="b:9092", group_id="g", topics="t")
    assert spec.rebalance_timeout_s * 1000 == SPECS["max.poll.interval.ms"].default


def test_spec_default_checks_the_type() -> None:
    assert spec_default("max.poll.interval.ms", int) == 300_000
    assert spec_default("enable.auto.commit", bool) is True
    with pytest.raises(TypeError, match="auto.offset.reset"):
        spec_default("auto.offset.reset", int)
    with pytest.raises(TypeError, match="enable.auto.commit"):
        spec_default("enable.auto.commit", int)


def literal_defaults(tree: ast.AST) -> Iterator[tuple[int, str, object]]:
    """(line, setting, value) of every setting given a literal default: a class field, a
    parameter default, or ``mapping.get("dotted.key", literal)``."""
    for node in ast.walk(tree):
        pairs: list[tuple[str, ast.expr | None]] = []
        if isinstance(node, ast.ClassDef):
            pairs = [
                (statement.target.id, statement.value)
                for statement in node.body
                if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name)
            ]
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            positional = node.args.posonlyargs + node.args.args
            with_default = positional[len(positional) - len(node.args.defaults) :]
            pairs = [(a.arg, d) for a, d in zip(with_default, node.args.defaults, strict=True)]
            pairs += [
                (a.arg, d) for a, d in zip(node.args.kwonlyargs, node.args.kw_defaults, strict=True)
            ]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and len(node.args) == 2
            and isinstance(node.args[0], ast.Constant)
            and node.args[0].value in SPECS
        ):
            pairs = [(str(node.args[0].value).replace(".", "_"), node.args[1])]
        for name, value in pairs:
            if name in SETTING_KEYS and isinstance(value, ast.Constant) and value.value is not None:
                yield value.lineno, name, value.value


def test_no_default_is_written_outside_the_key_table() -> None:
    repeated = [
        f"{path.relative_to(PACKAGE)}:{line}: {name} = {value!r}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != SPEC_FILE
        for line, name, value in literal_defaults(ast.parse(path.read_text(encoding="utf-8")))
    ]
    assert repeated == [], "read these defaults from consumer._config.spec instead"


def test_the_scan_finds_a_repeated_default() -> None:
    source = """
class Settings:
    max_poll_interval_ms: int = 300_000
    group_id: str = "g"

def connect(host: str, *, connect_timeout_ms: int = 30_000, other: int = 5) -> None: ...

timeout = config.get("socket.timeout.ms", 60_000)
"""
    found = [(name, value) for _, name, value in literal_defaults(ast.parse(source))]
    assert sorted(found) == [
        ("connect_timeout_ms", 30_000),
        ("max_poll_interval_ms", 300_000),
        ("socket_timeout_ms", 60_000),
    ]
