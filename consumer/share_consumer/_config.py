"""The configuration of :class:`consumer.ShareConsumer`: confluent-kafka's keys, checked."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Literal

from consumer.config import ConfigError, ConsumerConfig, parse_config
from consumer.share.fetch_parameters import ShareFetchParameters

__all__ = [
    "SHARE_ACKNOWLEDGE_TYPE_RENEW",
    "SHARE_KEYS",
    "AckMode",
    "ShareConsumerConfig",
    "checked_ack_type",
    "checked_topics",
    "parse_share_config",
]

SHARE_ACKNOWLEDGE_TYPE_RENEW: Final = 4
"""``ack_type`` RENEW (KIP-1222): extend the record's acquisition lock; the record stays in flight
and still needs ACCEPT, RELEASE or REJECT. Explicit mode only, brokers serving ShareAcknowledge v2
(Kafka 4.2+). confluent-kafka's ``AcknowledgeType`` has no RENEW, hence this constant (named like
confluent's ``SHARE_ACKNOWLEDGE_TYPE_*``)."""

AckMode = Literal["implicit", "explicit"]
#: Keys only a share consumer takes; removed before the common keys are checked.
SHARE_KEYS: Final = ("share.acknowledgement.mode", "max.poll.records", "share.acquire.mode")
_MODES: Final = ("implicit", "explicit")


@dataclass(frozen=True)
class ShareConsumerConfig:
    """A share consumer's validated configuration."""

    common: ConsumerConfig
    acknowledgement_mode: AckMode
    fetch: ShareFetchParameters


def parse_share_config(conf: Mapping[str, object]) -> ShareConsumerConfig:
    """Check a ``confluent_kafka.ShareConsumer`` config dict.

    The common keys (``bootstrap.servers``, ``group.id``, ``client.id``, security, timeouts) are
    checked exactly as for :class:`consumer.Consumer`; ``share.acknowledgement.mode`` must be
    ``implicit`` or ``explicit``; ``max.poll.records`` (default 500) and ``share.acquire.mode``
    are checked by :meth:`ShareFetchParameters.from_config`.

    Raises:
        ConfigError: naming the key, the value given and what is allowed.
    """
    if not isinstance(conf, Mapping):
        raise ConfigError(
            f"The configuration must be a dict of configuration keys, not {type(conf).__name__}."
        )
    common = {key: value for key, value in conf.items() if key not in SHARE_KEYS}
    # A share member has no classic protocol to fall back to: classic-only keys are refused
    # (``Consumer`` ignores them with a warning when ``group.protocol`` is not set).
    common.setdefault("group.protocol", "consumer")
    mode = str(conf.get("share.acknowledgement.mode", "implicit")).strip().lower()
    if mode not in _MODES:
        raise ConfigError(
            f"Invalid value {conf['share.acknowledgement.mode']!r} for "
            "'share.acknowledgement.mode': expected 'implicit' or 'explicit'."
        )
    fetch_keys: dict[str, object] = {
        key: conf[key] for key in ("max.poll.records", "share.acquire.mode") if key in conf
    }
    for key in ("fetch.min.bytes", "fetch.max.bytes"):
        if key in conf:
            fetch_keys[key] = conf[key]
    if "fetch.wait.max.ms" in conf:
        fetch_keys["fetch.max.wait.ms"] = conf["fetch.wait.max.ms"]
    try:
        fetch = ShareFetchParameters.from_config(fetch_keys)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    mode_value: AckMode = "explicit" if mode == "explicit" else "implicit"
    return ShareConsumerConfig(parse_config(common), mode_value, fetch)


def checked_topics(topics: Sequence[str]) -> list[str]:
    """``topics`` as a list, checked as confluent-kafka checks a share subscription.

    Raises:
        TypeError: not a list of strings.
        ValueError: an empty or duplicate topic name.
    """
    if isinstance(topics, str) or not isinstance(topics, Sequence):
        raise TypeError(f"topics must be a list of topic names, got {type(topics).__name__}")
    names = list(topics)
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f"topic names must be strings, got {name!r}")
        if not name:
            raise ValueError("topic names must be non-empty")
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ValueError(f"duplicate topic names: {', '.join(duplicates)}")
    return names


def checked_ack_type(ack_type: object) -> int:
    """``ack_type`` if it is ACCEPT (1), RELEASE (2), REJECT (3) or RENEW (4).

    Raises:
        TypeError: not an ``AcknowledgeType`` (or int).
        ValueError: another number.
    """
    if not isinstance(ack_type, int) or isinstance(ack_type, bool):
        raise TypeError(f"ack_type must be an AcknowledgeType, got {type(ack_type).__name__}")
    if ack_type not in (1, 2, 3, SHARE_ACKNOWLEDGE_TYPE_RENEW):
        raise ValueError(
            "ack_type must be ACCEPT (1), RELEASE (2), REJECT (3) or "
            f"SHARE_ACKNOWLEDGE_TYPE_RENEW (4), got {ack_type}"
        )
    return ack_type
