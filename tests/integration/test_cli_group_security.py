"""``kgm group`` over TLS and SASL with ``--command-config``: the SDK's own connections
(ListGroups, ShareGroupDescribe, ConsumerGroupDescribe) and confluent-kafka's AdminClient
(committed offsets) both use the file's settings; a wrong password is refused in one line that
names the cluster and shows no secret.

One extra broker serves the module (``consumer.testing.real.security``, no ACLs). The groups are
made over its PLAINTEXT listener; each secure listener must then show the same groups as
PLAINTEXT does.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from share_wire_support import set_share_group_configs

from consumer import Consumer, ShareConsumer
from consumer.cli import main
from consumer.testing.real.broker import fast_group_settings
from consumer.testing.real.security import SecureBrokerSettings, secure_broker_settings

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

USERS = {"alice": "alice-Group-Secret-7"}
WRONG_PASSWORD = "not-the-Group-Password-4"
RECORDS_PER_PARTITION = 3
BOUND_S = 45.0


@dataclass
class SecureGroups:
    settings: SecureBrokerSettings
    consumer_group: str
    share_group: str
    share_member_id: str


@pytest.fixture(scope="module")
def secure_groups(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureGroups]:
    settings = secure_broker_settings(tmp_path_factory.mktemp("pki"), users=USERS)
    with settings.broker(overrides=fast_group_settings()) as broker:
        plaintext = broker.bootstrap_servers
        suffix = uuid.uuid4().hex[:8]
        topic = f"cli-secure-{suffix}"
        admin = AdminClient({"bootstrap.servers": plaintext})
        admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
        producer = Producer({"bootstrap.servers": plaintext})
        for index in range(2 * RECORDS_PER_PARTITION):
            producer.produce(topic, value=b"v", partition=index % 2)
        assert producer.flush(30) == 0

        consumer_group = f"cli-secure-consumer-{suffix}"
        consumer = Consumer(
            {
                "bootstrap.servers": plaintext,
                "group.id": consumer_group,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        share_group = f"cli-secure-share-{suffix}"
        set_share_group_configs(admin, share_group, share_auto_offset_reset="earliest")
        share = ShareConsumer({"bootstrap.servers": plaintext, "group.id": share_group})
        try:
            consumer.subscribe([topic])
            seen = 0
            deadline = time.monotonic() + BOUND_S
            while seen < 2 * RECORDS_PER_PARTITION or len(consumer.assignment()) < 2:
                assert time.monotonic() < deadline, f"consumed {seen}, {consumer.state}"
                message = consumer.poll(0.3)
                if message is not None and message.error() is None:
                    seen += 1
            consumer.commit(asynchronous=False)
            share.subscribe([topic])
            shared = 0
            while shared < 2 * RECORDS_PER_PARTITION:
                assert time.monotonic() < deadline, f"the share member got {shared}"
                shared += len(share.poll(0.3))
            share.commit_sync(30)
            yield SecureGroups(settings, consumer_group, share_group, share.memberid())
        finally:
            share.close()
            consumer.close()


def kgm(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["group", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def command_config(tmp_path: Path, config: dict[str, str]) -> tuple[str, list[str]]:
    """The bootstrap of a ``SecureBrokerSettings`` client config, and the ``--bootstrap-server``
    and ``--command-config`` options for it (the rest of it written to a properties file)."""
    path = tmp_path / "client.properties"
    lines = [f"{key}={value}" for key, value in config.items() if key != "bootstrap.servers"]
    path.write_text("# written by the test\n" + "\n".join(lines) + "\n")
    bootstrap = config["bootstrap.servers"]
    return bootstrap, ["--bootstrap-server", bootstrap, "--command-config", str(path)]


@pytest.mark.parametrize(("listener", "mechanism"), [("SSL", None), ("SASL_SSL", "SCRAM-SHA-512")])
def test_secure_listener_shows_what_plaintext_shows(
    secure_groups: SecureGroups,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    listener: str,
    mechanism: str | None,
) -> None:
    settings = secure_groups.settings
    user = "alice" if listener.startswith("SASL_") else None
    config = settings.client_config(listener, user=user, mechanism=mechanism or "PLAIN")
    _, options = command_config(tmp_path, config)
    plain = settings.bootstrap("PLAINTEXT")
    for group in (secure_groups.consumer_group, secure_groups.share_group):
        code, out, err = kgm(capsys, "describe", group, *options, "--output", "json")
        assert code == 0, err
        secure_view = json.loads(out)
        code, out, err = kgm(
            capsys, "describe", group, "--bootstrap-server", plain, "--output", "json"
        )
        assert code == 0, err
        assert secure_view == json.loads(out)
    code, out, err = kgm(capsys, "list", *options, "--output", "json")
    assert code == 0, err
    by_group = {entry["group"]: entry for entry in json.loads(out)}
    assert by_group[secure_groups.share_group]["type"] == "share"
    assert by_group[secure_groups.share_group]["members"] == 1
    assert by_group[secure_groups.consumer_group]["type"] == "consumer"


def test_consumer_group_commits_are_read_over_sasl(
    secure_groups: SecureGroups, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    config = secure_groups.settings.client_config("SASL_SSL", user="alice", mechanism="PLAIN")
    _, options = command_config(tmp_path, config)
    code, out, err = kgm(
        capsys, "describe", secure_groups.consumer_group, *options, "--output", "json"
    )
    assert code == 0, err
    described = json.loads(out)
    assert [(p["partition"], p["committed_offset"]) for p in described["partitions"]] == [
        (0, RECORDS_PER_PARTITION),
        (1, RECORDS_PER_PARTITION),
    ]
    code, out, err = kgm(
        capsys, "describe", secure_groups.share_group, *options, "--output", "json"
    )
    assert code == 0, err
    assert [m["member_id"] for m in json.loads(out)["members"]] == [secure_groups.share_member_id]


def test_wrong_password_is_refused_in_one_line_without_secrets(
    secure_groups: SecureGroups, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    config = secure_groups.settings.client_config(
        "SASL_SSL", user="alice", password=WRONG_PASSWORD, mechanism="SCRAM-SHA-256"
    )
    bootstrap, options = command_config(tmp_path, config)
    code, out, err = kgm(capsys, "list", *options, "--timeout", "20000")
    assert code == 1
    assert out == ""
    assert f"the Kafka cluster at {bootstrap} refused the connection" in err
    assert "SaslAuthenticationFailed" in err
    assert len(err.strip().splitlines()) == 1
    for secret in (WRONG_PASSWORD, USERS["alice"]):
        assert secret not in err
