"""Property tests: valid dicts round-trip, out-of-range integers are refused, typos never pass."""

from __future__ import annotations

import logging
import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from consumer._config.spec import KNOWN_KEYS, SPECS, KeySpec, Kind, Owner
from consumer.config import ConfigError, ConsumerConfig, Secret, parse_config

BASE: dict[str, object] = {"bootstrap.servers": "localhost:9092", "group.id": "g"}

# Keys that need another key to be valid, or are checked elsewhere, stay out of the random dicts.
SKIPPED = {"bootstrap.servers", "group.id", "security.protocol", "receive.message.max.bytes",
           "message.max.bytes", "fetch.max.bytes", "group.instance.id",
           "group.protocol"}  # fmt: skip
# The consumer protocol's keys (classic-only keys are tested in test_config_classic.py).
GENERATED = [
    spec for name, spec in SPECS.items() if name not in SKIPPED and spec.owner is not Owner.CLASSIC
]
INT_SPECS = [spec for spec in SPECS.values() if spec.kind is Kind.INT]


def _mixed_case(text: str) -> st.SearchStrategy[str]:
    return st.sampled_from([text, text.upper(), text.lower(), text.title(), f" {text} "])


def _valid_value(spec: KeySpec) -> st.SearchStrategy[object]:
    if spec.kind is Kind.INT:
        assert spec.min_value is not None
        assert spec.max_value is not None
        numbers = st.integers(spec.min_value, spec.max_value)
        return numbers | numbers.map(str) | numbers.map(lambda n: f" {n} ")
    if spec.kind is Kind.BOOL:
        return st.booleans() | st.sampled_from(["true", "false", "TRUE", "False"])
    if spec.kind is Kind.ENUM:
        names = list(spec.choices) + [alias for alias, _ in spec.synonyms]
        return st.sampled_from(names).flatmap(_mixed_case)
    if spec.kind is Kind.CSV_FLAGS:
        return st.lists(st.sampled_from(spec.choices), min_size=1, max_size=4).map(",".join)
    if spec.kind is Kind.CALLABLE:
        return st.sampled_from([print, len, lambda *args: None])
    if spec.kind is Kind.LOGGER:
        return st.just(logging.getLogger("prop"))
    return st.text(string.ascii_letters + string.digits + "._-/ ", min_size=1).filter(str.strip)


def _expected(spec: KeySpec, value: object) -> object:
    if spec.kind is Kind.INT:
        return int(str(value).strip())
    if spec.kind is Kind.BOOL:
        return value if isinstance(value, bool) else str(value).lower() == "true"
    if spec.kind is Kind.ENUM:
        lowered = str(value).strip().lower()
        return dict(spec.synonyms).get(lowered) or next(
            c for c in spec.choices if c.lower() == lowered
        )
    return value


def _field_value(config: ConsumerConfig, key: str) -> object:
    attribute = key.replace(".", "_")
    if key.startswith(("ssl.", "sasl.", "enable.ssl", "enable.sasl", "https.", "oauth_cb")):
        value = getattr(config.security, attribute)
        return value.reveal() if isinstance(value, Secret) else value
    return getattr(config, attribute)


@st.composite
def valid_configs(draw: st.DrawFn) -> dict[str, object]:
    chosen = draw(st.lists(st.sampled_from(GENERATED), unique_by=lambda s: s.name, max_size=25))
    config: dict[str, object] = dict(BASE)
    for spec in chosen:
        config[spec.name] = draw(_valid_value(spec))
    if "reconnect.backoff.ms" in config and "reconnect.backoff.max.ms" in config:
        low = int(str(config["reconnect.backoff.ms"]).strip())
        high = int(str(config["reconnect.backoff.max.ms"]).strip())
        config["reconnect.backoff.ms"], config["reconnect.backoff.max.ms"] = sorted((low, high))
    elif "reconnect.backoff.ms" in config:
        config["reconnect.backoff.max.ms"] = 3_600_000
    elif "reconnect.backoff.max.ms" in config:
        config["reconnect.backoff.ms"] = 0
    return config


@settings(max_examples=300)
@given(valid_configs())
def test_valid_configs_round_trip(config: dict[str, object]) -> None:
    parsed = parse_config(config)
    for key, value in config.items():
        spec = SPECS[key]
        if spec.owner is Owner.DATA_PLANE:
            assert parsed.data_plane[key] is value
            continue
        if spec.kind is not Kind.BROKER_LIST:
            assert _field_value(parsed, key) == _expected(spec, value)
        if spec.owner is Owner.BOTH and spec.kind not in (Kind.BROKER_LIST,):
            assert parsed.data_plane[key] == _expected(spec, value)
    assert parsed.data_plane["enable.auto.commit"] is False
    assert parsed.data_plane["enable.auto.offset.store"] is False


@st.composite
def out_of_range(draw: st.DrawFn) -> tuple[str, object]:
    spec = draw(st.sampled_from(INT_SPECS))
    assert spec.min_value is not None
    assert spec.max_value is not None
    number = draw(
        st.integers(max_value=spec.min_value - 1) | st.integers(min_value=spec.max_value + 1)
    )
    return spec.name, draw(st.sampled_from([number, str(number)]))


@settings(max_examples=300)
@given(out_of_range())
def test_out_of_range_ints_are_refused_naming_the_key(case: tuple[str, object]) -> None:
    key, value = case
    protocol = {"group.protocol": "classic"} if SPECS[key].owner is Owner.CLASSIC else {}
    with pytest.raises(ConfigError) as info:
        parse_config({**BASE, **protocol, key: value})
    message = str(info.value)
    assert f"'{key}'" in message
    assert str(value) in message
    assert "an integer in" in message


@given(st.text(string.ascii_lowercase + "._", min_size=1, max_size=30))
def test_unknown_keys_are_always_refused(key: str) -> None:
    if key in KNOWN_KEYS:
        return
    with pytest.raises(ConfigError) as info:
        parse_config({**BASE, key: "1"})
    assert str(info.value).startswith(f"'{key}' is not a configuration key; ")
