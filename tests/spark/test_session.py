"""The settings of the sessions mirrorlib creates, and what preparing an archive refuses (no
Spark needed)."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from mirrorlib.errors import ConfigError
from mirrorlib.spark.session import (
    ARCHIVE_MAX_AGE_S,
    DAEMON_MODULE,
    DRIVER_JAVA_OPTIONS,
    KEEP_ARCHIVES,
    PreparedArchive,
    archive_path,
    class_data_sharing,
    prepare_archive,
    session_defaults,
    stop_session,
)


def test_a_session_mirrorlib_launches_runs_the_driver_jvm_with_c1_only() -> None:
    expected = {
        "spark.driver.extraJavaOptions": DRIVER_JAVA_OPTIONS,
        "spark.python.daemon.module": DAEMON_MODULE,
    }
    assert session_defaults({}, "") == expected
    by_args = {"PYSPARK_SUBMIT_ARGS": "--master local[2] --driver-memory 1g pyspark-shell"}
    assert session_defaults(by_args, "") == expected


def test_the_users_driver_java_options_are_left_alone() -> None:
    by_submit_args = {"PYSPARK_SUBMIT_ARGS": "--driver-java-options -Dx=1 pyspark-shell"}
    by_conf = {"PYSPARK_SUBMIT_ARGS": "--conf spark.driver.extraJavaOptions=-Dx=1 pyspark-shell"}
    defaults = "spark.driver.extraJavaOptions  -Dlog4j.configurationFile=x.xml\n"
    for env, text in ((by_submit_args, ""), (by_conf, ""), ({}, defaults)):
        assert session_defaults(env, text) == {"spark.python.daemon.module": DAEMON_MODULE}


def test_the_users_python_daemon_module_is_left_alone() -> None:
    by_conf = {"PYSPARK_SUBMIT_ARGS": "--conf spark.python.daemon.module=my.daemon pyspark-shell"}
    defaults = "spark.python.daemon.module  my.daemon\n"
    for env, text in ((by_conf, ""), ({}, defaults)):
        assert "spark.python.daemon.module" not in session_defaults(env, text)


def test_a_jvm_started_by_spark_submit_is_left_alone() -> None:
    assert session_defaults({"PYSPARK_GATEWAY_PORT": "41234"}, "") == {}


def test_the_driver_jvm_writes_its_class_data_archive_once_then_maps_it(tmp_path: Path) -> None:
    env = {"XDG_CACHE_HOME": str(tmp_path), "PYSPARK_SUBMIT_ARGS": "pyspark-shell"}
    writes = class_data_sharing(env, "")
    assert writes.startswith("-XX:ArchiveClassesAtExit=")
    archive = Path(writes.split()[0].partition("=")[2])
    assert archive.parent == tmp_path / "mirrorlib"
    assert session_defaults(env, "")["spark.driver.extraJavaOptions"] == (
        f"{DRIVER_JAVA_OPTIONS} {writes}"
    )
    archive.write_bytes(b"")  # a JVM killed before it wrote anything: written again
    assert class_data_sharing(env, "") == writes
    archive.write_bytes(b"archive")
    assert class_data_sharing(env, "").startswith(f"-XX:SharedArchiveFile={archive} ")


def test_the_archive_follows_what_the_classes_come_from(tmp_path: Path) -> None:
    env = {"XDG_CACHE_HOME": str(tmp_path), "PYSPARK_SUBMIT_ARGS": "pyspark-shell"}
    jars = {**env, "PYSPARK_SUBMIT_ARGS": "--jars x.jar pyspark-shell"}
    names = {
        class_data_sharing(env, "").split()[0],
        class_data_sharing(jars, "").split()[0],
        class_data_sharing(env, "spark.jars y.jar\n").split()[0],
    }
    assert len(names) == 3


def test_no_archive_when_turned_off_or_without_a_usable_cache_directory(tmp_path: Path) -> None:
    assert (
        class_data_sharing({"XDG_CACHE_HOME": str(tmp_path), "MIRRORLIB_SPARK_CDS": "off"}, "")
        == ""
    )
    assert class_data_sharing({}, "") == ""
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    assert class_data_sharing({"XDG_CACHE_HOME": str(blocked)}, "") == ""
    assert class_data_sharing({"XDG_CACHE_HOME": str(tmp_path / "with space")}, "") == ""
    assert (
        session_defaults({"XDG_CACHE_HOME": str(blocked)}, "")["spark.driver.extraJavaOptions"]
        == DRIVER_JAVA_OPTIONS
    )


def test_stopping_a_launched_session_waits_for_its_jvm_to_exit() -> None:
    # Spark's gateway JVM exits at the end of its standard input; ``cat`` stands in for it
    jvm = subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    stopped: list[bool] = []
    session = SimpleNamespace(
        sparkContext=SimpleNamespace(_gateway=SimpleNamespace(proc=jvm)),
        stop=lambda: stopped.append(True),
    )
    stop_session(session, timeout=10.0)
    assert stopped == [True]
    assert jvm.returncode == 0


def test_a_new_archive_deletes_all_but_the_most_recently_used_others(tmp_path: Path) -> None:
    directory = tmp_path / "mirrorlib"
    directory.mkdir()
    old = []
    recent = time.time() - 3600.0
    for i in range(KEEP_ARCHIVES + 2):  # from the least to the most recently used
        path = directory / f"spark-driver-{i:016x}.jsa"
        path.write_bytes(b"archive")
        os.utime(path, (recent + i, recent + i))
        old.append(path)
    unrelated = directory / "notes.txt"
    unrelated.write_text("kept")
    env = {"XDG_CACHE_HOME": str(tmp_path), "PYSPARK_SUBMIT_ARGS": "pyspark-shell"}
    os.utime(old[0], (recent + 60, recent + 60))  # the oldest, used most recently of all
    writes = class_data_sharing(env, "")
    assert writes.startswith("-XX:ArchiveClassesAtExit=")
    # the one just used, then the newest of the rest, up to KEEP_ARCHIVES
    assert set(directory.glob("spark-driver-*.jsa")) == {
        old[0],
        *old[len(old) - KEEP_ARCHIVES + 1 :],
    }
    assert unrelated.exists()


def test_a_new_archive_deletes_others_unused_for_a_long_time(tmp_path: Path) -> None:
    directory = tmp_path / "mirrorlib"
    directory.mkdir()
    now = time.time()
    used = directory / "spark-driver-0000000000000001.jsa"
    unused = directory / "spark-driver-0000000000000002.jsa"
    for path, age in ((used, ARCHIVE_MAX_AGE_S - 3600.0), (unused, ARCHIVE_MAX_AGE_S + 3600.0)):
        path.write_bytes(b"archive")
        os.utime(path, (now - age, now - age))
    env = {"XDG_CACHE_HOME": str(tmp_path), "PYSPARK_SUBMIT_ARGS": "pyspark-shell"}
    assert class_data_sharing(env, "").startswith("-XX:ArchiveClassesAtExit=")
    assert set(directory.glob("spark-driver-*.jsa")) == {used}


def test_mapping_an_archive_marks_it_used(tmp_path: Path) -> None:
    env = {"XDG_CACHE_HOME": str(tmp_path), "PYSPARK_SUBMIT_ARGS": "pyspark-shell"}
    archive = Path(class_data_sharing(env, "").split()[0].partition("=")[2])
    archive.write_bytes(b"archive")
    os.utime(archive, (1_000_000, 1_000_000))
    assert class_data_sharing(env, "").startswith("-XX:SharedArchiveFile=")
    assert archive.stat().st_mtime > 1_000_000


def test_preparing_an_archive_refuses_where_no_session_would_map_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path / "conf"))  # no spark-defaults.conf
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", "--driver-java-options -Dx=1 pyspark-shell")
    with pytest.raises(ConfigError, match=r"--driver-java-options in PYSPARK_SUBMIT_ARGS"):
        prepare_archive()
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", "pyspark-shell")
    monkeypatch.setenv("MIRRORLIB_SPARK_CDS", "off")
    with pytest.raises(ConfigError, match="MIRRORLIB_SPARK_CDS"):
        prepare_archive()
    monkeypatch.delenv("MIRRORLIB_SPARK_CDS")
    monkeypatch.setenv("PYSPARK_GATEWAY_PORT", "41234")
    with pytest.raises(ConfigError, match="spark-submit"):
        prepare_archive()


def test_preparing_keeps_an_archive_that_is_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path / "conf"))
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", "pyspark-shell")
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    monkeypatch.delenv("MIRRORLIB_SPARK_CDS", raising=False)
    path = archive_path(os.environ, "")
    assert path is not None and path.parent == tmp_path / "mirrorlib"
    path.parent.mkdir()
    path.write_bytes(b"archive")
    prepared = prepare_archive()  # (no Spark launched: it would need pyspark and Java)
    assert prepared == PreparedArchive(path, 7, written=False, seconds=0.0)


def test_preparing_refuses_a_cache_directory_it_cannot_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path / "conf"))
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", "pyspark-shell")
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    monkeypatch.delenv("MIRRORLIB_SPARK_CDS", raising=False)
    with pytest.raises(ConfigError, match="cannot be written"):
        prepare_archive()
