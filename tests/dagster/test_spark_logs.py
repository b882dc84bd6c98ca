"""What Spark's driver logs while a step runs reaches the step's Dagster log."""

import pytest

from lakehouse.dagster.spark_logs import spark_logs
from lakehouse.spark.session import DRIVER_LOG

pytestmark = pytest.mark.spark


class Log:
    def __init__(self) -> None:
        self.lines: list[tuple[str, str]] = []

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
