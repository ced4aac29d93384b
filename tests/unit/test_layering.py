"""The package's layering, checked on the source: which part of ``consumer`` may import which.

Every module under ``consumer/`` is parsed with :mod:`ast` (nothing is imported or run) and each
of its imports (anywhere in the file: module level, functions, ``TYPE_CHECKING`` blocks,
relative or absolute) is checked against :data:`RULES`. The layers, from the inside out:

* ``consumer.member``: the sans-I/O member core; knows no runtime, wire, client or thread.
* ``consumer.share``: the sans-I/O share member core (KIP-932), built on the generic parts of
  ``consumer.member``; the same rule.
* ``consumer._wire``: Kafka messages <-> bytes; knows no member, runtime or client.
* ``consumer._bridge``: what the application thread and the background loop exchange; knows
  the member's types but neither side of the boundary.
* ``consumer._runtime``: the background loop (member + wire + sockets); knows no client.
* ``consumer._client``: the application-facing ``Consumer``; reaches the runtime only through
  the ``consumer._runtime`` package itself (its one constructor), everything else through
  ``consumer._bridge``; never the wire.
* ``consumer.aio``: the asyncio surface; drives a ``Consumer``'s client and bridge parts, never
  the runtime or the wire.
* ``consumer.spark``: built on the public ``Consumer``; of the internals it may use only the
  librdkafka factory.
* ``consumer._group_admin`` (``kgm group``): reads groups through the runtime's cluster client
  and the wire; no member, client or bridge; of the testing kit only the detached broker's state.

Only :mod:`consumer._client.librdkafka` constructs ``confluent_kafka.Consumer``.
"""

from __future__ import annotations

import ast
import pathlib
from dataclasses import dataclass

import pytest

PACKAGE_ROOT = pathlib.Path(__file__).resolve().parents[2] / "consumer"

#: Entry points of the internal layers that the outer ones may import.
RUNTIME_ENTRY = "consumer._runtime"
LIBRDKAFKA_FACTORY = "consumer._client.librdkafka"

#: Every top-level part of the package must be named here, so a new one is classified.
KNOWN_LAYERS = frozenset(
    {
        "consumer",
        "consumer._bridge",
        "consumer._client",
        "consumer._config",
        "consumer._group_admin",
        "consumer._logging",
        "consumer._runtime",
        "consumer._share_runtime",
        "consumer._version",
        "consumer._wire",
        "consumer.aio",
        "consumer.cli",
        "consumer.config",
        "consumer.demo",
        "consumer.drop_in",
        "consumer.errors",
        "consumer.member",
        "consumer.prometheus",
        "consumer.share",
        "consumer.share_consumer",
        "consumer.spark",
        "consumer.testing",
    }
)


@dataclass(frozen=True)
class Rule:
    """Modules of ``layer`` may not import anything in ``forbidden`` (a layer and everything
    below it), except the modules named in ``allowed`` exactly."""

    layer: str
    forbidden: frozenset[str]
    allowed: frozenset[str] = frozenset()


def _rule(layer: str, *forbidden: str, allowed: tuple[str, ...] = ()) -> Rule:
    return Rule(layer, frozenset(forbidden), frozenset(allowed))


#: The facade (``consumer/__init__.py``), the CLI and the demo sit on top of everything.
_OUTER = (
    "consumer",
    "consumer._group_admin",
    "consumer.aio",
    "consumer.cli",
    "consumer.demo",
    "consumer.drop_in",
    "consumer.prometheus",
    "consumer.share_consumer",
    "consumer.spark",
    "consumer.testing",
)

RULES: tuple[Rule, ...] = (
    _rule(
        "consumer.member",
        *_OUTER,
        "consumer._runtime",
        "consumer._client",
        "consumer._wire",
        "consumer._bridge",
    ),
    # The share-group core (KIP-932) is sans-I/O like the member core.
    _rule(
        "consumer.share",
        *_OUTER,
        "consumer._runtime",
        "consumer._client",
        "consumer._wire",
        "consumer._bridge",
    ),
    _rule(
        "consumer._wire",
        *_OUTER,
        "consumer.member",
        "consumer.share",
        "consumer._runtime",
        "consumer._client",
        "consumer._bridge",
        "consumer.config",
        "consumer._config",
    ),
    _rule(
        "consumer._bridge",
        *_OUTER,
        "consumer._runtime",
        "consumer._client",
        "consumer._wire",
    ),
    _rule("consumer._runtime", *_OUTER, "consumer._client", "consumer._share_runtime"),
    # The share consumer's background loop: like the runtime, it knows no client.
    _rule("consumer._share_runtime", *_OUTER, "consumer._client"),
    # The testing kit's simulation is sans-I/O: no real-broker tooling, no runtime, no wire.
    _rule(
        "consumer.testing.sim",
        "consumer.testing.real",
        "consumer.cli",
        "consumer.demo",
        "consumer._runtime",
        "consumer._wire",
    ),
    _rule(
        "consumer._client",
        *_OUTER,
        "consumer._runtime",
        "consumer._wire",
        allowed=(RUNTIME_ENTRY,),
    ),
    # The asyncio surface drives a Consumer's parts (client, bridge); never the runtime or wire.
    _rule(
        "consumer.aio",
        "consumer.cli",
        "consumer.demo",
        "consumer.share_consumer",
        "consumer.spark",
        "consumer.testing",
        "consumer._group_admin",
        "consumer._runtime",
        "consumer._share_runtime",
        "consumer._wire",
    ),
    _rule(
        "consumer.spark",
        "consumer.cli",
        "consumer.demo",
        "consumer.testing",
        "consumer.member",
        "consumer._runtime",
        "consumer._wire",
        "consumer._bridge",
        "consumer._client",
        allowed=(LIBRDKAFKA_FACTORY,),
    ),
    _rule(
        "consumer._group_admin",
        "consumer.cli",
        "consumer.demo",
        "consumer.share_consumer",
        "consumer.spark",
        "consumer.testing",
        "consumer.member",
        "consumer.share",
        "consumer._client",
        "consumer._bridge",
        "consumer._share_runtime",
        allowed=("consumer.testing.real.detached",),
    ),
    _rule("consumer.errors", *_OUTER, *(sorted(KNOWN_LAYERS - {"consumer", "consumer.errors"}))),
    # The log routing is standard library only: every layer may use it.
    _rule(
        "consumer._logging", *_OUTER, *(sorted(KNOWN_LAYERS - {"consumer", "consumer._logging"}))
    ),
    _rule(
        "consumer.config",
        *_OUTER,
        "consumer.member",
        "consumer.share",
        "consumer._runtime",
        "consumer._client",
        "consumer._wire",
        "consumer._bridge",
    ),
)


def _within(module: str, layer: str) -> bool:
    return module == layer or module.startswith(layer + ".")


def _layer_of(module: str) -> str:
    return ".".join(module.split(".")[:2])


def module_name(path: pathlib.Path, root: pathlib.Path = PACKAGE_ROOT) -> str:
    """``consumer.x.y`` for ``root/x/y.py`` (a package's ``__init__.py`` names the package)."""
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(
    module: str, source: str, *, is_package: bool, known: frozenset[str]
) -> list[tuple[int, str]]:
    """(line, module) for every ``consumer`` module that ``source`` imports.

    ``from package import name`` counts as importing ``package.name`` when that is a module in
    ``known`` (it loads the submodule), and as importing ``package`` otherwise.
    """
    found: list[tuple[int, str]] = []
    package = module.split(".") if is_package else module.split(".")[:-1]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            for alias in node.names:
                submodule = f"{target}.{alias.name}"
                found.append((node.lineno, submodule if submodule in known else target))
    return sorted({(line, name) for line, name in found if _within(name, "consumer")})


def constructs_librdkafka_consumer(source: str) -> list[int]:
    """Lines that import or reference ``confluent_kafka.Consumer``."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("confluent_kafka"):
            if any(alias.name == "Consumer" for alias in node.names):
                lines.append(node.lineno)
        elif (
            isinstance(node, ast.Attribute)
            and node.attr == "Consumer"
            and isinstance(node.value, ast.Name)
            and node.value.id == "confluent_kafka"
        ):
            lines.append(node.lineno)
    return lines


def violations(
    module: str, source: str, *, is_package: bool = False, known: frozenset[str] = frozenset()
) -> list[str]:
    """Every import in ``source`` (the text of ``module``) that :data:`RULES` forbid."""
    problems = []
    for rule in RULES:
        if not _within(module, rule.layer):
            continue
        for line, target in imported_modules(module, source, is_package=is_package, known=known):
            if target in rule.allowed or _within(target, rule.layer):
                continue
            for forbidden in rule.forbidden:
                # The facade "consumer" forbids the package root itself, not every module in it.
                hit = target == forbidden if forbidden == "consumer" else _within(target, forbidden)
                if hit:
                    problems.append(
                        f"{module}:{line} imports {target} ({rule.layer} -/-> {forbidden})"
                    )
    if module != LIBRDKAFKA_FACTORY:
        problems.extend(
            f"{module}:{line} uses confluent_kafka.Consumer (build it with {LIBRDKAFKA_FACTORY})"
            for line in constructs_librdkafka_consumer(source)
        )
    return problems


def _package_modules() -> dict[str, pathlib.Path]:
    return {module_name(path): path for path in sorted(PACKAGE_ROOT.rglob("*.py"))}


# --- the package as it is ----------------------------------------------------------------------


def test_every_part_of_the_package_is_classified() -> None:
    layers = {_layer_of(name) for name in _package_modules()}
    assert layers <= KNOWN_LAYERS, f"unclassified: {sorted(layers - KNOWN_LAYERS)}"
    assert {_layer_of(rule.layer) for rule in RULES} <= KNOWN_LAYERS


def test_the_package_keeps_its_layering() -> None:
    modules = _package_modules()
    known = frozenset(modules)
    problems = [
        problem
        for name, path in modules.items()
        for problem in violations(
            name, path.read_text(), is_package=path.name == "__init__.py", known=known
        )
    ]
    assert problems == []


#: Standard-library modules that do I/O or start threads: the simulation may not import them.
_IO_MODULES = frozenset({"socket", "subprocess", "threading", "selectors", "asyncio", "time"})


def test_the_simulation_does_no_io() -> None:
    problems = []
    for name, path in _package_modules().items():
        if not _within(name, "consumer.testing.sim"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                roots = [alias.name.split(".")[0] for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                roots = [(node.module or "").split(".")[0]]
            else:
                continue
            problems.extend(f"{name}:{node.lineno} imports {r}" for r in roots if r in _IO_MODULES)
    assert problems == []


def test_the_runtime_entry_exports_only_the_constructor() -> None:
    tree = ast.parse((PACKAGE_ROOT / "_runtime" / "__init__.py").read_text())
    exported = [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
    ]
    assert len(exported) == 1
    assert ast.literal_eval(exported[0]) == ["BackgroundRuntime"]


# --- the checker itself, on synthetic sources ----------------------------------------------------

_KNOWN = frozenset(
    {"consumer._runtime", "consumer._runtime.background", "consumer._client.librdkafka"}
)


@pytest.mark.parametrize(
    ("module", "source"),
    [
        ("consumer.member.fake", "from consumer._runtime.background import BackgroundRuntime"),
        ("consumer.member.fake", "import consumer._wire.heartbeat"),
        ("consumer.member.fake", "from .._bridge import messages"),
        ("consumer.member.fake", "def f():\n    from consumer.testing import harness\n"),
        ("consumer.member.fake", "from consumer import Consumer"),
        ("consumer._wire.fake", "from consumer.member import HeartbeatRequest"),
        ("consumer.share.fake", "from consumer._wire.share_heartbeat import build"),
        ("consumer.share.fake", "from consumer._runtime import BackgroundRuntime"),
        ("consumer._wire.fake", "from consumer.share import ShareHeartbeatRequest"),
        ("consumer.share.fake", "from consumer._wire import Record"),
        ("consumer._wire.fake", "from consumer.share.session import ShareSession"),
        ("consumer._bridge.fake", "from consumer._runtime import BackgroundRuntime"),
        ("consumer._runtime.fake", "from consumer._client.consumer import Consumer"),
        ("consumer._client.fake", "from consumer._runtime.background import BackgroundRuntime"),
        ("consumer._client.fake", "from consumer._runtime import background"),
        ("consumer._client.fake", "from consumer._wire import ApiKey"),
        ("consumer.spark.fake", "from consumer._client.dataplane import DataPlane"),
        ("consumer.spark.fake", "from consumer._wire import ApiKey"),
        ("consumer.spark.fake", "from confluent_kafka import Consumer"),
        ("consumer._client.fake", "import confluent_kafka\nc = confluent_kafka.Consumer({})"),
        ("consumer._wire.fake", "from consumer._group_admin import add_group_commands"),
        ("consumer._group_admin.fake", "from consumer._client.consumer import Consumer"),
        ("consumer._group_admin.fake", "from consumer.testing.real.broker import LocalBroker"),
    ],
)
def test_a_forbidden_import_is_reported(module: str, source: str) -> None:
    assert violations(module, source, known=_KNOWN)


@pytest.mark.parametrize(
    ("module", "source"),
    [
        ("consumer.member.fake", "from consumer.member.partitions import TopicPartition"),
        ("consumer.member.fake", "from .partitions import TopicPartition"),
        ("consumer.share.fake", "from consumer.member.machine import RulesTable"),
        ("consumer._client.fake", "from consumer._runtime import BackgroundRuntime"),
        ("consumer._client.fake", "from consumer._bridge.messages import StopLoop"),
        ("consumer.spark.fake", "from consumer import Consumer"),
        ("consumer.spark.fake", "from consumer._client.librdkafka import assign_mode_consumer"),
        ("consumer._client.librdkafka", "from confluent_kafka import Consumer"),
        ("consumer._runtime.fake", "from consumer._wire import ApiKey"),
        ("consumer._group_admin.fake", "from consumer._runtime.cluster import ClusterClient"),
        (
            "consumer._group_admin.fake",
            "from consumer.testing.real.detached import read_broker_state",
        ),
    ],
)
def test_an_allowed_import_passes(module: str, source: str) -> None:
    assert violations(module, source, known=_KNOWN) == []
