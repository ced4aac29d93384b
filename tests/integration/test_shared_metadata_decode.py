"""The members of one process decode and parse one Metadata answer once, against a real broker.

Each member has its own connections; the broker answers each of them with the same bytes (after
the correlation id), which is what lets the frame cache share the decoded answer and the cluster
client its parse (a 50-member cold join on 900 partitions: about 12 ms of CPU per member before).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import pytest

from consumer._runtime import frame_cache
from consumer._runtime.cluster import ClusterClient
from consumer._wire import ClusterMetadata

pytestmark = pytest.mark.integration

MEMBERS = 5
PARTITIONS = 300


async def _lookups(bootstrap: str, topic: str, decoded: list[str]) -> list[ClusterMetadata]:
    clients = [ClusterClient(bootstrap) for _ in range(MEMBERS)]
    try:
        for client in clients:
            await client.start()
        await clients[0].metadata([topic])  # the answer settles (leaders of a new topic)
        decoded.clear()
        return list(await asyncio.gather(*(client.metadata([topic]) for client in clients)))
    finally:
        for client in clients:
            await client.close()


@pytest.mark.timeout(60)
def test_one_metadata_answer_is_decoded_and_parsed_once_for_every_member_connection(
    kafka_bootstrap: str,
    create_topic: Callable[..., str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    topic = create_topic(partitions=PARTITIONS)
    decoded: list[str] = []
    lock = threading.Lock()
    decode = frame_cache.decode_response_frame

    def counting_decode(frame: bytes, response_type: Any) -> Any:
        with lock:
            decoded.append(response_type.__name__)
        return decode(frame, response_type)

    monkeypatch.setattr(frame_cache, "decode_response_frame", counting_decode)
    snapshots = asyncio.run(_lookups(kafka_bootstrap, topic, decoded))

    (entry,) = snapshots[0].topics
    assert entry.name == topic
    assert entry.error is None
    assert len(entry.partitions) == PARTITIONS
    assert all(p.leader_id >= 0 for p in entry.partitions.values())
    metadata_decodes = [name for name in decoded if name == "MetadataResponse"]
    assert len(metadata_decodes) <= 1, f"{MEMBERS} equal answers decoded {decoded}"
    assert all(snapshot is snapshots[0] for snapshot in snapshots), "one parse, shared"
