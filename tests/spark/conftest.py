"""Spark test helpers: one ``local[2]`` session for the test session, and a
Spark standalone cluster (master and two workers as separate processes)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
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
    # what a session mirrorlib launches gets (mirrorlib.spark.session.session_defaults)
    "spark.python.daemon.module": "mirrorlib.spark.daemon",
}


def spark_env() -> None:
    """PySpark's workers must run the interpreter running the tests."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One local Spark session for every test that uses it (a session takes 10-40 s to start;
    tests stop the jobs they start). Tests that need another master run their driver in a
    process of their own (``standalone``, test_restart, test_prepare)."""
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
    """End the JVM of the stopped session too (PySpark keeps it until the interpreter exits):
    nothing of the tests' Spark outlives the test session."""
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


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class StandaloneCluster:
    """A Spark standalone cluster from the PySpark installation: a master and ``workers``
    workers (one core, 1 GiB each), every one a separate JVM in its own process group, loopback
    only. ``url`` is the master (``spark://127.0.0.1:PORT``)."""

    def __init__(self, workdir: Path, workers: int = 2) -> None:
        import pyspark

        self.home = Path(pyspark.__file__).parent
        self.workdir = workdir
        self.port = free_port()
        self.ui_port = free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.env = {
            **os.environ,
            "SPARK_HOME": str(self.home),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_DAEMON_MEMORY": "256m",
            "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable,
        }
        self.master: subprocess.Popen[bytes] | None = None
        self.workers: list[subprocess.Popen[bytes]] = []
        self.count = workers

    def _spawn(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        log = open(self.workdir / f"{name}.log", "ab")  # noqa: SIM115 (closed with the process)
        return subprocess.Popen(
            [str(self.home / "bin" / "spark-class"), *args],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=self.env,
            start_new_session=True,
        )

    def alive_workers(self) -> int:
        import json
        import urllib.request

        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=2) as r:
                state = json.load(r)
        except OSError:
            return 0
        return sum(1 for w in state.get("workers", []) if w.get("state") == "ALIVE")

    def start(self) -> StandaloneCluster:
        self.master = self._spawn(
            "master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
            "--port", str(self.port), "--webui-port", str(self.ui_port),
        )  # fmt: skip
        for i in range(self.count):
            work = self.workdir / f"worker{i}"
            work.mkdir(exist_ok=True)
            args = [
                "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--cores", "1",
                "--memory", "1g", "--webui-port", str(free_port()), "--work-dir", str(work),
            ]  # fmt: skip
            self.workers.append(self._spawn(f"worker{i}", *args, self.url))
        deadline = time.monotonic() + 120
        while self.alive_workers() < self.count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.count} Spark workers did not register:\n{self.logs()}")
            time.sleep(0.5)
        return self

    def kill_worker(self, i: int) -> None:
        """SIGKILL worker ``i`` with its executor and Python workers (its process group)."""
        proc = self.workers[i]
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)

    def submit(self, app: list[str], log: Path, *conf: str) -> subprocess.Popen[bytes]:
        """``spark-submit`` in client mode (the driver runs here, in its own process group)."""
        src = str(Path(__file__).resolve().parents[2] / "src")
        command = [
            str(self.home / "bin" / "spark-submit"), "--master", self.url,
            "--deploy-mode", "client",
            "--conf", "spark.driver.host=127.0.0.1",
            "--conf", "spark.driver.bindAddress=127.0.0.1",
            "--conf", "spark.driver.memory=512m",
            "--conf", "spark.executor.memory=512m",
            "--conf", "spark.ui.enabled=false",
            "--conf", f"spark.executorEnv.PYTHONPATH={src}",
            "--conf", f"spark.pyspark.python={sys.executable}",
            "--conf", f"spark.pyspark.driver.python={sys.executable}",
            # as docs/spark.md suggests for spark-submit: PySpark from its installed package
            "--conf", "spark.python.daemon.module=mirrorlib.spark.daemon",
        ]  # fmt: skip
        for c in conf:
            command += ["--conf", c]
        env = {**self.env, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
        out = open(log, "ab")  # noqa: SIM115 (closed with the process)
        return subprocess.Popen(
            command + app, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )

    def logs(self) -> str:
        return "\n".join(
            p.read_text(errors="replace")[-3000:] for p in sorted(self.workdir.glob("*.log"))
        )

    def stop(self) -> None:
        for proc in [*self.workers, *([self.master] if self.master else [])]:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
        for proc in [*self.workers, *([self.master] if self.master else [])]:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    """A Spark standalone master and two workers, stopped after the module's tests."""
    require_spark()
    cluster = StandaloneCluster(tmp_path_factory.mktemp("spark-standalone"))
    try:
        yield cluster.start()
    finally:
        cluster.stop()


def consume_from(cluster: Any, topic: str, offsets: dict[int, int], count: int) -> list[Any]:
    """What a consumer failing over to ``cluster`` reads of ``topic`` from ``offsets``
    (partition → offset): up to ``count`` records, 30 s at most."""
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as KafkaTP

    consumer = Consumer(
        {**cluster.client_config(), "group.id": "failover-check", "enable.auto.commit": False}
    )
    consumer.assign([KafkaTP(topic, p, o) for p, o in offsets.items()])
    seen: list[Any] = []
    deadline = time.monotonic() + 30
    while len(seen) < count and time.monotonic() < deadline:
        seen += [m for m in consumer.consume(500, timeout=0.5) if not m.error()]
    consumer.close()
    return seen
