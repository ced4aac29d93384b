"""``consumer.ShareConsumer``: a KIP-932 share-group consumer shaped like
``confluent_kafka.ShareConsumer`` (confluent-kafka-python 2.16, Preview).

The group side is :class:`consumer.share.ShareMember`; the data plane is ours too (ShareFetch and
ShareAcknowledge through share sessions, :mod:`consumer._share_runtime`), so no librdkafka consumer
is involved. ``poll`` returns a ``confluent_kafka.Messages`` sequence of ``confluent_kafka.Message``
objects; each message's ``delivery_count()`` is the broker's delivery count (1 on the first
delivery, 2 after one RELEASE or lock expiry, ...).

Acknowledgement modes (``share.acknowledgement.mode``):

* ``implicit`` (default): every record of the previous ``poll`` is ACCEPTed at the next ``poll``,
  ``commit_sync``, ``commit_async`` or ``close``; ``acknowledge`` raises ``IllegalStateException``.
* ``explicit``: each record must be acknowledged with ``acknowledge`` or ``acknowledge_offset``
  (ACCEPT, RELEASE or REJECT) before the next ``poll``, which raises ``IllegalStateException``
  otherwise. :data:`SHARE_ACKNOWLEDGE_TYPE_RENEW` (KIP-1222, Kafka 4.2+) extends a record's lock
  instead; a terminal acknowledgement must still follow.

Acknowledgements ride on the next ShareFetch to the partition's leader; ``commit_sync`` and
``commit_async`` send them at once (ShareAcknowledge); ``close`` sends the last ones on the closing
request of each share session, which also releases every record still held, then leaves the
group. Their outcomes reach the acknowledgement commit callback
(:meth:`ShareConsumer.set_acknowledgement_commit_callback`) on the application thread. The
consumer is not thread-safe (as confluent's).
"""

from consumer.share_consumer._config import (
    SHARE_ACKNOWLEDGE_TYPE_RENEW,
    ShareConsumerConfig,
    parse_share_config,
)
from consumer.share_consumer._facade import ShareConsumer

# AcknowledgeType is confluent-kafka's own (re-exported by consumer, not part of our __all__).
__all__ = [
    "SHARE_ACKNOWLEDGE_TYPE_RENEW",
    "ShareConsumer",
    "ShareConsumerConfig",
    "parse_share_config",
]
