"""The ACLs of the secure-broker test modules (``test_security_broker``,
``test_security_consumer``), granted over the super user's PLAINTEXT listener.

Principals: ``alice`` and the TLS client certificate (``User:client``) get all rights on topics
and groups; ``bob`` all rights on topics, none on groups; ``carol`` all rights on groups, none
on topics.
"""

from __future__ import annotations

import uuid

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from consumer.testing.real.security import SecureBrokerSettings
from tests.support import wait_until

#: Each check of an ACL is a request to the broker: re-check at this pace.
REQUEST_POLL_S = 0.1
#: How long a granted ACL may take to apply.
ACL_APPLIES_S = 30


def acl(principal: str, resource: ResourceType) -> AclBinding:
    """All operations on every resource of type ``resource`` for ``principal``."""
    return AclBinding(
        resource,
        "*",
        ResourcePatternType.LITERAL,
        principal,
        "*",
        AclOperation.ALL,
        AclPermissionType.ALLOW,
    )


def topic_readable(config: dict[str, str], topic: str) -> bool:
    metadata = AdminClient(config).list_topics(topic=topic, timeout=10)
    return metadata.topics[topic].error is None


def group_describable(config: dict[str, str]) -> bool:
    admin = AdminClient(config)  # must outlive the future, or the future never completes
    futures = admin.describe_consumer_groups([f"probe-{uuid.uuid4().hex}"], request_timeout=10)
    try:
        next(iter(futures.values())).result(timeout=15)
    except KafkaException as exc:
        return bool(exc.args[0].code() != KafkaError.GROUP_AUTHORIZATION_FAILED)
    return True


def grant_test_acls(settings: SecureBrokerSettings, admin_bootstrap: str) -> None:
    """Grant the principals' ACLs and return once the broker applies them (checked over
    SASL_PLAINTEXT: alice and bob can read a probe topic, carol can describe a group)."""
    admin = AdminClient({"bootstrap.servers": admin_bootstrap})
    bindings = [
        acl("User:alice", ResourceType.TOPIC),
        acl("User:alice", ResourceType.GROUP),
        acl("User:client", ResourceType.TOPIC),
        acl("User:client", ResourceType.GROUP),
        acl("User:bob", ResourceType.TOPIC),
        acl("User:carol", ResourceType.GROUP),
    ]
    for future in admin.create_acls(bindings).values():
        future.result(timeout=30)
    probe = "acl-probe"
    admin.create_topics([NewTopic(probe, 1, 1)])[probe].result(timeout=30)
    for user in ("alice", "bob"):
        config = settings.client_config("SASL_PLAINTEXT", user=user)
        wait_until(
            lambda c=config: topic_readable(c, probe),
            ACL_APPLIES_S,
            f"{user}'s topic ACL",
            interval_s=REQUEST_POLL_S,
        )
    carol = settings.client_config("SASL_PLAINTEXT", user="carol")
    wait_until(
        lambda: group_describable(carol),
        ACL_APPLIES_S,
        "carol's group ACL",
        interval_s=REQUEST_POLL_S,
    )
