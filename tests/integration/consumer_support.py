"""Shared helpers for the ``consumer.Consumer`` integration tests: which implementation they
drive, the consumer factory, and the records they produce.

Every test builds its consumers through the ``make_consumer`` fixture (import
``make_consumer_fixture`` into the test module to make it available) or
``tests.support.build_consumer`` (plain function, used by child processes). Which implementation
they get is chosen by the environment, never by a conftest:

* ``KGM_CONSUMER_IMPL=confluent``: ``confluent_kafka.Consumer({**config, "group.protocol":
  "consumer"})``, i.e. librdkafka's own KIP-848 member. The tests are developed and validated
  against it.
* anything else (the default, and what CI runs): ``consumer.Consumer(config)``, our member.

The other helpers, in the order the tests use them: ``callback_timeline.Timeline`` (rebalance
callbacks with ``time.monotonic()`` stamps, ownership intervals and the overlap check),
``member_thread.MemberThread`` (one in-process member polling on its own thread),
``tests.support.wait_until`` (bounded condition wait), :func:`produce_numbered` (records whose
value is their sequence number) and ``child_member.ChildMember`` (a member in a child process,
for SIGKILL tests).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import pytest
from confluent_kafka import KafkaError, Message, Producer

from tests.support import OURS, build_consumer, selected_impl, wait_until

#: Broker settings of the session broker (``consumer.testing.real.broker.fast_group_settings``).
SESSION_TIMEOUT_S = 6.0
HEARTBEAT_INTERVAL_S = 0.5

#: Generous bound for a group to settle after one membership change (join, leave, new topic).
CONVERGENCE_S = 30.0


# --------------------------------------------------------------------------------------------
# The consumer factory
# --------------------------------------------------------------------------------------------


def safe_close(consumer: Any) -> None:
    """``close()`` that tolerates an already closed (or broken) consumer."""
    try:
        consumer.close()
    except RuntimeError as exc:  # confluent: "Consumer closed"
        if "closed" not in str(exc).lower():
            raise
    except Exception:  # noqa: BLE001 - teardown must go on; the test has already reported
        pass


class ConsumerFactory:
    """Builds consumers of the selected implementation and closes leftovers at teardown.

    ``impl`` tells tests which implementation they drive, so checks of our extras
    (``state``, ``member_epoch``) run exactly when it is ours.
    """

    def __init__(self, bootstrap: str, impl: str) -> None:
        self.bootstrap = bootstrap
        self.impl = impl
        self._made: list[Any] = []

    @property
    def is_ours(self) -> bool:
        return self.impl == OURS

    def __call__(self, config: Mapping[str, Any], *, impl: str | None = None) -> Any:
        """A new consumer; ``bootstrap.servers`` defaults to the cluster under test.

        ``impl`` forces an implementation (interop tests mix them); it defaults to the
        selected one.
        """
        consumer = build_consumer(
            {"bootstrap.servers": self.bootstrap, **config}, impl or self.impl
        )
        self._made.append(consumer)
        return consumer

    def config_for_child(self, config: Mapping[str, Any]) -> dict[str, Any]:
        return {"bootstrap.servers": self.bootstrap, **config}

    def close_all(self) -> None:
        for consumer in self._made:
            safe_close(consumer)


@pytest.fixture(name="make_consumer")
def make_consumer_fixture(kafka_bootstrap: str) -> Iterator[ConsumerFactory]:
    """Factory fixture: ``make_consumer({"group.id": ...})`` -> consumer; all closed at the end."""
    factory = ConsumerFactory(kafka_bootstrap, selected_impl())
    try:
        yield factory
    finally:
        factory.close_all()


def check_extras(factory: ConsumerFactory, consumer: Any, *, state: str | None = None) -> None:
    """For our implementation only: ``state`` has the expected name, ``member_epoch`` is an int.

    In confluent mode it does nothing (librdkafka has no such attributes); in the default mode
    it always runs.
    """
    if not factory.is_ours:
        return
    assert isinstance(consumer.member_epoch, int), "member_epoch must be an int"
    if state is not None:
        # The broker counts an assignment as the member's own when it sends it; the member is
        # STABLE only after OffsetFetch, on_assign and its ack. Wait for that, bounded.
        wait_until(
            lambda: consumer.state == state,
            CONVERGENCE_S,
            f"state {state}",
            details=lambda: f"state is {consumer.state!r}, expected {state!r}",
        )


def wait_for_stable_epochs(
    factory: ConsumerFactory, consumers: Sequence[Any], timeout_s: float = CONVERGENCE_S
) -> None:
    """Ours only: every member is STABLE at one shared, positive member epoch."""
    if not factory.is_ours:
        return

    def settled() -> bool:
        epochs = {c.member_epoch for c in consumers}
        return all(c.state == "STABLE" for c in consumers) and len(epochs) == 1 and min(epochs) > 0

    wait_until(
        settled,
        timeout_s,
        "all members STABLE at the same member epoch",
        details=lambda: str([(c.state, c.member_epoch) for c in consumers]),
    )


# --------------------------------------------------------------------------------------------
# Records
# --------------------------------------------------------------------------------------------


def make_producer(bootstrap: str) -> Producer:
    return Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 20,
            "batch.num.messages": 10000,
            "queue.buffering.max.messages": 1_000_000,
            "acks": "all",
            "enable.idempotence": True,
        }
    )


def produce_numbered(
    producer: Producer, topic: str, start: int, count: int, partitions: int, *, flush: bool = True
) -> range:
    """Produce values ``str(n)`` for n in ``[start, start+count)``, round-robin over partitions."""
    failures: list[KafkaError] = []

    def delivered(err: KafkaError | None, _msg: Message) -> None:
        if err is not None:
            failures.append(err)

    for n in range(start, start + count):
        while True:
            try:
                producer.produce(
                    topic, str(n).encode(), partition=n % partitions, on_delivery=delivered
                )
                break
            except BufferError:
                producer.poll(0.05)
        if n % 1000 == 0:
            producer.poll(0)
    if flush:
        remaining = producer.flush(60)
        assert remaining == 0, f"{remaining} records not delivered within 60s"
        assert not failures, f"delivery failures: {failures[:5]}"
    return range(start, start + count)


def values_of(consumed: Iterable[tuple[int, int, bytes | None]]) -> set[int]:
    return {int(value) for _p, _o, value in consumed if value is not None}


def duplicates(consumed: Iterable[tuple[int, int]]) -> dict[tuple[int, int], int]:
    """``(partition, offset)`` pairs consumed more than once, with their counts."""
    counts = Counter(consumed)
    return {key: n for key, n in counts.items() if n > 1}
