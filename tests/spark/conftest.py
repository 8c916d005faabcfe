"""Spark test helpers: a ``local[2]`` session per test module (one Spark at a time)."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from typing import Any

import pytest


def require_spark() -> None:
    """Skip unless PySpark, pyarrow and Java are available."""
    pytest.importorskip(
        "pyspark", reason="pyspark is not installed: pip install 'mirrorlib[spark]'"
    )
    pytest.importorskip(
        "pyarrow", reason="pyarrow is not installed: pip install 'mirrorlib[spark]'"
    )
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("Spark needs Java 17+ (java not found)")


SPARK_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.driver.memory": "1g",
    "spark.python.worker.faulthandler.enabled": "true",
    "spark.sql.streaming.stopTimeout": "30s",
}


def spark_env() -> None:
    """PySpark's workers must run the interpreter running the tests."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    require_spark()
    spark_env()
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master("local[2]").appName("mirrorlib-tests")
    for key, value in SPARK_CONF.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        for query in session.streams.active:
            query.stop()
        session.stop()
        _stop_gateway()


def _stop_gateway() -> None:
    """End the JVM of the stopped session too (PySpark keeps it until the interpreter exits),
    so a later test module can run its own Spark without two JVMs alive."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    if gateway is None:
        return
    proc = getattr(gateway, "proc", None)
    try:
        gateway.shutdown()
    except Exception:
        pass
    if proc is not None:
        proc.terminate()
        try:
            proc.wait(30)
        except Exception:
            proc.kill()
    SparkContext._gateway = None
    SparkContext._jvm = None
