"""Apache Kafka jars from Maven Central, resolved once per machine and version.

``resolve_kafka_jars`` runs ``mvn dependency:copy-dependencies`` on
``consumer/testing/real/kafka-pom.xml`` (which adds the log4j2 binding the Kafka POMs lack) into a
per-user cache. :mod:`consumer.testing.real.broker` starts a broker from the folder it returns.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

__all__ = [
    "DEFAULT_KAFKA_VERSION",
    "BrokerStartError",
    "cache_dir",
    "java_executable",
    "resolve_kafka_jars",
]

#: Newest Apache Kafka release whose jars all resolve from Maven Central. 4.4.0 is listed there
#: but incomplete (``kafka-tools-api:4.4.0`` is missing), so the default stays on 4.3.1.
DEFAULT_KAFKA_VERSION = "4.3.1"

# log4j2 version each Kafka line pulls through kafka-server (checked with mvn dependency:tree);
# the SLF4J binding must match it.
_LOG4J_BY_KAFKA_LINE = {
    "3": "2.24.3",  # 3.x brokers log through log4j 1; with this binding they still start
    "4.0": "2.24.3",
    "4.1": "2.24.3",
    "4.2": "2.25.3",
    "4.3": "2.25.4",
}
_NEWEST_LOG4J = "2.25.4"

_POM_PATH = Path(__file__).with_name("kafka-pom.xml")


class BrokerStartError(RuntimeError):
    """The local broker could not be resolved, formatted or started; the message says why."""


def cache_dir() -> Path:
    """Per-user cache for jars and the detached broker's state (``KGM_CACHE_DIR`` overrides)."""
    override = os.environ.get("KGM_CACHE_DIR")
    if override:
        return Path(override)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "kafka-group-member"


def _log4j_version_for(kafka_version: str) -> str:
    parts = kafka_version.split(".")
    if parts[0] == "3":
        return _LOG4J_BY_KAFKA_LINE["3"]
    return _LOG4J_BY_KAFKA_LINE.get(".".join(parts[:2]), _NEWEST_LOG4J)


def _check_kafka_version(kafka_version: str, allow_legacy: bool = False) -> None:
    parts = kafka_version.split(".")
    majors = ("3", "4") if allow_legacy else ("4",)
    if len(parts) < 2 or not all(p.isdigit() for p in parts[:2]) or parts[0] not in majors:
        raise BrokerStartError(
            f"KAFKA_VERSION={kafka_version!r} is not supported: the consumer group protocol "
            "(KIP-848) needs an Apache Kafka 4.x release, e.g. 4.3.1"
        )


def resolve_kafka_jars(
    kafka_version: str | None = None, *, quiet: bool = True, allow_legacy: bool = False
) -> Path:
    """Return a folder holding every jar of Kafka ``kafka_version``, downloading it once.

    ``allow_legacy`` admits 3.x releases, which lack the consumer group protocol; the project
    uses them only to prove that such brokers are refused with a clear error.

    Resolution runs ``mvn dependency:copy-dependencies`` against Maven Central into a
    temporary folder which is renamed into the cache only when complete, so an interrupted
    download is never mistaken for a finished one.
    """
    version = kafka_version or os.environ.get("KAFKA_VERSION") or DEFAULT_KAFKA_VERSION
    _check_kafka_version(version, allow_legacy)
    lib_dir = cache_dir() / f"kafka-{version}" / "lib"
    marker = lib_dir / ".complete"
    if marker.exists():
        return lib_dir
    mvn = shutil.which("mvn")
    if mvn is None:
        raise BrokerStartError("Maven ('mvn') is not on PATH; it is needed to fetch the Kafka jars")
    lib_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="lib-", dir=lib_dir.parent))
    command = [
        mvn,
        "-B",
        *(["-q"] if quiet else []),
        "-f",
        str(_POM_PATH),
        "dependency:copy-dependencies",
        f"-Dkafka.version={version}",
        f"-Dlog4j2.version={_log4j_version_for(version)}",
        f"-DoutputDirectory={staging}",
        "-DincludeScope=runtime",
    ]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0 or not any(staging.glob(f"kafka_2.13-{version}.jar")):
        shutil.rmtree(staging, ignore_errors=True)
        tail = (result.stdout + result.stderr).strip().splitlines()[-15:]
        raise BrokerStartError(
            f"could not resolve Apache Kafka {version} from Maven Central:\n" + "\n".join(tail)
        )
    (staging / ".complete").write_text(version)
    if lib_dir.exists():  # another process won the race; keep its copy
        shutil.rmtree(staging, ignore_errors=True)
    else:
        staging.rename(lib_dir)
    return lib_dir


def java_executable() -> str:
    """The ``java`` of ``JAVA_HOME``, else the one on ``PATH`` (Kafka 4.x needs Java 17+)."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").exists():
        return str(Path(java_home) / "bin" / "java")
    java = shutil.which("java")
    if java is None:
        raise BrokerStartError("no 'java' on PATH (Kafka 4.x needs Java 17 or newer)")
    return java
