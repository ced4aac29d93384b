"""One ``consumer.ShareConsumer`` in its own process, for the tests that SIGKILL or SIGSTOP it.

Run by :class:`ShareChild` (``python share_member_child.py SPEC``); ``SPEC`` is a JSON object
with ``file`` (the JSON-lines file it writes), ``config``, ``topics`` and ``mode``:

* ``"consume"``: implicit mode, poll in a loop (each poll ACCEPTs the last one's records);
* ``"hold"``: explicit mode, poll until ``hold_count`` records arrived, then never poll or
  acknowledge again (the records stay acquired until the process dies or their locks expire).
  With ``keep_connections`` it then forks a *keeper* process that inherits (and so keeps open)
  every socket and does nothing else: once this process is killed, the broker sees silent open
  connections, as when a member's host is lost, instead of the closes the kernel sends for a
  killed process. The keeper's pid is in the ``held`` line; it ends after ``KEEPER_BOUND_S``.

Each line is flushed as it is written (a SIGKILL loses at most a torn last line) and carries a
``time.monotonic()`` stamp ``mono`` (system-wide on Linux, so comparable with the test's own):
``member_id``; ``records`` (a poll's records: partition, offset, value, delivery count);
``held`` (hold mode, once); and, from the data plane, ``dp_stop`` (partitions still fetched
after a stop), ``dp_assign`` (the partitions assigned) and ``dp_fetch`` (the partitions a
ShareFetch asks for). SIGTERM ends it with ``close()``.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from consumer import ShareConsumer
from consumer._share_runtime import dataplane

#: A keeper left behind by a crashed test ends by itself after this long.
KEEPER_BOUND_S = 120.0


class Recorder:
    """Writes one flushed JSON line per event."""

    def __init__(self, path: Path) -> None:
        self._stream = open(path, "a", encoding="utf-8")  # noqa: SIM115 - lives as long as we do
        self._lock = threading.Lock()

    def __call__(self, kind: str, **fields: Any) -> None:
        line = json.dumps({"kind": kind, "mono": time.monotonic(), **fields})
        with self._lock:
            self._stream.write(line + "\n")
            self._stream.flush()


def observe_data_plane(record: Recorder) -> None:
    """Record what the data plane is told and what it fetches (observation only)."""
    plane = dataplane.ShareDataPlane
    stop, assign, fetch_once = plane.stop, plane.assign, plane._fetch_once

    def partitions(items: Any) -> list[int]:
        return sorted(p.partition for p in items)

    def on_stop(self: Any, stopped: Any) -> None:
        stop(self, stopped)
        record("dp_stop", remaining=partitions(self._wanted))

    async def on_assign(self: Any, assigned: Any) -> None:
        assigned = list(assigned)
        record("dp_assign", partitions=partitions(assigned))
        await assign(self, assigned)

    async def on_fetch(self: Any, node: int, session: Any, wanted: Any, acks: Any) -> None:
        record("dp_fetch", partitions=partitions(wanted))
        await fetch_once(self, node, session, wanted, acks)

    plane.stop = on_stop  # type: ignore[method-assign, assignment]
    plane.assign = on_assign  # type: ignore[method-assign]
    plane._fetch_once = on_fetch  # type: ignore[method-assign]


def keep_connections() -> int:
    """Fork the keeper (see the module docstring); return its pid."""
    pid = os.fork()
    if pid == 0:  # the keeper: one thread, touching nothing of the parent's state
        time.sleep(KEEPER_BOUND_S)
        os._exit(0)
    return pid


def main() -> int:
    spec = json.loads(sys.argv[1])
    record = Recorder(Path(spec["file"]))
    observe_data_plane(record)
    hold = spec["mode"] == "hold"
    mode = "explicit" if hold else "implicit"
    consumer = ShareConsumer({**spec["config"], "share.acknowledgement.mode": mode})
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda _sig, _frame: stop.set())
    record("member_id", id=consumer.memberid())
    consumer.subscribe(spec["topics"])
    held: list[list[Any]] = []
    while not stop.is_set():
        if hold and len(held) >= int(spec["hold_count"]):
            keeper = keep_connections() if spec.get("keep_connections") else None
            record("held", records=held, keeper=keeper)
            stop.wait()  # hold the records: no poll, no acknowledgement, until killed
            break
        messages = consumer.poll(0.2)
        got = [
            [m.partition(), m.offset(), (m.value() or b"").decode(), m.delivery_count()]
            for m in messages
        ]
        if got:
            record("records", records=got)
            held += got
    consumer.close()
    record("closed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
