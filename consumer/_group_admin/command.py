"""``kgm group list``, ``kgm group describe GROUP`` and ``kgm group watch GROUP``: the command
line around :class:`~consumer._group_admin.fetch.GroupAdmin` (and :mod:`.watch`).

Options are spelled as Kafka's own tools spell them: ``--bootstrap-server`` (default:
``$KAFKA_BOOTSTRAP_SERVERS``, else the project's detached broker of ``kgm broker start``),
``--command-config FILE`` (librdkafka properties, e.g. TLS and SASL), ``--timeout`` (ms) and
``--output text|json``. Exit codes: 0 done; 1 the group does not exist, the cluster could not be
reached, the broker refused, or the configuration is wrong (one line on stderr says which).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Final, TypeVar

from confluent_kafka import KafkaException

from consumer.config import ConfigError, SecurityConfig, parse_config
from consumer.errors import (
    BrokerError,
    ConsumerError,
    KafkaConnectionError,
    KafkaTimeoutError,
)
from consumer.testing.real.detached import read_broker_state

from .fetch import GroupAdmin, GroupNotFoundError
from .render import describe_json, describe_text, list_json, list_text
from .watch import WatchOptions, watch

__all__ = [
    "DEFAULT_TIMEOUT_MS",
    "CommandError",
    "add_group_commands",
    "read_properties",
    "resolve_bootstrap_servers",
    "security_from_properties",
]

DEFAULT_TIMEOUT_MS: Final = 10_000
DEFAULT_INTERVAL_MS: Final = 1_000
_CLIENT_ID: Final = "kgm-group"
#: Keys of a command-config file that the SDK's own connections use (TLS and SASL).
_SECURITY_PREFIXES: Final = ("security.", "ssl.", "sasl.", "enable.ssl.")

T = TypeVar("T")


class CommandError(Exception):
    """A failure ``kgm group`` reports in one line and exits 1 for."""


def read_properties(path: Path) -> dict[str, str]:
    """A librdkafka/Java properties file: ``key=value`` (or ``key: value``) per line, ``#`` and
    ``!`` comments, blank lines ignored. Line continuations are not supported.

    Raises:
        CommandError: the file cannot be read, or a line is not ``key=value`` (the message
            names the file and line, never the value).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise CommandError(f"--command-config {path}: {error.strerror or error}") from None
    properties: dict[str, str] = {}
    for number, raw_line in enumerate(text.splitlines(), start=1):
        line = raw_line.strip()
        if not line or line[0] in "#!":
            continue
        cut = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        key = line[:cut].strip() if cut > 0 else ""
        if not key:
            raise CommandError(f"--command-config {path}, line {number}: expected key=value")
        properties[key] = line[cut + 1 :].strip()
    return properties


def security_from_properties(properties: dict[str, str], source: str) -> SecurityConfig:
    """The TLS/SASL settings of ``properties``, checked by the SDK's own configuration rules
    (messages name the key; secrets show as ``'***'``)."""
    subset = {k: v for k, v in properties.items() if k.startswith(_SECURITY_PREFIXES)}
    try:
        config = parse_config(
            {"bootstrap.servers": "localhost:9092", "group.id": _CLIENT_ID, **subset}
        )
    except ConfigError as error:
        raise CommandError(f"--command-config {source}: {error}") from None
    return config.security


def resolve_bootstrap_servers(given: str | None) -> str:
    """``--bootstrap-server``, else ``$KAFKA_BOOTSTRAP_SERVERS``, else this project's detached
    local broker (``kgm broker start --detach``)."""
    if given:
        return given
    from_env = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if from_env:
        return from_env
    state = read_broker_state(None)
    if state is None:
        raise CommandError(
            "no cluster given: pass --bootstrap-server HOST:PORT, set KAFKA_BOOTSTRAP_SERVERS, "
            "or start a local broker with: kgm broker start --detach"
        )
    return state.bootstrap_servers


def add_group_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``kgm group list``, ``describe`` and ``watch`` on ``kgm``'s subcommands."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--bootstrap-server",
        metavar="HOST:PORT",
        default=None,
        help="the cluster (default: $KAFKA_BOOTSTRAP_SERVERS, else the local broker of "
        "'kgm broker start --detach')",
    )
    common.add_argument(
        "--command-config",
        metavar="FILE",
        type=Path,
        default=None,
        help="librdkafka properties (key=value lines), e.g. security.protocol, ssl.*, sasl.*",
    )
    common.add_argument(
        "--output", choices=("text", "json"), default="text", help="output format (default text)"
    )
    common.add_argument(
        "--timeout",
        metavar="TIMEOUT_MS",
        dest="timeout_ms",
        type=_positive_int,
        default=DEFAULT_TIMEOUT_MS,
        help="bound on connecting, and again on the requests that follow, in ms "
        f"(default {DEFAULT_TIMEOUT_MS})",
    )
    group = commands.add_parser(
        "group", help="list, describe and watch consumer, classic and share groups"
    )
    group_commands = group.add_subparsers(dest="group_command", required=True)
    listing = group_commands.add_parser(
        "list", parents=[common], help="every group with its type, state and member count"
    )
    listing.set_defaults(handler=_list)
    describe = group_commands.add_parser(
        "describe",
        parents=[common],
        help="a group's epochs, members, assignments and partition offsets",
    )
    describe.add_argument("group", metavar="GROUP", help="the group id")
    describe.set_defaults(handler=_describe)
    _add_watch(group_commands, common)


def _add_watch(
    group_commands: argparse._SubParsersAction[argparse.ArgumentParser],
    common: argparse.ArgumentParser,
) -> None:
    watching = group_commands.add_parser(
        "watch",
        parents=[common],
        help="describe a group every interval and show what changed (Ctrl-C stops)",
    )
    watching.add_argument("group", metavar="GROUP", help="the group id")
    watching.add_argument(
        "--interval",
        metavar="INTERVAL_MS",
        dest="interval_ms",
        type=_positive_int,
        default=DEFAULT_INTERVAL_MS,
        help=f"time between refreshes in ms (default {DEFAULT_INTERVAL_MS})",
    )
    watching.add_argument(
        "--record",
        metavar="FILE",
        type=Path,
        default=None,
        help="append the observed changes to FILE as a rebalance timeline (JSON lines that "
        "'kgm timeline plot FILE' draws)",
    )
    watching.add_argument(
        "--count",
        metavar="N",
        type=_positive_count,
        default=None,
        help="stop after N refreshes (default: until Ctrl-C)",
    )
    watching.add_argument(
        "--duration",
        metavar="DURATION_MS",
        dest="duration_ms",
        type=_positive_int,
        default=None,
        help="stop after this many ms (default: until Ctrl-C)",
    )
    watching.set_defaults(handler=_watch)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected milliseconds, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of ms, got {value}")
    return value


def _positive_count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of refreshes, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of refreshes, got {value}")
    return value


def _list(args: argparse.Namespace) -> int:
    listings = _run(args, lambda admin: admin.list_groups())
    if listings is None:
        return 1
    print(list_json(listings) if args.output == "json" else list_text(listings))
    return 0


def _describe(args: argparse.Namespace) -> int:
    description = _run(args, lambda admin: admin.describe_group(args.group))
    if description is None:
        return 1
    print(describe_json(description) if args.output == "json" else describe_text(description))
    return 0


def _watch(args: argparse.Namespace) -> int:
    record = None
    if args.record is not None:
        try:
            record = open(args.record, "a", encoding="utf-8")  # noqa: SIM115 - closed below
        except OSError as error:
            print(f"kgm group: --record {args.record}: {error.strerror or error}", file=sys.stderr)
            return 1
    options = WatchOptions(
        group=args.group,
        interval_ms=args.interval_ms,
        output=args.output,
        timeout_ms=args.timeout_ms,
        count=args.count,
        duration_ms=args.duration_ms,
        record=record,
        redraw=args.output == "text" and sys.stdout.isatty(),
    )
    try:
        done = _run(args, lambda admin: watch(admin, options), bound_action=False)
    except KeyboardInterrupt:
        return 0  # Ctrl-C is how a watch ends
    finally:
        if record is not None:
            record.close()
    return 1 if done is None else 0


def _run(
    args: argparse.Namespace,
    action: Callable[[GroupAdmin], Awaitable[T]],
    *,
    bound_action: bool = True,
) -> T | None:
    """Run ``action`` against the cluster; print the failure and return None if it fails.

    ``bound_action``: the action as a whole is bounded by ``--timeout`` (a watch bounds each of
    its refreshes instead).
    """
    try:
        bootstrap = resolve_bootstrap_servers(args.bootstrap_server)
        properties: dict[str, str] = {}
        security = None
        if args.command_config is not None:
            properties = read_properties(args.command_config)
            security = security_from_properties(properties, str(args.command_config))
        properties.pop("bootstrap.servers", None)
        return asyncio.run(
            _with_admin(bootstrap, properties, security, args.timeout_ms, action, bound_action)
        )
    except (CommandError, GroupNotFoundError) as error:
        print(f"kgm group: {error}", file=sys.stderr)
    except ConsumerError as error:  # a broker error or a lost connection, named by its class
        print(f"kgm group: {type(error).__name__}: {error}", file=sys.stderr)
    except KafkaException as error:  # from confluent-kafka's AdminClient calls
        reason = error.args[0] if error.args else error
        print(f"kgm group: {getattr(reason, 'str', reason.__str__)()}", file=sys.stderr)
    return None


async def _with_admin(
    bootstrap: str,
    properties: dict[str, str],
    security: SecurityConfig | None,
    timeout_ms: int,
    action: Callable[[GroupAdmin], Awaitable[T]],
    bound_action: bool = True,
) -> T:
    client_id = properties.get("client.id", _CLIENT_ID)
    admin = GroupAdmin(
        bootstrap,
        admin_config=properties,
        security=security,
        client_id=client_id,
        timeout_ms=timeout_ms,
    )
    try:
        try:
            async with asyncio.timeout(timeout_ms / 1000):
                await admin.start()
        except (TimeoutError, KafkaConnectionError, KafkaTimeoutError) as error:
            reason = "no answer" if isinstance(error, TimeoutError) else str(error)
            raise CommandError(
                f"could not reach the Kafka cluster at {bootstrap} within {timeout_ms} ms "
                f"(--timeout): {reason}"
            ) from None
        except BrokerError as error:  # e.g. SASL_AUTHENTICATION_FAILED; names no secret
            raise CommandError(
                f"the Kafka cluster at {bootstrap} refused the connection: "
                f"{type(error).__name__}: {error}"
            ) from None
        if not bound_action:
            return await action(admin)
        try:
            async with asyncio.timeout(timeout_ms / 1000):
                return await action(admin)
        except TimeoutError:
            raise CommandError(
                f"the Kafka cluster at {bootstrap} did not answer within {timeout_ms} ms "
                "(--timeout)"
            ) from None
    finally:
        await admin.close()
