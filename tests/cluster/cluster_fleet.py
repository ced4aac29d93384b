"""The reliability tier's member fleet and churn (``tests/reliability``: ``fleet``, ``test_churn``,
``run_checks``) on the three-broker :class:`LocalCluster`, plus the broker faults.

Members connect straight to the brokers (no per-member fault proxy; a test may send some through
the brokers' proxies, to cut a broker off from them), so the churn's member faults here are kills,
leaves and joins, pauses (SIGSTOP) and slow revocations; the broker faults are a SIGKILL or a
controlled shutdown (SIGTERM) of a broker followed by its restart, a broker paused (SIGSTOP)
longer than the broker session timeout, and the group coordinator's broker killed.

Every broker fault is recorded in the run's timeline as a fault without a member (the members'
own faults keep their member), so the checks and the duplicate causes see it. After each fault
the time until every live member is STABLE with every partition owned once (and the assignment
balanced) is measured.
"""

from __future__ import annotations

import random
import re
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, KafkaError, Message, TopicPartition
from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka.admin import AdminClient
from fleet import Fleet
from member_processes import MemberProcess
from reliability_support import CONVERGE_S, SESSION_MS, ProducedLog
from test_churn import Churn, duplicate_causes

from consumer.testing.real.cluster import LocalCluster
from consumer.testing.real.proxied_cluster import ProxiedCluster
from consumer.testing.timeline_events import Fault, Processed, wall_clock_ms
from tests.support import wait_until

#: Broker heartbeat interval of the members' group (fast_group_settings), and the goal.
HEARTBEAT_S = 0.5
#: A paused broker is held past the broker session timeout (3 s), so the controller fences it.
BROKER_PAUSE_S = 4.5
MEMBER_KINDS = ("kill", "leave_join", "pause_long", "pause_short", "slow_revoke")
BROKER_KINDS = ("coordinator_kill", "broker_kill", "broker_pause", "broker_stop")


class ClusterTarget:
    """What :class:`Fleet` needs of its "cluster", on a :class:`ProxiedCluster`: members of
    ``proxied_slots`` reach the brokers through the brokers' fault proxies, the others directly
    (no per-member proxy either way), and ``broker.log_path`` is every broker's ``server.log``
    joined (the group's coordinator moves between them)."""

    def __init__(
        self, cluster: ProxiedCluster, workdir: Path, proxied_slots: Iterable[str] = ()
    ) -> None:
        self.local = cluster
        self.broker = self
        self.proxied_slots = frozenset(proxied_slots)
        self._joined = workdir / "cluster-server.log"

    def bootstrap_servers(self, slot: str) -> str:
        if slot in self.proxied_slots:
            return self.local.member_bootstrap_servers
        return self.local.bootstrap_servers

    def proxy(self, slot: str) -> Any:
        raise AssertionError(f"members on the cluster have no fault proxy of their own ({slot})")

    @property
    def log_path(self) -> Path:
        text = "".join(
            self.local.log_path(n).read_text(errors="replace")
            for n in self.local.broker_ids
            if self.local.log_path(n).exists()
        )
        self._joined.write_text(text, encoding="utf-8")
        return self._joined


class ClusterFleet(Fleet):
    """:class:`Fleet` whose members may be confluent-kafka's KIP-848 consumer (``impl=
    "confluent"`` among the member defaults), which reports no member state: for those,
    converged means every partition owned once (by the members' own ``on_assign``/``on_revoke``)
    and the assignment balanced, with no STABLE to wait for. The anchor of the recovery times."""

    def converged(self, members: Sequence[MemberProcess] | None = None) -> bool:
        if self.defaults.get("impl") != "confluent":
            return super().converged(members)
        chosen = list(members) if members is not None else self.live()
        if not chosen:
            return False
        views = [m.refresh() for m in chosen]
        owned = [p for v in views for p in v.owned]
        counts = [len(v.owned) for v in views]
        balanced = max(counts) - min(counts) <= 1
        return balanced and len(owned) == len(set(owned)) and set(owned) == self.all_partitions()


class ClusterProducedLog(ProducedLog):
    """:class:`ProducedLog` for a cluster whose leaders move: an idempotent producer's retry
    that the new leader answers as a duplicate is acknowledged without its offset, so such
    records (and any two reported at one offset) are looked up in the topic itself by
    :meth:`resolve_unknown_offsets` before the run is checked."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        super().__init__(bootstrap, topic, partitions)
        self.bootstrap = bootstrap
        self.unknown_offset_values: set[int] = set()

    def _delivered(self, err: KafkaError | None, msg: Message) -> None:
        offset = msg.offset()
        if err is None and (offset is None or offset < 0 or self._taken(msg)):
            with self._lock:
                self.unknown_offset_values.add(int(msg.value() or b"-1"))
            return
        super()._delivered(err, msg)

    def _taken(self, msg: Message) -> bool:
        with self._lock:
            return (msg.partition() or 0, msg.offset() or 0) in self.acked

    def resolve_unknown_offsets(self, timeout_s: float = 60.0) -> int:
        """Read the topic to its end and record where each value acknowledged without a usable
        offset was written; fails if one is not in the topic. Returns how many there were."""
        if not self.unknown_offset_values:
            return 0
        reader = ConfluentConsumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": "kgm-resolve",
                "enable.auto.commit": False,
            }
        )
        wanted = set(self.unknown_offset_values)
        try:
            ends = {
                p: reader.get_watermark_offsets(TopicPartition(self.topic, p), timeout=10)[1]
                for p in range(self.partitions)
            }
            reader.assign([TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in ends])
            done: set[int] = {p for p, end in ends.items() if end == 0}
            deadline = time.monotonic() + timeout_s
            while len(done) < len(ends) and time.monotonic() < deadline:
                for msg in reader.consume(500, 1.0):
                    if msg.error() is not None:
                        continue
                    value, partition, offset = (
                        int(msg.value() or b"-1"),
                        msg.partition(),
                        msg.offset(),
                    )
                    if value in wanted:
                        with self._lock:
                            self.acked[(partition, offset)] = value
                        wanted.discard(value)
                    if offset + 1 >= ends[partition]:
                        done.add(partition)
        finally:
            reader.close()
        assert not wanted, f"acknowledged values not in the topic: {sorted(wanted)[:20]}"
        return len(self.unknown_offset_values)


def wait_fully_replicated(admin: AdminClient, topics: list[str], timeout_s: float = 90.0) -> float:
    """Wait until every partition of ``topics`` has a leader and all its replicas in sync (what
    an operator waits for between two brokers of a rolling restart); returns the seconds."""

    def lagging() -> list[str]:
        listed = admin.list_topics(timeout=10).topics
        out = []
        for topic in topics:
            meta = listed.get(topic)
            if meta is None:
                out.append(f"{topic}: not listed")
                continue
            out += [
                f"{topic}[{p}] leader {pm.leader} isr {sorted(pm.isrs)} of {sorted(pm.replicas)}"
                for p, pm in meta.partitions.items()
                if pm.leader < 0 or set(pm.isrs) != set(pm.replicas)
            ]
        return out

    return wait_until(
        lambda: not lagging(), timeout_s, "every partition fully in sync", lambda: str(lagging())
    )


class ClusterChurn(Churn):
    """:class:`Churn`'s member faults plus broker faults on a :class:`LocalCluster`."""

    def __init__(
        self,
        fleet: Fleet,
        cluster: LocalCluster,
        admin: AdminClient,
        workdir: Path,
        seed: int,
        slow_revoke_s: float,
    ) -> None:
        super().__init__(fleet, cluster, workdir, seed)  # type: ignore[arg-type]
        self.local = cluster
        self.admin = admin
        self.slow_revoke_s = slow_revoke_s
        self.broker_windows: list[tuple[str, int, int]] = []
        #: Seconds from a coordinator kill until the group converged with that broker still down.
        self.coordinator_down_to_stable: list[float] = []

    def spawn(self, slot: str) -> MemberProcess:
        return self.fleet.spawn(
            slot, slow_revoke_trigger=str(self.trigger(slot)), slow_revoke_s=self.slow_revoke_s
        )

    def run(self, kind: str) -> None:
        if kind not in BROKER_KINDS:
            super().run(kind)
            return
        if kind == "coordinator_kill":
            node = self.local.coordinator_of(self.fleet.group)
        else:
            node = self.rng.choice(self.local.broker_ids)
        self.broker_fault(kind, node)

    def broker_fault(self, kind: str, node: int) -> float:
        """Inject broker fault ``kind`` on broker ``node``, record it, and return the seconds
        from its end until the group converged; then wait for every replica to catch up."""
        down = wall_clock_ms()
        if kind == "broker_pause":
            self.local.pause(node)
            time.sleep(BROKER_PAUSE_S)  # the fault itself: held this long
            self.local.resume(node)
        else:
            if kind == "broker_stop":
                self.local.stop(node)
            else:
                self.local.kill(node)
            if kind == "coordinator_kill":
                self.coordinator_down_to_stable.append(
                    self.fleet.wait_converged(CONVERGE_S + 2 * SESSION_MS / 1000)
                )
            self.local.restart(node)
        up = wall_clock_ms()
        self.fleet.fault(kind, None, down, up)
        self.broker_windows.append((kind, down, up))
        self.done[kind] += 1
        took = self.fleet.wait_converged(CONVERGE_S + 2 * SESSION_MS / 1000)
        self.to_stable[kind].append(took)
        # Like a careful operator, no further broker fault before the replicas caught up.
        wait_fully_replicated(self.admin, [self.fleet.topic, "__consumer_offsets"])
        return took


def schedule(count: int, broker_count: int, rng: random.Random) -> list[str]:
    """``count`` faults, ``broker_count`` of them broker faults: every kind once, the rest at
    random, shuffled."""
    broker = list(BROKER_KINDS)[:broker_count]
    broker += [rng.choice(BROKER_KINDS) for _ in range(broker_count - len(broker))]
    member = list(MEMBER_KINDS)[: count - broker_count]
    member += [rng.choice(MEMBER_KINDS) for _ in range(count - broker_count - len(member))]
    plan = broker + member
    rng.shuffle(plan)
    return plan


def cluster_duplicate_causes(
    fleet: Fleet, rebalance_ms: int, broker_windows: list[tuple[str, int, int]]
) -> Counter[str]:
    """:func:`duplicate_causes`, with the duplicates it leaves unexplained looked up in the
    broker faults' windows (both processings within one window plus the session timeout) and
    counted by that fault's kind as ``inside <kind>``."""
    causes = duplicate_causes(fleet, rebalance_ms)
    unexplained = causes.pop("unexplained", 0)
    if not unexplained:
        return causes
    by_key: dict[tuple[int, int], list[Processed]] = defaultdict(list)
    for ev in fleet.timeline(rebalance_ms).events():
        if isinstance(ev, Processed):
            by_key[(ev.partition, ev.offset)].append(ev)
    for runs in by_key.values():
        runs.sort(key=lambda p: p.at_ms)
        for before, again in zip(runs, runs[1:], strict=False):
            member_fault = any(
                isinstance(ev, Fault)
                and ev.member == before.member
                and before.at_ms <= ev.start_ms <= again.at_ms
                for ev in fleet.parent.events()
            )
            if member_fault:
                continue
            window = next(
                (k for k, down, up in broker_windows if down <= again.at_ms <= up + SESSION_MS),
                None,
            )
            causes[f"inside {window}" if window else "unexplained"] += 1
    return causes


_LOADED = re.compile(r"Finished loading of metadata from (__consumer_offsets-\d+).* in (\d+)ms")


def coordinator_loads(cluster: LocalCluster, since_ms: int) -> list[str]:
    """The brokers' log lines about loading ``__consumer_offsets`` partitions (the window in
    which a new coordinator answers COORDINATOR_LOAD_IN_PROGRESS) written after ``since_ms``."""
    found: list[str] = []
    for node in cluster.broker_ids:
        path = cluster.log_path(node)
        if not path.exists():
            continue
        for line in path.read_text(errors="replace").splitlines():
            match = _LOADED.search(line)
            if match and _stamp_ms(line) >= since_ms:
                found.append(f"broker {node} loaded {match[1]} in {match[2]} ms")
    return found


def _stamp_ms(line: str) -> int:
    stamp = time.strptime(line[1:20], "%Y-%m-%d %H:%M:%S")
    return int(time.mktime(stamp) * 1000) + int(line[21:24])


def member_errors(fleet: Fleet, since_ms: int) -> Counter[str]:
    """What the members surfaced after ``since_ms``: ``error_cb`` errors, failed commits and
    exceptions, by name (heartbeat errors a member retries on its own surface nowhere)."""
    seen: Counter[str] = Counter()
    for kind in ("error", "commit_failed", "exception"):
        for event in fleet.side_events(kind):
            if event["at_ms"] >= since_ms:
                what = event.get("name") or str(event.get("error", "?")).split(":", 1)[0]
                seen[f"{kind}: {what}"] += 1
    return seen


def figures(values: list[float]) -> str:
    """``median/max`` of ``values`` in seconds."""
    if not values:
        return "-"
    ordered = sorted(values)
    return f"{ordered[len(ordered) // 2]:.1f}/{ordered[-1]:.1f} s"
