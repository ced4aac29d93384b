"""Make the two pictures of ``docs/howto/timelines.md`` (re-run it whenever they should change).

    python docs/howto/make_timeline_images.py            # both (starts a local broker)
    python docs/howto/make_timeline_images.py --only sim # the simulation only (no broker)

* ``img/timeline-real.{jsonl,png}``: three real ``consumer.Consumer`` members on a local Kafka
  broker (``--bootstrap`` uses yours): m1 joins, m2 joins, m3 joins, m2 leaves.
* ``img/timeline-sim.{jsonl,png}``: the same story plus a crash, simulated under a manual clock
  with ``consumer.testing.GroupSim`` (no broker, no wall clock: the same picture on every run).
"""

from __future__ import annotations

import argparse
import threading
import time
import uuid
from pathlib import Path

from consumer import Consumer
from consumer.testing import GroupSim, Timeline, plot, record
from consumer.testing.sim import crash, join, leave, until_stable, wait

IMAGES = Path(__file__).resolve().parent / "img"
PARTITIONS = 6


# --- a real run ---------------------------------------------------------------------------------


class _Member:
    """A recorded consumer polling on its own thread until ``leave()``."""

    def __init__(self, name: str, config: dict[str, str], topic: str, timeline: Timeline) -> None:
        self.consumer = Consumer(config)
        record(self.consumer, timeline, member=name)
        self._topic = topic
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        self.consumer.subscribe([self._topic])
        while not self._stop.is_set():
            self.consumer.poll(0.1)
        self.consumer.close()

    def leave(self) -> None:
        self._stop.set()
        self._thread.join(30)


def _settle(members: list[_Member], timeout_s: float = 30.0) -> None:
    """Wait until every member is STABLE at one epoch, then a little longer for the picture."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        epochs = {m.consumer.member_epoch for m in members}
        if all(m.consumer.state == "STABLE" for m in members) and len(epochs) == 1:
            time.sleep(1.0)  # a quiet stretch between the steps of the story
            return
        time.sleep(0.05)
    raise TimeoutError("the group did not settle within 30 s")


def real_run(bootstrap: str) -> Timeline:
    """m1 joins, m2 joins, m3 joins, m2 leaves: recorded from real consumers."""
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = f"timeline-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    config = {"bootstrap.servers": bootstrap, "group.id": f"g-{topic}"}
    timeline = Timeline()
    members: list[_Member] = []
    for name in ("m1", "m2", "m3"):
        members.append(_Member(name, config, topic, timeline))
        _settle(members)
    m2 = members.pop(1)
    m2.leave()
    _settle(members)
    for member in members:
        member.leave()
    return timeline


# --- a simulated run ----------------------------------------------------------------------------


def simulated_run() -> tuple[Timeline, int]:
    """m1, m2, m3 join; m2 leaves; m1 crashes and its session expires. Returns the timeline
    and the time the run ended."""
    sim = GroupSim(
        {"orders": PARTITIONS}, seed=7, heartbeat_interval_ms=1_000, session_timeout_ms=6_000
    )
    quiet = wait(2_000)  # a quiet stretch between the steps of the story
    result = sim.run(
        [
            *(step for name in ("m1", "m2", "m3") for step in (join(name), until_stable(), quiet)),
            leave("m2"),
            until_stable(),
            quiet,
            crash("m1"),
            until_stable(),
            quiet,
        ]
    )
    result.report.raise_for_violations()
    return result.timeline, sim.cluster.clock.now_ms


# --- main ---------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=("real", "sim"), default=None)
    parser.add_argument("--bootstrap", default=None, help="use this cluster, not a local broker")
    args = parser.parse_args()
    IMAGES.mkdir(exist_ok=True)
    if args.only in (None, "sim"):
        timeline, end_ms = simulated_run()
        timeline.write_jsonl(IMAGES / "timeline-sim.jsonl")
        title = "Simulated: 3 joins, a leave, a crash"
        plot(timeline, IMAGES / "timeline-sim.png", title=title, until_ms=end_ms)
        print(f"wrote {IMAGES / 'timeline-sim.png'}")
    if args.only in (None, "real"):
        if args.bootstrap is not None:
            timeline = real_run(args.bootstrap)
        else:
            from consumer.testing import running_broker

            with running_broker() as broker:
                timeline = real_run(broker.bootstrap_servers)
        timeline.write_jsonl(IMAGES / "timeline-real.jsonl")
        plot(timeline, IMAGES / "timeline-real.png", title="Real broker: 3 joins, then m2 leaves")
        print(f"wrote {IMAGES / 'timeline-real.png'}")


if __name__ == "__main__":
    main()
