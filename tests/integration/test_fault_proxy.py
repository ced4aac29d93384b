"""FaultProxy and ProxiedBroker against a real broker, with confluent-kafka clients.

One extra broker serves the module, with a proxied listener for each of two members (``m1``,
``m2``). Every test heals both proxies when it ends.
"""

from __future__ import annotations

import statistics
import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from consumer.testing.real.proxy import FaultProxy, ProxiedBroker, proxied_broker

pytestmark = pytest.mark.integration

MEMBERS = ("m1", "m2")
# Short client timeouts so that a blackholed request fails in seconds, not minutes.
FAST_FAILURE = {"socket.timeout.ms": "2000", "log_level": 0}


@pytest.fixture(scope="module")
def cluster() -> Iterator[ProxiedBroker]:
    """The module's broker, one proxied listener per member."""
    started = time.monotonic()
    with proxied_broker(MEMBERS) as proxied:
        print(f"proxied broker ready in {time.monotonic() - started:.1f} s")
        yield proxied


@pytest.fixture(autouse=True)
def _healed(cluster: ProxiedBroker) -> Iterator[None]:
    yield
    for member in MEMBERS:
        cluster.proxy(member).heal()
        cluster.proxy(member).delay(0)


def _topic(cluster: ProxiedBroker, partitions: int = 1) -> str:
    topic = f"proxy-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": cluster.direct_bootstrap_servers})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(timeout=30)
    return topic


def _produce(bootstrap: str, topic: str, count: int, partition: int = 0) -> list[KafkaError]:
    errors: list[KafkaError] = []

    def delivered(err: KafkaError | None, _msg: object) -> None:
        if err is not None:
            errors.append(err)

    producer = Producer(
        {"bootstrap.servers": bootstrap, "message.timeout.ms": "3000", **FAST_FAILURE}
    )
    for i in range(count):
        producer.produce(topic, f"r{i}".encode(), partition=partition, on_delivery=delivered)
    assert producer.flush(15) == 0, "records still queued after 15 s"
    return errors


def _consumer(bootstrap: str, group: str) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "log_level": 0,
        }
    )


def _poll_values(consumer: Consumer, count: int, timeout_s: float) -> list[bytes]:
    values: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    while len(values) < count and time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is None or msg.error() is not None:
            continue
        value = msg.value()
        assert value is not None
        values.append(value)
    return values


def _metadata_ok(bootstrap: str, timeout_s: float) -> bool:
    try:
        AdminClient({"bootstrap.servers": bootstrap, **FAST_FAILURE}).list_topics(timeout=timeout_s)
    except KafkaException:
        return False
    return True


def test_each_member_is_told_to_keep_using_its_own_proxy(cluster: ProxiedBroker) -> None:
    for member in MEMBERS:
        proxy = cluster.proxy(member)
        brokers = AdminClient({"bootstrap.servers": proxy.bootstrap_servers}).list_topics(
            timeout=10
        )
        assert [(b.host, b.port) for b in brokers.brokers.values()] == [proxy.address]
    direct = AdminClient({"bootstrap.servers": cluster.direct_bootstrap_servers}).list_topics(
        timeout=10
    )
    assert [b.port for b in direct.brokers.values()] == [cluster.broker.port]


def test_produce_and_consume_through_the_proxy(cluster: ProxiedBroker) -> None:
    proxy = cluster.proxy("m1")
    before = proxy.stats()
    topic = _topic(cluster)
    assert _produce(proxy.bootstrap_servers, topic, 10) == []
    consumer = _consumer(proxy.bootstrap_servers, f"g-{uuid.uuid4().hex[:8]}")
    try:
        consumer.subscribe([topic])
        assert _poll_values(consumer, 10, timeout_s=30) == [f"r{i}".encode() for i in range(10)]
    finally:
        consumer.close()
    after = proxy.stats()
    assert after.accepted > before.accepted
    assert after.bytes_up > before.bytes_up
    assert after.bytes_down > before.bytes_down


def test_blackhole_stalls_requests_and_heal_restores_progress(cluster: ProxiedBroker) -> None:
    proxy = cluster.proxy("m1")
    topic = _topic(cluster)
    admin = AdminClient({"bootstrap.servers": proxy.bootstrap_servers, **FAST_FAILURE})
    admin.list_topics(timeout=10)  # connected
    proxy.blackhole()
    assert proxy.stats().active >= 1, "blackhole keeps connections open"
    with pytest.raises(KafkaException) as timed_out:
        admin.list_topics(timeout=2)
    # Stalled: librdkafka reports the request as timed out, or (when its socket timeout fires
    # first) as a transport failure; either way nothing came back through the black hole.
    assert timed_out.value.args[0].code() in (KafkaError._TIMED_OUT, KafkaError._TRANSPORT)
    errors = _produce(proxy.bootstrap_servers, topic, 3)
    assert [e.code() for e in errors] == [KafkaError._MSG_TIMED_OUT] * 3
    proxy.heal()
    assert _produce(proxy.bootstrap_servers, topic, 3) == []
    admin.list_topics(timeout=10)


def test_drop_resets_connections_and_refuses_until_heal(cluster: ProxiedBroker) -> None:
    proxy = cluster.proxy("m1")
    errors: list[KafkaError] = []
    admin = AdminClient(
        {"bootstrap.servers": proxy.bootstrap_servers, "error_cb": errors.append, **FAST_FAILURE}
    )
    admin.list_topics(timeout=10)
    assert proxy.stats().active >= 1
    refused = proxy.stats().refused
    proxy.drop()
    proxy.wait_for(lambda s: s.active == 0, timeout_s=5)
    # The client notices and reconnects; every new attempt is reset.
    proxy.wait_for(lambda s: s.refused > refused, timeout_s=10)
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=2)
    deadline = time.monotonic() + 10
    while not errors and time.monotonic() < deadline:
        admin.poll(0.2)
    assert any(e.code() in (KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN) for e in errors)
    proxy.heal()
    admin.list_topics(timeout=10)
    assert proxy.stats().active >= 1


def _metadata_round_trips_s(admin: AdminClient, count: int) -> list[float]:
    times = []
    for _ in range(count):
        started = time.perf_counter()
        admin.list_topics(timeout=10)
        times.append(time.perf_counter() - started)
    return times


def test_delay_adds_latency_both_ways(cluster: ProxiedBroker) -> None:
    proxy = cluster.proxy("m1")
    delay_ms = 150
    admin = AdminClient({"bootstrap.servers": proxy.bootstrap_servers})
    admin.list_topics(timeout=10)  # connect first: only round trips are measured
    plain = statistics.median(_metadata_round_trips_s(admin, 5))
    proxy.delay(delay_ms)
    assert proxy.delay_ms == delay_ms
    delayed = _metadata_round_trips_s(admin, 5)
    # A request and its response each wait delay_ms: at least 2 x delay per round trip.
    assert min(delayed) >= 2 * delay_ms / 1000 * 0.95, delayed
    assert statistics.median(delayed) - plain >= 1.5 * delay_ms / 1000, (plain, delayed)
    assert statistics.median(delayed) < 2 * delay_ms / 1000 + 2.0, delayed  # not a stall
    proxy.delay(0)
    assert statistics.median(_metadata_round_trips_s(admin, 5)) < delay_ms / 1000


def test_faulting_one_member_leaves_the_other_alone(cluster: ProxiedBroker) -> None:
    """m1 and m2 are one group; m1's path is blackholed, m2 keeps consuming its partitions."""
    topic = _topic(cluster, partitions=2)
    group = f"g-{uuid.uuid4().hex[:8]}"
    m1 = _consumer(cluster.bootstrap_servers("m1"), group)
    m2 = _consumer(cluster.bootstrap_servers("m2"), group)
    try:
        for consumer in (m1, m2):
            consumer.subscribe([topic])
        _wait_for_split_assignment(m1, m2, timeout_s=30)
        [m2_partition] = [tp.partition for tp in m2.assignment()]
        cluster.proxy("m1").blackhole()
        direct = cluster.direct_bootstrap_servers
        assert _produce(direct, topic, 5, partition=1 - m2_partition) == []
        assert _produce(direct, topic, 5, partition=m2_partition) == []
        assert len(_poll_values(m2, 5, timeout_s=10)) == 5, "m2 stalled by m1's fault"
        assert _poll_values(m1, 1, timeout_s=1.0) == [], "m1 made progress through a blackhole"
        assert not _metadata_ok(cluster.bootstrap_servers("m1"), timeout_s=2)
        assert _metadata_ok(cluster.bootstrap_servers("m2"), timeout_s=5)
        cluster.proxy("m1").heal()
        assert _metadata_ok(cluster.bootstrap_servers("m1"), timeout_s=10)
    finally:
        m1.close()
        m2.close()


def _wait_for_split_assignment(m1: Consumer, m2: Consumer, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for consumer in (m1, m2):
            consumer.poll(0.1)  # drives the group protocol and the assignment callbacks
        owned: list[TopicPartition] = m1.assignment() + m2.assignment()
        if len(m1.assignment()) == 1 and len(m2.assignment()) == 1 and len(owned) == 2:
            return
    raise AssertionError(f"no 1+1 assignment in {timeout_s} s: {m1.assignment()} {m2.assignment()}")


def test_a_proxy_alone_can_be_started_and_stopped(cluster: ProxiedBroker) -> None:
    with FaultProxy(("127.0.0.1", cluster.broker.port), name="direct") as proxy:
        assert _metadata_ok(proxy.bootstrap_servers, timeout_s=10)
        assert proxy.stats().accepted >= 1
    assert not _metadata_ok(proxy.bootstrap_servers, timeout_s=1)
