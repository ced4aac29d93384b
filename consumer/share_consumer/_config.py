"""The configuration of :class:`consumer.ShareConsumer`: confluent-kafka's keys, checked."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal

from consumer.config import ConfigError, ConsumerConfig, parse_config
from consumer.share.fetch_parameters import ShareFetchParameters

__all__ = ["SHARE_KEYS", "AckMode", "ShareConsumerConfig", "parse_share_config"]

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
