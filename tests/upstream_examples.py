"""Run the consumer example programs that ship with confluent-kafka-python, once with
confluent-kafka and once with only their imports switched to this package, and compare.

A verification run, not a CI test: the examples are not in any artifact CI can download
(confluent-kafka's sdist and wheels leave ``examples/`` out, and CI reaches PyPI, Maven Central
and Debian only), and this repository does not copy them. Give it a checkout::

    python tests/upstream_examples.py --examples /path/to/confluent-kafka-python/examples

Each client gets a fresh local broker (``LocalBroker``) and the same inputs, so offsets and
partitions match record for record. The programs run unchanged but for their imports:
``Consumer``, ``KafkaError``, ``KafkaException`` come from ``consumer`` (the other names stay
confluent-kafka's), and ``import confluent_kafka`` becomes
``import consumer.drop_in as confluent_kafka``. Without ``group.protocol`` the confluent-kafka
runs use librdkafka's default, the classic protocol, and ours our KIP-848 member: exactly what a
user switching the import gets. Writes a JSON report (``--out``) and prints a summary; exits 1
if any program's output or checks differ.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from consumer.testing.real.broker import LocalBroker

REPO = Path(__file__).resolve().parents[1]
OURS = {"Consumer", "KafkaError", "KafkaException"}
TOPIC, GROUP, RECORDS = "kgm-example", "kgm-example-group", 30
EOS_IN, EOS_OUT, EOS_GROUP, EOS_RECORDS = "kgm-eos-in", "kgm-eos-out", "kgm-eos-group", 250
PROGRAM_TIMEOUT_S = 120.0
#: consumer.py run again with statistics on (``-T 500``: ``stats_cb`` every 500 ms).
STATS_RUN, STATS_GROUP = "consumer.py -T 500", "kgm-example-stats-group"
#: Programs saved under another file name for both clients (see ``run_client``).
SAVED_AS = {"consumer.py": "consumer_example.py"}

_FROM_IMPORT = re.compile(
    r"^from confluent_kafka import (?:\(([^()]*)\)|([^()\n]*?))[ \t]*$", re.MULTILINE
)


def switch_imports(source: str) -> tuple[str, list[str]]:
    """The program with its confluent-kafka imports of our names switched; the changed lines."""
    changed: list[str] = []

    def one(match: re.Match[str]) -> str:
        listed = match.group(1) if match.group(1) is not None else match.group(2)
        names = [n.strip() for n in listed.replace("\n", " ").split(",") if n.strip()]
        ours = [n for n in names if n in OURS]
        if not ours:
            return match.group(0)
        theirs = [n for n in names if n not in OURS]
        lines = [f"from confluent_kafka import {', '.join(theirs)}"] if theirs else []
        lines.append(f"from consumer import {', '.join(ours)}")
        changed.append(f"{match.group(0).strip()}  ->  {' / '.join(lines)}")
        return "\n".join(lines)

    source = _FROM_IMPORT.sub(one, source)
    if re.search(r"^import confluent_kafka\s*$", source, re.MULTILINE):
        source = re.sub(
            r"^import confluent_kafka\s*$",
            "import consumer.drop_in as confluent_kafka",
            source,
            flags=re.MULTILINE,
        )
        changed.append("import confluent_kafka  ->  import consumer.drop_in as confluent_kafka")
    return source, changed


@dataclass
class Run:
    """One program run: what it printed and how it ended."""

    program: str
    args: list[str]
    returncode: int | None = None
    stdout: str = ""
    stderr: str = ""
    seconds: float = 0.0


@dataclass
class Outcome:
    """One example, both clients."""

    example: str
    switched_lines: list[str]
    confluent: dict[str, object] = field(default_factory=dict)
    ours: dict[str, object] = field(default_factory=dict)
    same_output: bool = False
    #: The end of each run's stderr (logs, tracebacks), for reading; not compared.
    stderr_tails: dict[str, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


def run_program(
    path: Path, args: list[str], *, interrupt_when: Callable[[str], bool] | None = None
) -> Run:
    """Run ``path``; with ``interrupt_when``, send SIGINT (Ctrl-C) once it holds (given the
    program's stderr so far)."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"}
    started = time.monotonic()
    process = subprocess.Popen(
        [sys.executable, str(path), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        # Ctrl-C must reach the program even if this runner inherited SIGINT ignored (a
        # background job of a non-interactive shell does); Python keeps an inherited SIG_IGN.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    out: list[str] = []
    err: list[str] = []

    def pump(stream: object, sink: list[str]) -> None:
        for line in stream:  # type: ignore[attr-defined]
            sink.append(line)

    def interrupt() -> None:
        # Checked every 0.2 s (the condition may be outside the program, e.g. its commits).
        while process.poll() is None:
            if interrupt_when is not None and interrupt_when("".join(err)):
                process.send_signal(signal.SIGINT)
                return
            time.sleep(0.2)  # a polling interval for a condition, not a synchronisation

    threads = [
        threading.Thread(target=pump, args=(process.stdout, out), daemon=True),
        threading.Thread(target=pump, args=(process.stderr, err), daemon=True),
        threading.Thread(target=interrupt, daemon=True),
    ]
    for thread in threads:
        thread.start()
    try:
        process.wait(timeout=PROGRAM_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        err.append(f"\n[runner] killed after {PROGRAM_TIMEOUT_S} s\n")
    for thread in threads:
        thread.join(timeout=10)
    return Run(
        path.name, args, process.returncode, "".join(out), "".join(err),
        round(time.monotonic() - started, 2),
    )  # fmt: skip


def produce(bootstrap: str, topic: str, count: int, prefix: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i in range(count):
        producer.produce(topic, key=f"key-{i}".encode(), value=f"{prefix}-{i}".encode())
    assert producer.flush(30) == 0, "records left unflushed"


def create_topics(bootstrap: str, topics: dict[str, int]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(t, num_partitions=n) for t, n in topics.items()])
    for future in futures.values():
        future.result(30)


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> list[int]:
    reader = ConfluentConsumer({"bootstrap.servers": bootstrap, "group.id": group})
    deadline = time.monotonic() + 60
    try:
        while True:
            try:
                wanted = [TopicPartition(topic, p) for p in range(partitions)]
                return [tp.offset for tp in reader.committed(wanted, 30)]
            except KafkaException as exc:  # e.g. NOT_COORDINATOR while the group's load moves
                if not exc.args[0].retriable() and exc.args[0].code() not in _COORDINATOR_MOVED:
                    raise
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)  # a retry backoff, not a synchronisation
    finally:
        reader.close()


_COORDINATOR_MOVED = (KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS)


def read_committed_count(bootstrap: str, topic: str) -> int:
    reader = ConfluentConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "kgm-example-reader",
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    count = 0
    try:
        reader.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            message = reader.poll(1.0)
            if message is None:
                continue
            if message.error():
                break  # end of partition
            count += 1
        return count
    finally:
        reader.close()


def run_client(examples: Path, client: str, workdir: Path) -> dict[str, dict[str, object]]:
    """Every example against a fresh broker, as ``client`` (``confluent`` or ``ours``)."""
    results: dict[str, dict[str, object]] = {}

    def program(name: str) -> Path:
        source = (examples / name).read_text()
        if client == "ours":
            source, _ = switch_imports(source)
        # A script's directory comes first on sys.path, so a program saved as consumer.py
        # shadows this package (as one saved as confluent_kafka.py would shadow confluent-kafka):
        # each program gets a directory of its own, and consumer.py is saved under another name.
        path = workdir / client / name.removesuffix(".py") / SAVED_AS.get(name, name)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
        return path

    with LocalBroker() as broker:
        bootstrap = broker.bootstrap_servers
        create_topics(bootstrap, {TOPIC: 3, EOS_IN: 1, EOS_OUT: 1})
        produce(bootstrap, TOPIC, RECORDS, "value")
        produce(bootstrap, EOS_IN, EOS_RECORDS, "eos")

        def consumed_all(group: str) -> Callable[[str], bool]:
            """Every record printed and its stored offset auto-committed: Ctrl-C then finds the
            program in ``poll()``, not between printing a record and storing its offset (the
            example's own window, where an interrupt leaves that record uncommitted)."""

            def check(stderr: str) -> bool:
                printed = stderr.count(f"% {TOPIC} [") >= RECORDS  # its '%%' is %-formatted
                return printed and sum(committed(bootstrap, group, TOPIC, 3)) == RECORDS

            return check

        run = run_program(
            program("consumer.py"), [bootstrap, GROUP, TOPIC], interrupt_when=consumed_all(GROUP)
        )
        results["consumer.py"] = {
            "run": asdict(run),
            "committed": committed(bootstrap, GROUP, TOPIC, 3),
        }
        run = run_program(
            program("consumer.py"),
            ["-T", "500", bootstrap, STATS_GROUP, TOPIC],
            interrupt_when=consumed_all(STATS_GROUP),
        )
        results[STATS_RUN] = {
            "run": asdict(run),
            "committed": committed(bootstrap, STATS_GROUP, TOPIC, 3),
        }
        run = run_program(program("get_watermark_offsets.py"), [bootstrap, GROUP, TOPIC])
        results["get_watermark_offsets.py"] = {"run": asdict(run)}
        run = run_program(program("context_manager_example.py"), [bootstrap])
        results["context_manager_example.py"] = {"run": asdict(run)}
        run = run_program(
            program("eos_transactions.py"),
            ["-b", bootstrap, "-t", EOS_IN, "-o", EOS_OUT, "-g", EOS_GROUP],
        )
        results["eos_transactions.py"] = {
            "run": asdict(run),
            "committed": committed(bootstrap, EOS_GROUP, EOS_IN, 1),
            "output_read_committed": read_committed_count(bootstrap, EOS_OUT),
        }
    return results


def _consumer_view(result: dict[str, object]) -> dict[str, object]:
    run = result["run"]
    assert isinstance(run, dict)
    stdout, stderr = str(run["stdout"]), str(run["stderr"])
    assigned = sorted(set(re.findall(r"partition=(\d+)", "".join(
        line for line in stdout.splitlines() if line.startswith("Assignment:")
    ))))  # fmt: skip
    return {
        "returncode": run["returncode"],
        "values": sorted(line for line in stdout.splitlines() if line.startswith("b'")),
        "records": sorted(line for line in stderr.splitlines() if line.startswith("% " + TOPIC)),
        "assigned_partitions": assigned,
        "aborted_line": "%% Aborted by user" in stderr,
        "committed": result["committed"],
        "printed_stats": "KAFKA Stats: {" in stdout,
    }


def _plain_view(result: dict[str, object]) -> dict[str, object]:
    run = result["run"]
    assert isinstance(run, dict)
    view = {"returncode": run["returncode"], "stdout": str(run["stdout"]).splitlines()}
    view.update({k: v for k, v in result.items() if k != "run"})
    return view


VIEWS: dict[str, Callable[[dict[str, object]], dict[str, object]]] = {
    "consumer.py": _consumer_view,
    STATS_RUN: _consumer_view,
    "get_watermark_offsets.py": _plain_view,
    "context_manager_example.py": _plain_view,
    "eos_transactions.py": _plain_view,
}


def expectations(example: str, view: dict[str, object]) -> Iterator[str]:
    """What each program must have done, whichever client ran it (problems, if any)."""
    if view["returncode"] != 0:
        yield f"exit code {view['returncode']}"
    if example in ("consumer.py", STATS_RUN):
        if view["printed_stats"] != (example == STATS_RUN):
            yield f"statistics printed: {view['printed_stats']}"
        if len(view["values"]) != RECORDS:  # type: ignore[arg-type]
            yield f"{len(view['values'])} values printed, expected {RECORDS}"  # type: ignore[arg-type]
        if view["assigned_partitions"] != ["0", "1", "2"]:
            yield f"assigned {view['assigned_partitions']}"
        if not view["aborted_line"]:
            yield "no '%% Aborted by user' after Ctrl-C"
        if sum(view["committed"]) != RECORDS:  # type: ignore[arg-type]
            yield f"committed offsets {view['committed']} do not add up to {RECORDS}"
    if example == "eos_transactions.py":
        if view["committed"] != [EOS_RECORDS]:
            yield f"committed {view['committed']}, expected [{EOS_RECORDS}]"
        if view["output_read_committed"] != EOS_RECORDS:
            yield f"{view['output_read_committed']} committed output records"


def compare(examples: Path, workdir: Path) -> list[Outcome]:
    both = {client: run_client(examples, client, workdir) for client in ("confluent", "ours")}
    outcomes = []
    for example, view_of in VIEWS.items():
        _, switched = switch_imports((examples / example.split()[0]).read_text())
        outcome = Outcome(example, switched)
        outcome.confluent = view_of(both["confluent"][example])
        outcome.ours = view_of(both["ours"][example])
        outcome.same_output = outcome.confluent == outcome.ours
        for client in ("confluent", "ours"):
            view = outcome.confluent if client == "confluent" else outcome.ours
            outcome.problems += [f"{client}: {p}" for p in expectations(example, view)]
        if not outcome.same_output:
            differing = [k for k in outcome.ours if outcome.ours[k] != outcome.confluent.get(k)]
            outcome.problems.append(f"output differs in {differing}")
            outcome.problems += _stderr_notes(both["ours"][example])
        outcome.stderr_tails = {
            client: str(both[client][example]["run"]["stderr"])[-3000:]  # type: ignore[index]
            for client in ("confluent", "ours")
        }
        outcomes.append(outcome)
    return outcomes


def _stderr_notes(result: dict[str, object]) -> list[str]:
    """Tracebacks in our run's stderr are problems even when the exit code is 0."""
    run = result["run"]
    assert isinstance(run, dict)
    return ["ours: traceback on stderr"] if "Traceback" in str(run["stderr"]) else []


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--examples", type=Path, required=True, help="confluent-kafka-python's examples/"
    )
    parser.add_argument("--out", type=Path, default=Path("upstream-examples.json"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kgm-upstream-") as tmp:
        outcomes = compare(args.examples, Path(tmp))
    args.out.write_text(json.dumps([asdict(o) for o in outcomes], indent=2) + "\n")
    for outcome in outcomes:
        verdict = "same" if outcome.same_output and not outcome.problems else "DIFFERENT"
        print(f"{outcome.example:30} {verdict}")
        for line in outcome.switched_lines:
            print(f"    switched: {line}")
        for problem in outcome.problems:
            print(f"    problem: {problem}")
    print(f"report: {args.out}")
    return 0 if all(o.same_output and not o.problems for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
