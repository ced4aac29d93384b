"""``HeldRecords``: what ``poll()`` holds from one batch, and the positions it lowers.

Sans-I/O: librdkafka's ``consume`` is a list of real ``confluent_kafka.Message`` objects handed
out in batches. The broker-side behaviour (positions, commits, pause, seek and rebalances while
records are held) is in ``tests/integration/test_poll_batch.py``.
"""

from __future__ import annotations

from confluent_kafka import KafkaError, Message

from consumer._client.held import HOLD_BATCH, HeldRecords


def _record(topic: str, partition: int, offset: int) -> Message:
    return Message(topic=topic, partition=partition, offset=offset, value=b"v")


def _eof(topic: str, partition: int, offset: int) -> Message:
    return Message(
        topic=topic,
        partition=partition,
        offset=offset,
        error=KafkaError(KafkaError._PARTITION_EOF),
    )


class _Librdkafka:
    """librdkafka's ``consume(n, timeout_s)`` over a fixed list of what it holds."""

    def __init__(self, messages: list[Message]) -> None:
        self.messages = list(messages)
        self.calls: list[tuple[int, float]] = []

    def consume(self, num_messages: int, timeout_s: float) -> list[Message]:
        self.calls.append((num_messages, timeout_s))
        batch, self.messages = self.messages[:num_messages], self.messages[num_messages:]
        return batch


def _where(message: Message | None) -> tuple[str | None, int | None, int | None]:
    assert message is not None
    return (message.topic(), message.partition(), message.offset())


def _held_after_one(messages: list[Message]) -> tuple[HeldRecords, _Librdkafka]:
    """A batch taken, its first record handed out."""
    librdkafka = _Librdkafka(messages)
    held = HeldRecords(librdkafka.consume)
    held.take_or_fetch()
    return held, librdkafka


def test_one_batch_is_taken_without_waiting_and_handed_out_in_order() -> None:
    messages = [_record("t", i % 2, i // 2) for i in range(6)]
    librdkafka = _Librdkafka(messages)
    held = HeldRecords(librdkafka.consume)

    taken = [held.take_or_fetch() for _ in range(6)]

    assert [_where(m) for m in taken] == [_where(m) for m in messages]
    assert librdkafka.calls == [(HOLD_BATCH, 0)]
    assert held.take_or_fetch() is None
    assert librdkafka.calls == [(HOLD_BATCH, 0), (HOLD_BATCH, 0)]


def test_positions_are_lowered_to_the_first_held_record_of_each_partition() -> None:
    held, _ = _held_after_one(
        [_record("t", 0, 10), _record("t", 1, 20), _record("t", 0, 11), _record("u", 0, 5)]
    )
    # librdkafka's positions are past the whole batch; ("t", 0) 10 was handed out.
    after_batch = {("t", 0): 12, ("t", 1): 21, ("u", 0): 6, ("v", 0): 3}

    lowered = held.lower(after_batch, list(after_batch))

    assert lowered == {("t", 0): 11, ("t", 1): 20, ("u", 0): 5, ("v", 0): 3}
    assert held.lower(after_batch, [("v", 0)]) == after_batch, "only the keys asked for move"


def test_a_partition_nothing_was_handed_out_of_since_its_start_has_no_position() -> None:
    librdkafka = _Librdkafka([_record("t", 0, 10), _record("t", 1, 20), _record("t", 0, 11)])
    held = HeldRecords(librdkafka.consume)
    held.note_start(("t", 0), 10)
    held.note_start(("t", 1), 20)
    held.note_start(("t", 2), -2)  # a logical start is not known: it is not noted

    assert _where(held.take_or_fetch()) == ("t", 0, 10)
    # librdkafka says OFFSET_INVALID for ("t", 1) after poll(): none of its records came out.
    assert held.lower({("t", 0): 12, ("t", 1): 21}, [("t", 0), ("t", 1)]) == {("t", 0): 11}
    assert _where(held.take_or_fetch()) == ("t", 1, 20)
    assert held.lower({("t", 0): 12, ("t", 1): 21}, [("t", 0), ("t", 1)]) == {
        ("t", 0): 11,
        ("t", 1): 21,
    }

    held.drop([("t", 0)])  # unassigned or sought: its start goes with it
    held.note_start(("t", 0), 5)
    assert len(held) == 0
    librdkafka.messages = [_record("t", 0, 5), _record("t", 0, 6)]
    assert _where(held.take_or_fetch()) == ("t", 0, 5)
    assert held.lower({("t", 0): 7}, [("t", 0)]) == {("t", 0): 6}


def test_an_event_in_the_batch_does_not_move_a_position() -> None:
    held, _ = _held_after_one([_record("t", 0, 4), _eof("t", 0, 5), _eof("t", 1, 9)])

    assert held.lower({("t", 0): 5, ("t", 1): 9}, [("t", 0), ("t", 1)]) == {
        ("t", 0): 5,
        ("t", 1): 9,
    }
    assert [_where(held.take_or_fetch()) for _ in range(2)] == [("t", 0, 5), ("t", 1, 9)]


def test_nothing_held_leaves_the_positions_as_they_are() -> None:
    held = HeldRecords(_Librdkafka([]).consume)
    assert held.lower({("t", 0): 7}, [("t", 0)]) == {("t", 0): 7}


def test_dropped_partitions_lose_their_held_records_and_others_keep_their_order() -> None:
    held, _ = _held_after_one(
        [_record("t", 0, 0), _record("t", 1, 0), _record("t", 0, 1), _record("t", 1, 1)]
    )

    held.drop([("t", 1)])

    assert len(held) == 1
    assert _where(held.take()) == ("t", 0, 1)
    assert held.lower({("t", 1): 2}, [("t", 1)]) == {("t", 1): 2}


def test_paused_records_are_set_aside_and_come_back_first_on_resume() -> None:
    held, librdkafka = _held_after_one(
        [_record("t", 0, 0), _record("t", 1, 0), _record("t", 0, 1), _record("t", 1, 1)]
    )

    held.set_aside([("t", 1)])

    assert [_where(m) for m in held.take_up_to(10)] == [("t", 0, 1)]
    assert held.lower({("t", 1): 2}, [("t", 1)]) == {("t", 1): 0}, "paused: still at 0"
    librdkafka.messages = [_record("t", 0, 2)]
    assert _where(held.take_or_fetch()) == ("t", 0, 2)

    held.give_back([("t", 1)])
    librdkafka.messages = [_record("t", 1, 2)]  # librdkafka resumes past the set-aside ones
    assert [_where(held.take_or_fetch()) for _ in range(3)] == [
        ("t", 1, 0),
        ("t", 1, 1),
        ("t", 1, 2),
    ]


def test_a_seek_while_paused_drops_the_set_aside_records() -> None:
    held, _ = _held_after_one([_record("t", 0, 0), _record("t", 1, 0), _record("t", 1, 1)])
    held.set_aside([("t", 1)])

    held.drop([("t", 1)])
    held.give_back([("t", 1)])

    assert len(held) == 0
    assert held.lower({("t", 1): 40}, [("t", 1)]) == {("t", 1): 40}


def test_take_up_to_hands_out_the_oldest_first() -> None:
    held, _ = _held_after_one([_record("t", 0, i) for i in range(5)])

    assert [m.offset() for m in held.take_up_to(2)] == [1, 2]
    assert [m.offset() for m in held.take_up_to(9)] == [3, 4]
    assert held.take_up_to(1) == []


def test_clear_forgets_held_and_set_aside_records() -> None:
    held, _ = _held_after_one([_record("t", 0, 0), _record("t", 0, 1), _record("t", 1, 0)])
    held.set_aside([("t", 1)])

    held.clear()
    held.give_back([("t", 1)])

    assert len(held) == 0
