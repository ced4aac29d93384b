"""kafka-group-member: a KIP-848 consumer-group member for Python.

``from consumer import Consumer`` is a drop-in replacement for ``confluent_kafka.Consumer``.
"""

# ``consumer.AcknowledgeType``, ``consumer.KafkaError`` (the error value: ``code()``, ``name()``,
# ``str()``, ``retriable()``, ``fatal()``) and ``consumer.KafkaException`` are confluent-kafka's own
# classes (so values from either module work, and a confluent-kafka program needs only its import
# line changed); importable from here but not listed in ``__all__``, which names this package's
# own API. Every exception of this package is a ``KafkaException`` (see ``consumer.errors``).
from confluent_kafka import AcknowledgeType as AcknowledgeType
from confluent_kafka import KafkaError as KafkaError
from confluent_kafka import KafkaException as KafkaException

from consumer._bridge.member_events import (
    MemberEvent,
    MemberListener,
    RebalanceEvent,
    StateTransition,
)
from consumer._client.consumer import Consumer
from consumer._client.errors import (
    CallbackMisuseError,
    ConsumerClosedError,
    ConsumerKafkaException,
)
from consumer._version import __version__
from consumer.config import ConfigError, ConsumerConfig, parse_config
from consumer.errors import BrokerError, ConsumerError
from consumer.member import CloseOption
from consumer.share_consumer import SHARE_ACKNOWLEDGE_TYPE_RENEW, ShareConsumer

__all__ = [
    "SHARE_ACKNOWLEDGE_TYPE_RENEW",
    "BrokerError",
    "CallbackMisuseError",
    "CloseOption",
    "ConfigError",
    "Consumer",
    "ConsumerClosedError",
    "ConsumerConfig",
    "ConsumerError",
    "ConsumerKafkaException",
    "MemberEvent",
    "MemberListener",
    "RebalanceEvent",
    "ShareConsumer",
    "StateTransition",
    "__version__",
    "parse_config",
]
