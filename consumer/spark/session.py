"""What Spark needs to run our Python code, set by the project rather than asked of users.

Python workers must run this interpreter (which has confluent-kafka, pyarrow and this package):
``PYSPARK_PYTHON`` defaults to ``python3`` on ``PATH`` otherwise, and every Python Data Source
action then crashes with ``ModuleNotFoundError: pyarrow``. On hosts whose name resolves to
loopback Spark also wants ``SPARK_LOCAL_IP``.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def configure_environment() -> None:
    """Point Spark's Python workers at this interpreter (unless already set); check pyarrow."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    if importlib.util.find_spec("pyarrow") is None:
        raise RuntimeError("Spark's Python data sources need pyarrow: install the 'spark' extra")


def local_session(
    app_name: str = "kafka-group-member",
    *,
    master: str = "local[2]",
    config: Mapping[str, str] | None = None,
) -> SparkSession:
    """A SparkSession set up for this SDK, with ``kafka-group`` sources registered.

    Small defaults suit a laptop or CI runner: UI off, 2 shuffle partitions. ``config`` wins.
    """
    configure_environment()
    from pyspark.sql import SparkSession

    from consumer.spark.source import register

    settings = {
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": "2",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.streaming.stopActiveRunOnRestart": "true",
    }
    settings.update(config or {})
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    register(spark)
    return spark
