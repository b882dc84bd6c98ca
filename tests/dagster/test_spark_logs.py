"""What Spark's driver logs and its Python workers print while a step runs reaches the step's
Dagster log."""

import pytest

from dagster_lakehouse.spark_logs import WORKER_LOGGING, spark_logs
from lakehouse.spark.session import DRIVER_LOG

pytestmark = pytest.mark.spark


class Log:
    def __init__(self) -> None:
        self.lines: list[tuple[str, str]] = []

    def debug(self, message: str) -> None:
        self.lines.append(("debug", message))

    def info(self, message: str) -> None:
        self.lines.append(("info", message))

    def warning(self, message: str) -> None:
        self.lines.append(("warning", message))

    def error(self, message: str) -> None:
        self.lines.append(("error", message))


def test_the_drivers_warnings_and_errors_reach_the_step(spark):
    log4j = spark._jvm.org.apache.logging.log4j
    log4j.core.config.Configurator.setLevel("lakehouse.test", log4j.Level.WARN)  # the suite runs at ERROR
    driver = log4j.LogManager.getLogger("lakehouse.test")
    driver.warn("before the step")
    log = Log()
    with spark_logs(log):
        driver.info("below the level")
        driver.warn("a warning in the step")
        driver.error("an error in the step")
    assert log.lines == [
        ("warning", "Spark: WARN test: a warning in the step"),
        ("error", "Spark: ERROR test: an error in the step"),
    ]
    assert DRIVER_LOG.exists()


def worker_output(batches):
    import logging
    import sys

    for batch in batches:
        print(f"printed {batch.num_rows} rows")
        logging.getLogger("lakehouse.test").warning("a warning from a worker")
        sys.stderr.write("written to stderr\n")
        yield batch


@pytest.mark.parametrize("level", ["on", "off"])
def test_python_worker_output_reaches_the_step(any_spark, level):
    spark = any_spark
    spark.conf.set(WORKER_LOGGING, "true" if level == "on" else "false")
    try:
        spark.range(3, numPartitions=1).mapInArrow(worker_output, "id long").collect()  # before the step
        log = Log()
        with spark_logs(log, spark):
            spark.range(2, numPartitions=1).mapInArrow(worker_output, "id long").collect()
    finally:
        spark.conf.unset(WORKER_LOGGING)
    expected = [
        ("info", "Python worker [stdout]: printed 2 rows"),
        ("warning", "Python worker [lakehouse.test]: a warning from a worker"),
        ("error", "Python worker [stderr]: written to stderr"),
    ]
    assert log.lines == (expected if level == "on" else [])
