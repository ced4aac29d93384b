"""Several group members in one process, driven by the scaling benchmark.

``python -m benchmarks._group_proc '<json spec>'``: the spec of :mod:`benchmarks._member_proc`
plus ``names``, the members this process hosts (each with its own consumer and its own polling
thread). Protocol, one JSON object per line on stdout, as ``_member_proc``'s with the member's
name in ``m``:

* ``{"ev": "ready", "at", "base_rss": bytes}`` once every consumer is built (``base_rss`` is the
  resident set measured after importing the client libraries, before the first consumer);
* ``{"ev": "assign"|"revoke"|"lost"|"state", "at", "m", ...}`` per member;
* ``{"ev": "cost", "at", "cpu_s", "rss"}`` for each ``cost`` line on stdin (process CPU time so
  far, resident set now);
* stdin ``go`` subscribes every member; ``close`` closes them all and exits.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any

import psutil

from benchmarks._member_proc import build, emit

_names: dict[int, str] = {}  # id(BackgroundRuntime) -> member name (ours only)
_constructing: list[str] = [""]  # the member whose consumer the main thread is building


def _patch_state_stamps() -> None:
    from consumer._runtime.background import BackgroundRuntime

    original_init = BackgroundRuntime.__init__
    original_publish = BackgroundRuntime._publish

    def init(self: BackgroundRuntime, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        _names[id(self)] = _constructing[0]

    def publish(self: BackgroundRuntime) -> None:
        before = self.state
        original_publish(self)
        if self.state is not before:
            name = _names.get(id(self), "?")
            emit({"ev": "state", "at": time.monotonic(), "m": name, "state": self.state.name})

    BackgroundRuntime.__init__ = init  # type: ignore[method-assign]
    BackgroundRuntime._publish = publish  # type: ignore[method-assign]


def _callback(kind: str, name: str) -> Any:
    def on_event(_consumer: Any, partitions: list[Any]) -> None:
        parts = [tp.partition for tp in partitions]
        emit({"ev": kind, "at": time.monotonic(), "m": name, "parts": parts})

    return on_event


def main(spec: dict[str, Any]) -> None:
    """Build every member, wait for ``go``, subscribe them all, serve commands until ``close``."""
    import confluent_kafka  # noqa: F401 - loaded before the baseline, as every member needs it

    if spec["impl"] == "ours":
        import consumer as _package  # noqa: F401 - likewise

        _patch_state_stamps()
    process = psutil.Process()
    base_rss = process.memory_info().rss
    consumers: dict[str, Any] = {}
    for name in spec["names"]:
        _constructing[0] = name
        consumers[name] = build({**spec, "name": name}, stamp_states=False)
    emit({"ev": "ready", "at": time.monotonic(), "base_rss": base_rss})
    closing = threading.Event()

    def loop(consumer: Any) -> None:
        while not closing.is_set():
            consumer.poll(0.1)

    threads: list[threading.Thread] = []
    for line in sys.stdin:
        command = line.strip()
        if command == "go" and not threads:
            for name, member in consumers.items():
                _constructing[0] = name
                member.subscribe(
                    [spec["topic"]],
                    on_assign=_callback("assign", name),
                    on_revoke=_callback("revoke", name),
                    on_lost=_callback("lost", name),
                )
            threads = [
                threading.Thread(target=loop, args=(c,), daemon=True) for c in consumers.values()
            ]
            for thread in threads:
                thread.start()
        elif command == "cost":
            cpu = process.cpu_times()
            rss = process.memory_info().rss
            emit({"ev": "cost", "at": time.monotonic(), "cpu_s": cpu.user + cpu.system, "rss": rss})
        elif command == "close":
            break
    closing.set()
    for thread in threads:
        thread.join(5)
    closers = [threading.Thread(target=c.close, daemon=True) for c in consumers.values()]
    for closer in closers:  # in parallel: 25 members closing one after the other take seconds
        closer.start()
    for closer in closers:
        closer.join(30)
    emit({"ev": "closed", "at": time.monotonic()})


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
