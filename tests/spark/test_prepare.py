"""``python -m mirrorlib.spark --prepare`` on a real Spark: it writes the driver's class-data
archive ahead of the first job, and the next session mirrorlib launches maps it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.procs import descendants
from tests.spark.conftest import require_spark

pytestmark = pytest.mark.spark

# a session launched like a job's (mirrorlib's settings), held open until stdin ends
_SESSION = """
import sys
from mirrorlib.spark.session import launch_session, stop_session
spark = launch_session("local[1]")
print("ready", flush=True)
sys.stdin.read()
stop_session(spark)
"""


def _maps(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return ""


def test_prepare_writes_the_archive_that_the_next_session_maps(tmp_path: Path) -> None:
    require_spark()
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"),
           "PYSPARK_SUBMIT_ARGS": "pyspark-shell", "SPARK_LOCAL_IP": "127.0.0.1",
           "PYSPARK_PYTHON": sys.executable}  # fmt: skip
    env.pop("MIRRORLIB_SPARK_CDS", None)
    env.pop("PYSPARK_GATEWAY_PORT", None)
    command = [sys.executable, "-m", "mirrorlib.spark", "--prepare"]
    first = subprocess.run(
        command, check=False, env=env, capture_output=True, text=True, timeout=300
    )
    assert first.returncode == 0, first.stderr[-3000:]
    assert "class-data archive written in" in first.stdout, first.stdout
    (archive,) = (tmp_path / "cache" / "mirrorlib").glob("spark-driver-*.jsa")
    assert archive.stat().st_size > 10_000_000  # Spark's classes, not an empty file
    assert str(archive) in first.stdout

    again = subprocess.run(
        command, check=False, env=env, capture_output=True, text=True, timeout=300
    )
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"class-data archive already there: {archive}" in again.stdout

    # a session launched like a job's maps the prepared archive into its JVM
    session = subprocess.Popen(
        [sys.executable, "-c", _SESSION], env=env, text=True,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        assert session.stdout is not None and session.stdin is not None
        assert session.stdout.readline().strip() == "ready"
        mapped = [p for p in descendants(session.pid) if str(archive) in _maps(p)]
        assert mapped, "no process of the session mapped the archive"
        written = archive.stat().st_size
        session.stdin.close()
        session.wait(120)
        assert archive.stat().st_size == written  # mapped, not written again
    finally:
        if session.poll() is None:
            session.kill()
            session.wait()


def test_prepare_refuses_when_archives_are_off(tmp_path: Path) -> None:
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path), "MIRRORLIB_SPARK_CDS": "off"}
    env.pop("PYSPARK_GATEWAY_PORT", None)
    done = subprocess.run(
        [sys.executable, "-m", "mirrorlib.spark", "--prepare"],
        check=False, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.startswith("error: no class-data archive: MIRRORLIB_SPARK_CDS")
    assert "Traceback" not in done.stderr


def test_a_job_without_its_configuration_is_refused_with_status_2() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mirrorlib.spark"],
        check=False, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert "error: missing config and --checkpoint-location" in done.stderr
