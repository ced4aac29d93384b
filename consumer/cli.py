"""``kgm``: the project's command line.

``kgm broker start [--detach]``, ``kgm broker status``, ``kgm broker stop`` manage the local
Kafka broker of :mod:`consumer.testing.real.broker` (a detached broker belongs to the project of
the working directory, or to ``--state-dir``: see :mod:`consumer.testing.real.detached`);
``kgm broker start --brokers N`` runs a local cluster of N brokers and a KRaft controller
(:mod:`consumer.testing.real.cluster`) in the foreground;
``kgm demo`` runs the README's main job; ``kgm timeline plot FILE -o OUT.png`` draws a recorded
rebalance timeline; ``kgm group list`` and ``kgm group describe GROUP`` show a cluster's groups
(:mod:`consumer._group_admin`); ``kgm --version`` prints the package version.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from consumer._group_admin import add_group_commands
from consumer._version import __version__
from consumer.demo import DEMO_PARTITIONS, DEMO_RECORDS
from consumer.testing.real.broker import LocalBroker
from consumer.testing.real.detached import (
    read_broker_state,
    stop_detached_broker,
    write_broker_state,
)
from consumer.testing.real.kafka_jars import DEFAULT_KAFKA_VERSION, BrokerStartError
from consumer.testing.timeline_cli import add_timeline_commands


def _broker_start(args: argparse.Namespace) -> int:
    if args.brokers != 1:
        return _cluster_start(args)
    running = read_broker_state(args.state_dir)
    if running is not None:
        print(f"bootstrap.servers={running.bootstrap_servers}")
        print(f"(already running, pid {running.pid})", file=sys.stderr)
        return 0
    overrides = dict(_parse_override(item) for item in args.override or ())
    broker = LocalBroker(
        kafka_version=args.kafka_version,
        overrides=overrides,
        port=args.port,
        bind_to_parent=not args.detach,
    )
    if args.detach:
        # A detached broker keeps its run folder: ``kgm broker stop`` removes it.
        import tempfile

        broker.run_dir = Path(tempfile.mkdtemp(prefix="kgm-broker-"))
    broker.start()
    if args.detach:
        write_broker_state(broker, args.state_dir)
        print(f"bootstrap.servers={broker.bootstrap_servers}", flush=True)
        return 0
    print(f"bootstrap.servers={broker.bootstrap_servers}", flush=True)
    print("broker running in the foreground; Ctrl-C stops it", file=sys.stderr, flush=True)
    try:
        assert broker.process is not None
        broker.process.wait()
    except KeyboardInterrupt:
        pass
    finally:
        broker.stop()
    return 0


def _cluster_start(args: argparse.Namespace) -> int:
    """``kgm broker start --brokers N``: a :class:`LocalCluster` in the foreground until Ctrl-C
    (or SIGTERM), or until one of its JVMs exits by itself."""
    import signal
    import time

    from consumer.testing.real.cluster import LocalCluster

    if not 1 <= args.brokers <= 9:
        raise SystemExit(f"--brokers takes 1 to 9, got {args.brokers}")
    if args.detach:
        raise SystemExit("--detach runs one broker only; run --brokers N in the foreground")
    if args.port:
        raise SystemExit("--port applies to one broker only; --brokers N picks free ports")
    overrides = dict(_parse_override(item) for item in args.override or ())
    cluster = LocalCluster(
        brokers=args.brokers, kafka_version=args.kafka_version, overrides=overrides
    )
    started = time.monotonic()

    def stop_on_sigterm(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, stop_on_sigterm)
    # Ctrl-C must stop the cluster even when this process was started with SIGINT ignored or
    # blocked (Python keeps an inherited SIG_IGN, and a signal mask survives exec).
    previous_int = signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        cluster.start()
        start_s = time.monotonic() - started
        print(f"bootstrap.servers={cluster.bootstrap_servers}", flush=True)
        rss_mib = {node: kib // 1024 for node, kib in sorted(cluster.rss_kib().items())}
        print(
            f"{args.brokers} brokers and a KRaft controller (node 0) started in {start_s:.1f} s; "
            f"resident memory MiB by node {rss_mib} (total {sum(rss_mib.values())} MiB)",
            file=sys.stderr,
            flush=True,
        )
        print("cluster running in the foreground; Ctrl-C stops it", file=sys.stderr, flush=True)
        exited = cluster.wait_for_exit()
        print(f"kgm: node {exited} exited; stopping the cluster", file=sys.stderr, flush=True)
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGINT, previous_int)
        cluster.stop()


def _parse_override(item: str) -> tuple[str, str]:
    key, sep, value = item.partition("=")
    if not sep or not key:
        raise SystemExit(f"--override takes KEY=VALUE, got {item!r}")
    return key, value


def _broker_status(args: argparse.Namespace) -> int:
    state = read_broker_state(args.state_dir)
    if state is None:
        print(
            "no local broker is running (start one with: kgm broker start --detach)",
            file=sys.stderr,
        )
        return 1
    print(f"bootstrap.servers={state.bootstrap_servers}")
    owner = f" for {state.project_root}" if state.project_root else ""
    print(f"(pid {state.pid}{owner})", file=sys.stderr)
    return 0


def _broker_stop(args: argparse.Namespace) -> int:
    state = stop_detached_broker(state_dir=args.state_dir)
    if state is None:
        print("no local broker was running", file=sys.stderr)
        return 0
    print(f"stopped the broker at {state.bootstrap_servers} (pid {state.pid})")
    return 0


def _demo(args: argparse.Namespace) -> int:
    from consumer.demo import run_demo

    return run_demo(
        bootstrap_servers=args.bootstrap_servers,
        records=args.records,
        output_dir=args.output_dir,
    )


_DESCRIPTION = """\
kgm: the command line of kafka-group-member, a Kafka consumer-group member
(KIP-848) written in Python.

Start with "kgm demo": it starts a local Kafka broker and shows three members
joining one group. "kgm COMMAND --help" explains each command."""

_EPILOG = """\
examples:
  kgm demo                                watch a group converge, explained
  kgm broker start --detach               a local broker in the background
  kgm group describe GROUP                members, epochs, assignments, lag
  kgm timeline plot run.jsonl -o run.png  draw a recorded rebalance timeline"""

_DEMO_DESCRIPTION = """\
Start a local Kafka broker (or use --bootstrap-servers), create a 6-partition
topic with numbered records, and start three members of one consumer group,
one after the other.

Every state transition of every member is printed as it happens, with its
member epoch and the partitions it owns, next to what the group coordinator
says: each member's target assignment. At the end: each member's record count
(every record is consumed exactly once) and a PNG of the rebalance timeline
(it needs matplotlib: pip install 'kafka-group-member[demo]')."""


def _plain_help(parser: argparse.ArgumentParser) -> None:
    """Give every subcommand a description (its one-line help, when it has none), so
    ``kgm COMMAND --help`` says what the command does, as ``kgm --help`` lists it."""
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        helps = {choice.dest: choice.help for choice in action._choices_actions}
        for name, sub in action.choices.items():
            if sub.description is None and helps.get(name):
                text = str(helps[name])
                sub.description = text[0].upper() + text[1:] + "."
            _plain_help(sub)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``kgm``."""
    parser = argparse.ArgumentParser(
        prog="kgm",
        description=_DESCRIPTION,
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(
        dest="command", required=True, title="commands", metavar="COMMAND"
    )

    broker = commands.add_parser(
        "broker", help="start, check and stop a local Kafka broker (or a local cluster)"
    )
    broker_commands = broker.add_subparsers(
        dest="broker_command", required=True, title="commands", metavar="COMMAND"
    )
    where = argparse.ArgumentParser(add_help=False)
    where.add_argument(
        "--state-dir",
        default=None,
        help="where the detached broker's state is kept (default: $KGM_STATE_DIR, else a "
        "folder per project root under the user cache)",
    )
    start = broker_commands.add_parser(
        "start", parents=[where], help="start a broker on a free loopback port"
    )
    start.add_argument("--detach", action="store_true", help="leave it running in the background")
    start.add_argument("--port", type=int, default=0, help="PLAINTEXT port (default: a free one)")
    start.add_argument(
        "--brokers",
        type=int,
        default=1,
        help="run a local cluster of this many brokers (1-9) and a KRaft controller, in the "
        "foreground; prints its bootstrap servers, start time and memory",
    )
    start.add_argument(
        "--kafka-version",
        default=None,
        help=f"Apache Kafka 4.x release (default: $KAFKA_VERSION or {DEFAULT_KAFKA_VERSION})",
    )
    start.add_argument(
        "--override",
        action="append",
        metavar="KEY=VALUE",
        help="extra server.properties entry (repeatable)",
    )
    start.set_defaults(handler=_broker_start)
    status = broker_commands.add_parser(
        "status", parents=[where], help="print this project's detached broker's address"
    )
    status.set_defaults(handler=_broker_status)
    stop = broker_commands.add_parser(
        "stop", parents=[where], help="stop this project's detached broker"
    )
    stop.set_defaults(handler=_broker_stop)

    demo = commands.add_parser(
        "demo",
        help="start a local broker and watch a consumer group converge, explained",
        description=_DEMO_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    demo.add_argument(
        "--bootstrap-servers",
        default=None,
        metavar="HOST:PORT",
        help="use this cluster instead of starting a local broker (default: "
        "$KAFKA_BOOTSTRAP_SERVERS, else a local broker)",
    )
    demo.add_argument(
        "--records",
        type=_demo_records,
        default=DEMO_RECORDS,
        metavar="N",
        help=f"records to produce and consume; fewer make a shorter run (default: {DEMO_RECORDS})",
    )
    demo.add_argument(
        "--output-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="where to write the timeline (timeline.jsonl, timeline.png; default: a new "
        "temporary folder, printed at the end)",
    )
    demo.set_defaults(handler=_demo)
    add_timeline_commands(commands)
    add_group_commands(commands)
    _plain_help(parser)
    return parser


def _demo_records(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < DEMO_PARTITIONS:
        raise argparse.ArgumentTypeError(
            f"--records takes a whole number of at least {DEMO_PARTITIONS}, got {text!r}"
        )
    return value


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``kgm`` console script."""
    args = build_parser().parse_args(argv)
    if getattr(args, "kafka_version", "unset") is None:
        import os

        args.kafka_version = os.environ.get("KAFKA_VERSION") or DEFAULT_KAFKA_VERSION
    try:
        code: int = args.handler(args)
    except BrokerStartError as exc:
        print(f"kgm: {exc}", file=sys.stderr)
        return 2
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
