"""TLS and SASL for the local test broker: a throwaway CA, SCRAM users and extra listeners.

Nothing here changes :class:`~consumer.testing.real.broker.LocalBroker`; it only computes the
``overrides`` and ``format_args`` a broker is started with, so the PLAINTEXT listener stays the
one ``bootstrap_servers`` returns and every authenticated listener is *added* next to it::

    settings = secure_broker_settings(tmp_dir, users={"alice": "alice-secret"}, acls=True)
    with settings.broker() as broker:
        producer = Producer(settings.client_config("SASL_SSL", user="alice",
                                                   mechanism="SCRAM-SHA-512"))

Listeners (names are also their security protocols): ``SSL`` (mutual TLS, the client
certificate's CN becomes the principal ``User:<CN>``), ``SASL_PLAINTEXT`` and ``SASL_SSL`` (each
with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512). PLAIN users live in the listener's JAAS settings;
SCRAM users are written into the metadata log when storage is formatted (``--add-scram``).

With ``acls=True`` the broker runs ``StandardAuthorizer`` and denies what no ACL allows. The
broker talks to its own controller over PLAINTEXT as ``User:ANONYMOUS``, so that principal is a
super user: on such a broker the PLAINTEXT listener is the administrator's door (create topics
and ACLs there), and the authenticated listeners are where ACLs apply.

Certificates are created with the ``cryptography`` package (a development dependency), imported
only when a PKI is needed.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from consumer.testing.real.broker import LocalBroker, free_port

__all__ = [
    "SASL_MECHANISMS",
    "SCRAM_MECHANISMS",
    "SECURE_LISTENERS",
    "STANDARD_AUTHORIZER",
    "Listener",
    "SecureBrokerSettings",
    "TestPki",
    "create_test_pki",
    "listener_overrides",
    "scram_format_args",
    "secure_broker_settings",
]

SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
SASL_MECHANISMS = ("PLAIN", *SCRAM_MECHANISMS)
SECURE_LISTENERS = ("SSL", "SASL_PLAINTEXT", "SASL_SSL")
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"

_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_LISTENER_NAME = re.compile(r"^[A-Z][A-Z0-9_]*$")
_SAFE_CREDENTIAL = re.compile(r"^[A-Za-z0-9._@+-]+$")
_PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
_SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"


# ----------------------------------------------------------------------------------------------
# Listeners


@dataclass(frozen=True)
class Listener:
    """One listener added next to PLAINTEXT and CONTROLLER.

    ``name`` is upper case (``M1``, ``SASL_SSL``); ``protocol`` is its security protocol;
    the broker binds ``127.0.0.1:port`` and advertises ``127.0.0.1:advertised_port`` in
    Metadata and FindCoordinator answers to clients that connected through this listener
    (``None``: the bound port). Advertising another port is how a proxy stays in the path.
    """

    name: str
    protocol: str
    port: int
    advertised_port: int | None = None

    def __post_init__(self) -> None:
        if not _LISTENER_NAME.match(self.name) or self.name in ("PLAINTEXT", "CONTROLLER"):
            raise ValueError(f"listener name {self.name!r}: use A-Z, 0-9 and _, not PLAINTEXT")
        if self.protocol not in _PROTOCOLS:
            raise ValueError(f"listener protocol {self.protocol!r} is not one of {_PROTOCOLS}")


def listener_overrides(
    plaintext_port: int, controller_port: int, listeners: Sequence[Listener]
) -> dict[str, str]:
    """``server.properties`` overrides that add ``listeners`` to a :class:`LocalBroker`.

    The broker must be created with ``port=plaintext_port``; ``controller_port`` replaces the
    one the launcher would pick (the ``listeners`` line names both, so it is fixed here).
    """
    names = [listener.name for listener in listeners]
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate listener names in {names}")
    binds = [f"PLAINTEXT://127.0.0.1:{plaintext_port}"]
    adverts = [f"PLAINTEXT://127.0.0.1:{plaintext_port}"]
    protocols = ["PLAINTEXT:PLAINTEXT", "CONTROLLER:PLAINTEXT"]
    for listener in listeners:
        advertised = listener.advertised_port or listener.port
        binds.append(f"{listener.name}://127.0.0.1:{listener.port}")
        adverts.append(f"{listener.name}://127.0.0.1:{advertised}")
        protocols.append(f"{listener.name}:{listener.protocol}")
    binds.append(f"CONTROLLER://127.0.0.1:{controller_port}")
    return {
        "listeners": ",".join(binds),
        "advertised.listeners": ",".join(adverts),
        "listener.security.protocol.map": ",".join(protocols),
        "controller.quorum.voters": f"1@127.0.0.1:{controller_port}",
    }


# ----------------------------------------------------------------------------------------------
# Throwaway PKI


@dataclass(frozen=True)
class TestPki:
    """PEM files of a throwaway CA, a broker certificate and a client certificate.

    ``broker_keystore`` holds the broker's private key followed by its chain, the layout Kafka's
    ``ssl.keystore.type=PEM`` reads; the other files suit librdkafka's ``ssl.*.location`` keys.
    Keys are unencrypted: these files are for tests on loopback only.
    """

    __test__ = False  # not a pytest test class despite the name

    folder: Path
    ca_cert: Path
    broker_cert: Path
    broker_key: Path
    broker_keystore: Path
    client_cert: Path
    client_key: Path
    client_name: str


def create_test_pki(
    folder: Path,
    *,
    hosts: Iterable[str] = ("127.0.0.1", "localhost"),
    client_name: str = "client",
    valid_days: int = 7,
) -> TestPki:
    """Write a new CA, broker and client certificate (EC P-256) as PEM files into ``folder``.

    The broker certificate is valid for ``hosts`` (IP addresses and DNS names), so clients that
    verify host names accept it; the client certificate's CN is ``client_name``.
    """
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    folder.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    not_before = now - datetime.timedelta(hours=1)
    not_after = now + datetime.timedelta(days=valid_days)

    def name(common_name: str) -> x509.Name:
        return x509.Name(
            [
                x509.NameAttribute(NameOID.COMMON_NAME, common_name),
                x509.NameAttribute(NameOID.ORGANIZATION_NAME, "kafka-group-member tests"),
            ]
        )

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = name("kgm-test-ca")
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )

    def leaf(
        common_name: str, sans: list[x509.GeneralName]
    ) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (
            x509.CertificateBuilder()
            .subject_name(name(common_name))
            .issuer_name(ca_name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(not_before)
            .not_valid_after(not_after)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.ExtendedKeyUsage(
                    [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
                ),
                critical=False,
            )
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
            )
        )
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        return key, builder.sign(ca_key, hashes.SHA256())

    sans: list[x509.GeneralName] = []
    for host in hosts:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            sans.append(x509.DNSName(host))
    broker_key, broker_cert = leaf("kgm-test-broker", sans)
    client_key, client_cert = leaf(client_name, [])

    def cert_pem(cert: x509.Certificate) -> bytes:
        return cert.public_bytes(serialization.Encoding.PEM)

    def key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
        return key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )

    pki = TestPki(
        folder=folder,
        ca_cert=folder / "ca.pem",
        broker_cert=folder / "broker.pem",
        broker_key=folder / "broker.key",
        broker_keystore=folder / "broker-keystore.pem",
        client_cert=folder / "client.pem",
        client_key=folder / "client.key",
        client_name=client_name,
    )
    pki.ca_cert.write_bytes(cert_pem(ca_cert))
    pki.broker_cert.write_bytes(cert_pem(broker_cert))
    pki.broker_key.write_bytes(key_pem(broker_key))
    pki.broker_keystore.write_bytes(key_pem(broker_key) + cert_pem(broker_cert) + cert_pem(ca_cert))
    pki.client_cert.write_bytes(cert_pem(client_cert))
    pki.client_key.write_bytes(key_pem(client_key))
    return pki


# ----------------------------------------------------------------------------------------------
# SASL users


def _check_credential(kind: str, value: str) -> None:
    if not _SAFE_CREDENTIAL.match(value):
        raise ValueError(f"{kind} {value!r}: use letters, digits and . _ @ + - only")


def scram_format_args(
    users: Mapping[str, str], mechanisms: Sequence[str] = SCRAM_MECHANISMS
) -> tuple[str, ...]:
    """Storage formatter arguments that create each SCRAM user for each mechanism.

    Pass them as ``LocalBroker(format_args=...)``. Names and passwords are limited to a safe
    character set because the formatter's ``[name=...,password=...]`` syntax has no escaping.
    """
    args: list[str] = []
    for user, password in users.items():
        _check_credential("user name", user)
        _check_credential("password", password)
        for mechanism in mechanisms:
            if mechanism not in SCRAM_MECHANISMS:
                raise ValueError(f"{mechanism!r} is not one of {SCRAM_MECHANISMS}")
            args += ["--add-scram", f"{mechanism}=[name={user},password={password}]"]
    return tuple(args)


# ----------------------------------------------------------------------------------------------
# A broker with every secure listener


@dataclass(frozen=True)
class SecureBrokerSettings:
    """What :func:`secure_broker_settings` computed: ports, overrides, formatter arguments."""

    port: int
    listener_ports: Mapping[str, int]
    overrides: Mapping[str, str]
    format_args: tuple[str, ...]
    users: Mapping[str, str]
    pki: TestPki | None
    acls: bool
    super_users: tuple[str, ...] = field(default=())

    def broker(self, **fields: Any) -> LocalBroker:
        """A (not yet started) :class:`LocalBroker` with these listeners; ``fields`` are its
        other fields (an ``overrides`` mapping given here is applied on top)."""
        extra: Mapping[str, str] = fields.pop("overrides", {})
        return LocalBroker(
            port=self.port,
            overrides={**self.overrides, **extra},
            format_args=self.format_args,
            **fields,
        )

    def bootstrap(self, listener: str) -> str:
        """``127.0.0.1:PORT`` of ``listener`` (``PLAINTEXT`` included)."""
        if listener == "PLAINTEXT":
            return f"127.0.0.1:{self.port}"
        return f"127.0.0.1:{self.listener_ports[listener]}"

    def client_config(
        self,
        listener: str,
        *,
        user: str | None = None,
        password: str | None = None,
        mechanism: str = "PLAIN",
    ) -> dict[str, str]:
        """confluent-kafka settings to reach ``listener`` as ``user``.

        ``password`` defaults to the user's configured one (pass another to test refusals).
        On ``SSL`` the client presents the PKI's client certificate.
        """
        config = {"bootstrap.servers": self.bootstrap(listener), "security.protocol": listener}
        if listener in ("SSL", "SASL_SSL"):
            assert self.pki is not None
            config["ssl.ca.location"] = str(self.pki.ca_cert)
        if listener == "SSL":
            assert self.pki is not None
            config["ssl.certificate.location"] = str(self.pki.client_cert)
            config["ssl.key.location"] = str(self.pki.client_key)
        if listener.startswith("SASL_"):
            if user is None:
                raise ValueError(f"listener {listener} needs a user")
            config["sasl.mechanism"] = mechanism
            config["sasl.username"] = user
            config["sasl.password"] = password if password is not None else self.users[user]
        return config


def secure_broker_settings(
    folder: Path,
    *,
    users: Mapping[str, str] | None = None,
    listeners: Sequence[str] = SECURE_LISTENERS,
    acls: bool = False,
    super_users: Sequence[str] = ("admin",),
    client_name: str = "client",
) -> SecureBrokerSettings:
    """Settings for a :class:`LocalBroker` with TLS and SASL listeners next to PLAINTEXT.

    ``folder`` receives the PEM files (when a TLS listener is asked for). ``users`` maps SASL
    user names to passwords (PLAIN and both SCRAM mechanisms). ``acls`` turns on
    ``StandardAuthorizer`` with ``super_users`` (plus ``User:ANONYMOUS``, see the module
    docstring) as super users; everyone else needs ACLs, which tests create over PLAINTEXT.
    """
    users = dict(users if users is not None else {"alice": "alice-secret"})
    unknown = set(listeners) - set(SECURE_LISTENERS)
    if unknown:
        raise ValueError(f"unknown listeners {sorted(unknown)}; choose from {SECURE_LISTENERS}")
    pki = None
    if {"SSL", "SASL_SSL"} & set(listeners):
        pki = create_test_pki(folder, client_name=client_name)
    port, controller_port = free_port(), free_port()
    specs = [Listener(name, name, free_port()) for name in listeners]
    overrides = listener_overrides(port, controller_port, specs)
    for name in listeners:
        prefix = f"listener.name.{name.lower()}."
        if name in ("SSL", "SASL_SSL"):
            assert pki is not None
            overrides.update(
                {
                    prefix + "ssl.keystore.type": "PEM",
                    prefix + "ssl.keystore.location": str(pki.broker_keystore),
                    prefix + "ssl.truststore.type": "PEM",
                    prefix + "ssl.truststore.location": str(pki.ca_cert),
                    prefix + "ssl.client.auth": "required" if name == "SSL" else "none",
                }
            )
        if name.startswith("SASL_"):
            for user, password in users.items():
                _check_credential("user name", user)
                _check_credential("password", password)
            plain_users = " ".join(f'user_{u}="{p}"' for u, p in users.items())
            overrides.update(
                {
                    prefix + "sasl.enabled.mechanisms": ",".join(SASL_MECHANISMS),
                    prefix + "plain.sasl.jaas.config": f"{_PLAIN_MODULE} required {plain_users};",
                    **{
                        prefix + f"{m.lower()}.sasl.jaas.config": f"{_SCRAM_MODULE} required;"
                        for m in SCRAM_MECHANISMS
                    },
                }
            )
    if pki is not None:
        # Mutual TLS principal: the subject "O=...,CN=client" (RFC 2253) becomes User:client.
        overrides["ssl.principal.mapping.rules"] = "RULE:^(.*,)?CN=([^,]+)(,.*)?$/$2/,DEFAULT"
    if acls:
        principals = ["User:ANONYMOUS", *(f"User:{name}" for name in super_users)]
        overrides["authorizer.class.name"] = STANDARD_AUTHORIZER
        overrides["super.users"] = ";".join(principals)
        overrides["allow.everyone.if.no.acl.found"] = "false"
    return SecureBrokerSettings(
        port=port,
        listener_ports={spec.name: spec.port for spec in specs},
        overrides=overrides,
        format_args=scram_format_args(users) if users else (),
        users=users,
        pki=pki,
        acls=acls,
        super_users=tuple(super_users),
    )
