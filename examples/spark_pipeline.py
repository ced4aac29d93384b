"""Consume a topic through a consumer group with Spark, transform, write Parquet, then commit.

    python examples/spark_pipeline.py [BOOTSTRAP TOPIC GROUP OUTPUT_DIR]

Without arguments it starts a local Kafka broker (``consumer.testing.real.broker.LocalBroker``),
creates a topic with a few hundred records and runs against it.

The batch snapshot API is used: the driver joins ``GROUP`` as one member, freezes the ranges it
owns (committed offset -> high watermark), Spark executors read those ranges, the result is
written as Parquet, and only after the write succeeded are the offsets committed with the
member's epoch. Run it again and it continues where the last successful run committed. If the
write fails, nothing is committed and the next run reads the same records again
(at-least-once; see docs/howto/spark.md).
"""

from __future__ import annotations

import contextlib
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

from consumer.spark import group_snapshot, local_session


def run_pipeline(bootstrap_servers: str, topic: str, group_id: str, output_dir: str) -> int:
    """One pipeline run; returns the number of records written."""
    spark = local_session("spark-pipeline-example")  # sets PYSPARK_PYTHON, registers sources
    try:
        with group_snapshot(
            spark, bootstrap_servers=bootstrap_servers, group_id=group_id, topics=[topic]
        ) as snapshot:
            if snapshot.record_count == 0:
                print("nothing new to consume")
                return 0
            transformed = snapshot.dataframe().selectExpr(
                "topic",
                "partition",
                "offset",
                "timestamp",
                "CAST(key AS STRING) AS key",
                "upper(CAST(value AS STRING)) AS value",  # the transformation
            )
            written = transformed.count()
            # Idempotent on (topic, partition, offset) downstream: a re-run after a failed
            # commit writes the same rows again.
            transformed.write.mode("append").partitionBy("partition").parquet(output_dir)
            result = snapshot.commit()  # only after the write succeeded
            if not result.ok:
                print(f"not committed (partition moved to another member): {result.rejected}")
            print(f"wrote {written} records to {output_dir}; committed {result.committed}")
            return written
    finally:
        spark.stop()


@contextlib.contextmanager
def _demo_cluster() -> Iterator[tuple[str, str]]:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    from consumer.testing.real.broker import LocalBroker

    with LocalBroker() as broker:
        topic = f"spark-pipeline-{uuid.uuid4().hex[:6]}"
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        admin.create_topics([NewTopic(topic, num_partitions=3)])[topic].result(30)
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
        for n in range(300):
            producer.produce(topic, key=str(n), value=f"record {n}")
        producer.flush(30)
        yield broker.bootstrap_servers, topic


def main(argv: list[str]) -> None:
    if len(argv) == 4:
        run_pipeline(*argv)
        return
    if argv:
        raise SystemExit(__doc__)
    with _demo_cluster() as (bootstrap, topic), tempfile.TemporaryDirectory() as out:
        group = f"spark-pipeline-{uuid.uuid4().hex[:6]}"
        first = run_pipeline(bootstrap, topic, group, str(Path(out) / "parquet"))
        second = run_pipeline(bootstrap, topic, group, str(Path(out) / "parquet"))
        print(f"first run: {first} records, second run: {second} (continues after the commit)")


if __name__ == "__main__":
    main(sys.argv[1:])
