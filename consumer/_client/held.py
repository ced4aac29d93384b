"""Records taken from librdkafka in one batch and not yet handed to the application.

``poll()`` returns one record per call. Asking librdkafka for each one costs a C call, a GIL
release and a queue lock per record; taking what it already holds with ``consume(n, 0)`` and
handing those out one by one costs about half (``benchmarks/analysis.md``, session 12).

librdkafka moves a partition's position past every record of a batch as soon as the batch is
taken, so while records are held its position runs ahead of what the application has seen.
:class:`HeldRecords` keeps what is needed to stay exact:

* :meth:`lower` brings positions back to the first record still held (``position()``,
  commits, the consumed offsets reported to the member and kept for ``on_revoke``); a partition
  none of whose records has been handed out since its start (assignment or seek) has no position,
  as librdkafka says of it after ``poll()`` (OFFSET_INVALID; known for absolute starts only);
* :meth:`drop` forgets the records of partitions that are unassigned or sought;
* :meth:`set_aside` keeps those of paused partitions out of ``poll()`` and :meth:`give_back`
  returns them on ``resume()`` (librdkafka resumes fetching from its own position, past them).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Collection, Iterable, Mapping

from confluent_kafka import Message

__all__ = ["HOLD_BATCH", "HeldRecords"]

TopicPartitionKey = tuple[str, int]

#: How many records one ``consume(n, 0)`` may take for ``poll()`` to hand out: as many as
#: ``poll()``'s fast path returns between two full turns (``FAST_POLL_BUDGET``).
HOLD_BATCH = 256


def _key(message: Message) -> TopicPartitionKey:
    return (message.topic() or "", message.partition() or 0)


class HeldRecords:
    """The records one batch brought that ``poll()`` has not returned yet, in librdkafka's
    order, and those of paused partitions, set aside until they are resumed.

    ``consume`` is librdkafka's ``consume(num_messages, timeout_s)``.
    """

    def __init__(self, consume: Callable[[int, float], list[Message]]) -> None:
        self._consume = consume
        self._queue: deque[Message] = deque()
        #: The next held record (``IndexError`` when none is held): bound once, so that
        #: ``poll()``'s fast path takes a record with one C call.
        self.take = self._queue.popleft
        self._set_aside: dict[TopicPartitionKey, list[Message]] = {}
        #: The absolute offset each partition was last assigned or sought at.
        self._starts: dict[TopicPartitionKey, int] = {}

    def __len__(self) -> int:
        return len(self._queue)

    def take_or_fetch(self) -> Message | None:
        """The next held record; when none is held, take what librdkafka holds now (without
        waiting) and return its first record, or ``None`` when it holds nothing either."""
        queue = self._queue
        if not queue:
            batch = self._consume(HOLD_BATCH, 0)
            if not batch:
                return None
            queue.extend(batch)
        return queue.popleft()

    def take_up_to(self, count: int) -> list[Message]:
        """Up to ``count`` held records, oldest first (``consume()`` hands these out first)."""
        queue = self._queue
        if len(queue) <= count:
            taken = list(queue)
            queue.clear()
            return taken
        return [queue.popleft() for _ in range(count)]

    def note_start(self, key: TopicPartitionKey, offset: int) -> None:
        """A partition starts (assigned or sought) at ``offset`` (absolute offsets only)."""
        if offset >= 0:
            self._starts[key] = offset

    def lower(
        self, positions: Mapping[TopicPartitionKey, int], keys: Collection[TopicPartitionKey]
    ) -> dict[TopicPartitionKey, int]:
        """``positions`` with every partition of ``keys`` that has a held (or set-aside) record
        moved back to that record's offset: the next one the application will get (none at all
        when that is the partition's start: nothing of it was handed out yet)."""
        lowered = dict(positions)
        if not self._queue and not self._set_aside:
            return lowered
        wanted = set(keys)
        for key, records in self._set_aside.items():
            if key in wanted:
                first = _first_record_offset(records)
                if first is not None:
                    self._lower_to(lowered, key, first)
                    wanted.discard(key)
        for message in self._queue:
            if not wanted:
                break
            if message.error() is not None:
                continue
            key = _key(message)
            if key in wanted:
                wanted.discard(key)
                offset = message.offset()
                if offset is not None and offset >= 0:
                    self._lower_to(lowered, key, offset)
        return lowered

    def _lower_to(
        self, lowered: dict[TopicPartitionKey, int], key: TopicPartitionKey, first: int
    ) -> None:
        if self._starts.get(key) == first:
            lowered.pop(key, None)
        else:
            lowered[key] = first

    def drop(self, keys: Iterable[TopicPartitionKey]) -> None:
        """Forget the held and set-aside records of these partitions (unassigned or sought:
        librdkafka fetches them again from wherever their next owner or position says)."""
        dropped = set(keys)
        for key in dropped:
            self._set_aside.pop(key, None)
            self._starts.pop(key, None)
        self._keep_only(lambda message: _key(message) not in dropped)

    def set_aside(self, keys: Iterable[TopicPartitionKey]) -> None:
        """Hold back the records of paused partitions until :meth:`give_back`."""
        paused = set(keys)
        if not self._queue or not paused:
            return
        aside: dict[TopicPartitionKey, list[Message]] = {}

        def unpaused(message: Message) -> bool:
            key = _key(message)
            if key in paused:
                aside.setdefault(key, []).append(message)
                return False
            return True

        self._keep_only(unpaused)
        for key, records in aside.items():
            self._set_aside.setdefault(key, []).extend(records)

    def give_back(self, keys: Iterable[TopicPartitionKey]) -> None:
        """Return the set-aside records of resumed partitions, ahead of anything taken later
        (librdkafka fetches those partitions again from past them)."""
        returned: list[Message] = []
        for key in keys:
            returned.extend(self._set_aside.pop(key, ()))
        self._queue.extendleft(reversed(returned))

    def clear(self) -> None:
        """Forget everything (the data plane closes)."""
        self._queue.clear()
        self._set_aside.clear()
        self._starts.clear()

    def _keep_only(self, keep: Callable[[Message], bool]) -> None:
        queue = self._queue
        if queue:
            kept = [message for message in queue if keep(message)]
            if len(kept) != len(queue):
                queue.clear()  # in place: ``take`` is bound to this deque
                queue.extend(kept)


def _first_record_offset(records: Iterable[Message]) -> int | None:
    for message in records:
        offset = message.offset()
        if message.error() is None and offset is not None and offset >= 0:
            return offset
    return None
