"""Finding Java/Maven and resolving the Kafka jars into the per-user cache."""

from __future__ import annotations

import os
import stat
import threading
import time
from pathlib import Path

import pytest

from mirrorlib.errors import TestClusterError
from mirrorlib.testing import jars
from mirrorlib.testing.cluster import KafkaCluster


def _no_java(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir(exist_ok=True)
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.delenv("MIRRORLIB_JAVA", raising=False)


def test_missing_java_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _no_java(monkeypatch, tmp_path)
    with pytest.raises(TestClusterError) as info:
        jars.java_executable()
    message = str(info.value)
    assert "Java not found" in message
    assert "JAVA_HOME" in message and "openjdk-17" in message


def test_missing_java_fails_cluster_start(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _no_java(monkeypatch, tmp_path)
    cluster = KafkaCluster("A", tmp_path / "a")
    with pytest.raises(TestClusterError, match="Java not found"):
        cluster.start(timeout=10)
    assert not cluster.is_running


def test_old_java_is_rejected(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = tmp_path / "java"
    fake.write_text("#!/bin/sh\necho 'openjdk version \"1.8.0_392\"' >&2\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("MIRRORLIB_JAVA", str(fake))
    with pytest.raises(TestClusterError, match="is Java 8"):
        jars.java_executable()


def test_java_home_is_preferred(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    bin_dir = tmp_path / "jdk" / "bin"
    bin_dir.mkdir(parents=True)
    fake = bin_dir / "java"
    fake.write_text("#!/bin/sh\necho 'openjdk version \"21.0.1\" 2023-10-17' >&2\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.delenv("MIRRORLIB_JAVA", raising=False)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk"))
    assert jars.java_executable() == str(fake)
    assert jars.java_version(str(fake)) == 21


def test_missing_maven_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("MIRRORLIB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("MIRRORLIB_MVN", raising=False)
    monkeypatch.delenv("MAVEN_HOME", raising=False)
    with pytest.raises(TestClusterError) as info:
        jars.resolve_kafka_jars()
    assert "Maven (`mvn`) not found" in str(info.value)
    assert "apt-get install maven" in str(info.value)


def test_cache_dir_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("MIRRORLIB_CACHE_DIR", str(tmp_path))
    assert jars.kafka_lib_dir("1.2.3") == tmp_path / "kafka-1.2.3" / "lib"
    monkeypatch.delenv("MIRRORLIB_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert jars.cache_dir() == tmp_path / "xdg" / "mirrorlib"


@pytest.mark.java
def test_default_cache_resolves_and_is_cached(monkeypatch: pytest.MonkeyPatch) -> None:
    lib = jars.resolve_kafka_jars()
    names = {p.name for p in lib.glob("*.jar")}
    v = jars.KAFKA_VERSION
    for jar in (
        f"kafka_2.13-{v}.jar",
        f"connect-mirror-{v}.jar",
        f"kafka-tools-{v}.jar",
        f"log4j-slf4j-impl-{jars.LOG4J_VERSION}.jar",
        "slf4j-api-1.7.36.jar",
    ):
        assert jar in names
    assert not any(n.startswith("slf4j-api-2") for n in names)
    assert jars.kafka_classpath() == f"{lib}/*"
    # cached: no Maven needed any more, and fast
    monkeypatch.setenv("MIRRORLIB_MVN", "/nonexistent/mvn")
    started = time.monotonic()
    assert jars.resolve_kafka_jars() == lib
    assert time.monotonic() - started < 1.0


@pytest.mark.java
def test_concurrent_resolution_runs_maven_once(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    real_mvn = jars.maven_executable()
    counter = tmp_path / "mvn-calls"
    wrapper = tmp_path / "mvn"
    wrapper.write_text(f'#!/bin/sh\necho run >> "{counter}"\nexec "{real_mvn}" "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("MIRRORLIB_MVN", str(wrapper))
    monkeypatch.setenv("MIRRORLIB_CACHE_DIR", str(tmp_path / "cache"))
    results: list[Path | BaseException] = []

    def resolve() -> None:
        try:
            results.append(jars.resolve_kafka_jars(timeout=600))
        except BaseException as exc:
            results.append(exc)

    threads = [threading.Thread(target=resolve) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(660)
    assert len(results) == 3 and all(isinstance(r, Path) for r in results), results
    assert counter.read_text().count("run") == 1
    lib = results[0]
    assert (
        isinstance(lib, Path) and lib == tmp_path / "cache" / f"kafka-{jars.KAFKA_VERSION}" / "lib"
    )
    assert len(list(lib.glob("*.jar"))) > 50
    assert not [p for p in lib.parent.iterdir() if p.name.startswith("resolve-")]
    assert os.access(lib.parent.parent / f"kafka-{jars.KAFKA_VERSION}.lock", os.F_OK)
