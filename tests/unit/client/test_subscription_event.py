"""subscribe()'s arguments become one member input (consumer/_client/settings.py)."""

from __future__ import annotations

import re

import pytest

from consumer._client.settings import check_callbacks, subscription_event


def test_plain_names_are_sorted_and_deduplicated() -> None:
    event = subscription_event(["b", "a", "b"])
    assert event.topic_names == ("a", "b")
    assert event.topic_regex is None


def test_regexes_are_ored_and_plain_names_join_them_as_literals() -> None:
    event = subscription_event(["^orders-.*", "audit.log", "^pay[0-9]+"])
    assert event.topic_names is None
    assert event.topic_regex == "(^orders-.*)|(^pay[0-9]+)|audit\\.log"
    pattern = re.compile(event.topic_regex)
    assert pattern.fullmatch("audit.log")
    assert not pattern.fullmatch("auditXlog"), "a plain name must match only itself"
    assert pattern.fullmatch("orders-eu")
    assert pattern.fullmatch("pay12")


@pytest.mark.parametrize(
    ("topics", "error", "message"),
    [
        ("orders", TypeError, "non-empty list"),
        ([], TypeError, "non-empty list"),
        ([""], TypeError, "non-empty strings"),
        (["a" * 250], ValueError, "1-249 characters"),
        (["caf\u00e9"], ValueError, "invalid topic name"),
    ],
)
def test_bad_subscriptions_name_what_is_allowed(
    topics: object, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        subscription_event(topics)


def test_callbacks_must_be_callable_or_none() -> None:
    check_callbacks(on_assign=None, on_revoke=print)
    with pytest.raises(TypeError, match="on_lost must be callable"):
        check_callbacks(on_assign=None, on_lost="not a function")
