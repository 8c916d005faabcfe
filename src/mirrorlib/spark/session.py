"""Settings of the Spark sessions that :class:`~mirrorlib.spark.SparkReplicator` creates itself,
launching Spark's JVM (a session passed in, or one started by ``spark-submit``, is used as it
is).

The driver's JVM runs with ``-XX:TieredStopAtLevel=1`` (only the C1 compiler): Spark's start-up
compiles much less on a busy machine, which brings the first record seconds earlier (see
``docs/spark.md``, start-up). In the driver JVM only scheduling and small task results run: no
record passes through it.

The driver's JVM also loads Spark's classes from a class-data-sharing archive (AppCDS) kept in
the user's cache directory (``$XDG_CACHE_HOME/mirrorlib`` or ``~/.cache/mirrorlib``): the first
session writes it when its JVM exits (``-XX:ArchiveClassesAtExit``), later ones map it
(``-XX:SharedArchiveFile``) instead of loading and verifying the classes again. The archive is
named after what its classes come from (the Java and PySpark installations, the submit arguments
and ``spark-defaults.conf``); an archive the JVM finds stale or unusable is ignored by the JVM
(``-Xshare:auto``, its warnings off), and a cache directory that cannot be created only means no
archive. An archive is about 150 MB and a new Java, PySpark or submit configuration needs a new
one: a session that writes one deletes the others unused for :data:`ARCHIVE_MAX_AGE_S` and all
but the :data:`KEEP_ARCHIVES` most recently used of the rest (using one marks it used; an archive
another JVM has mapped stays readable to it). A machine that runs a few configurations (a
deployment's, a test suite's, a benchmark's) keeps each one's archive.
``MIRRORLIB_SPARK_CDS=off`` turns it off.

Neither is set when the user gives the driver's Java options (``spark.driver.extraJavaOptions``
or ``--driver-java-options``, in ``PYSPARK_SUBMIT_ARGS`` or ``spark-defaults.conf``), which
they would replace.

The executors start their Python daemon from :mod:`mirrorlib.spark.daemon`
(``spark.python.daemon.module``), which imports PySpark from its installed package instead of
Spark's zip when both are the same version (1.3-1.5 s of CPU less per daemon on the test
machine, at the job's start), unless the user sets that setting.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from mirrorlib.errors import ConfigError, MirrorError

__all__ = [
    "ARCHIVE_MAX_AGE_S",
    "DAEMON_MODULE",
    "DRIVER_JAVA_OPTIONS",
    "KEEP_ARCHIVES",
    "PreparedArchive",
    "archive_path",
    "class_data_sharing",
    "launch_session",
    "prepare_archive",
    "session_defaults",
    "stop_session",
]

DRIVER_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1"
#: the executors' Python daemon (:mod:`mirrorlib.spark.daemon`)
DAEMON_MODULE = "mirrorlib.spark.daemon"
_DAEMON_MODULE_KEY = "spark.python.daemon.module"
_JAVA_OPTION_KEYS = ("spark.driver.extraJavaOptions", "--driver-java-options")
#: the JVM's messages about an archive it cannot use (it runs on without it)
_CDS_QUIET = "-Xshare:auto -Xlog:cds=off -Xlog:cds+dynamic=off"
#: archives of other configurations kept beside the one a session writes (most recently used)
KEEP_ARCHIVES = 4
#: an archive of another configuration unused for this long is deleted by a session writing one
ARCHIVE_MAX_AGE_S = 30 * 24 * 3600.0
_ARCHIVE_GLOB = "spark-driver-*.jsa"

log = logging.getLogger(__name__)


def _spark_defaults(environ: Mapping[str, str]) -> str:
    """The text of the ``spark-defaults.conf`` that ``spark-submit`` would read ("" if none)."""
    conf_dir = environ.get("SPARK_CONF_DIR")
    if not conf_dir and environ.get("SPARK_HOME"):
        conf_dir = os.path.join(environ["SPARK_HOME"], "conf")
    if not conf_dir:
        try:
            import pyspark

            conf_dir = os.path.join(os.path.dirname(pyspark.__file__), "conf")
        except ImportError:  # pragma: no cover - the session needs pyspark anyway
            return ""
    path = Path(conf_dir) / "spark-defaults.conf"
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _cache_dir(environ: Mapping[str, str]) -> Path | None:
    base = environ.get("XDG_CACHE_HOME") or (
        os.path.join(environ["HOME"], ".cache") if environ.get("HOME") else ""
    )
    return Path(base) / "mirrorlib" if base else None


def _archive_key(environ: Mapping[str, str], spark_defaults: str) -> str:
    """What the driver's classes come from: Java, PySpark, submit arguments, Spark defaults."""
    java_home = environ.get("JAVA_HOME", "")
    java = os.path.join(java_home, "bin", "java") if java_home else shutil.which("java") or ""
    try:
        import pyspark

        spark = f"{pyspark.__version__} {os.path.dirname(pyspark.__file__)}"
    except ImportError:  # pragma: no cover - the session needs pyspark anyway
        spark = ""
    parts = (os.path.realpath(java) if java else "", spark,
             environ.get("PYSPARK_SUBMIT_ARGS", ""), spark_defaults)  # fmt: skip
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def archive_path(environ: Mapping[str, str], spark_defaults: str) -> Path | None:
    """Where the driver's class-data-sharing archive of this configuration lives; ``None`` when
    archives are turned off (``MIRRORLIB_SPARK_CDS=off``) or there is no usable cache
    directory."""
    if environ.get("MIRRORLIB_SPARK_CDS", "").lower() in ("0", "off", "false", "no"):
        return None
    directory = _cache_dir(environ)
    if directory is None or any(c.isspace() for c in str(directory)):
        return None  # (the Java options are split at spaces)
    return directory / f"spark-driver-{_archive_key(environ, spark_defaults)}.jsa"


def class_data_sharing(environ: Mapping[str, str], spark_defaults: str) -> str:
    """The driver JVM's options for its class-data-sharing archive: map it if it exists, else
    write it at exit; "" when turned off or when there is no usable cache directory."""
    archive = archive_path(environ, spark_defaults)
    if archive is None:
        return ""
    directory = archive.parent
    try:
        directory.mkdir(parents=True, exist_ok=True)
        usable = archive.is_file() and archive.stat().st_size > 0
        writable = os.access(directory, os.W_OK)
    except OSError:
        return ""
    if usable:
        with contextlib.suppress(OSError):
            os.utime(archive)  # used now: the last to be deleted
        return f"-XX:SharedArchiveFile={archive} {_CDS_QUIET}"
    if not writable:
        return ""
    _prune_archives(directory, keep=archive)
    return f"-XX:ArchiveClassesAtExit={archive} {_CDS_QUIET}"


def _prune_archives(directory: Path, keep: Path) -> None:
    """Delete the archives in ``directory`` other than ``keep`` that are unused for
    :data:`ARCHIVE_MAX_AGE_S` or not among the :data:`KEEP_ARCHIVES` most recently used others
    (their modification times)."""
    others = []
    for path in directory.glob(_ARCHIVE_GLOB):
        if path != keep:
            with contextlib.suppress(OSError):
                others.append((path.stat().st_mtime, path))
    others.sort(reverse=True)
    unused_since = time.time() - ARCHIVE_MAX_AGE_S
    stale = others[KEEP_ARCHIVES:] + [o for o in others[:KEEP_ARCHIVES] if o[0] < unused_since]
    for _, path in stale:
        try:
            path.unlink()
        except OSError as exc:
            log.debug("could not delete the old class-data archive %s: %s", path, exc)
        else:
            log.info("deleted the old class-data archive %s", path)


def _java_options_given(environ: Mapping[str, str], spark_defaults: str) -> tuple[str, str] | None:
    """The key and the place where the user gives the driver's Java options (which
    mirrorlib's would replace), e.g. ``("--driver-java-options", "PYSPARK_SUBMIT_ARGS")``."""
    for where, text in (("PYSPARK_SUBMIT_ARGS", environ.get("PYSPARK_SUBMIT_ARGS", "")),
                        ("spark-defaults.conf", spark_defaults)):  # fmt: skip
        for key in _JAVA_OPTION_KEYS:
            if key in text:
                return key, where
    return None


def session_defaults(
    environ: Mapping[str, str] | None = None, spark_defaults: str | None = None
) -> dict[str, str]:
    """The settings to give a session mirrorlib creates, given the process environment and the text of ``spark-defaults.conf`` (read from the environment's
    Spark when ``None``). None if the JVM is already running (``spark-submit``)."""
    env = os.environ if environ is None else environ
    if env.get("PYSPARK_GATEWAY_PORT"):  # spark-submit launched the JVM and configured it
        return {}
    text = _spark_defaults(env) if spark_defaults is None else spark_defaults
    out: dict[str, str] = {}
    if _java_options_given(env, text) is None:
        cds = class_data_sharing(env, text)
        out["spark.driver.extraJavaOptions"] = f"{DRIVER_JAVA_OPTIONS} {cds}".strip()
    if not any(_DAEMON_MODULE_KEY in t for t in (env.get("PYSPARK_SUBMIT_ARGS", ""), text)):
        out[_DAEMON_MODULE_KEY] = DAEMON_MODULE
    return out


def launch_session(master: str | None = None) -> Any:
    """A session of this process, launching Spark's JVM with :func:`session_defaults` (the
    running one as it is, if there is one; ``PYSPARK_PYTHON`` defaults to this interpreter)."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName("mirrorlib")
    for key, value in session_defaults().items():
        builder = builder.config(key, value)
    if master is not None:
        builder = builder.master(master)
    return builder.getOrCreate()


@attrs.frozen
class PreparedArchive:
    """The driver's class-data-sharing archive of this configuration, after
    :func:`prepare_archive`: ``written`` when this call wrote it (in ``seconds``), else it
    existed."""

    path: Path
    size: int
    written: bool
    seconds: float


def prepare_archive(master: str | None = None) -> PreparedArchive:
    """Write the class-data-sharing archive that the sessions mirrorlib launches in this
    configuration map, without waiting for a first job to write it: launch a session
    (``master``, by default ``local[1]``), run the engine's query shape on no data (a
    ``rate-micro-batch`` query whose ``foreachBatch`` starts a Python job on the executors;
    :func:`mirrorlib.spark.plane.rehearse`) and stop the session, whose JVM writes the archive
    as it exits. For an image or a machine set up before its first job (the first job of a
    fresh installation otherwise takes ~10 s longer to its first record and writes the archive
    itself). An archive that exists already is kept.

    :class:`~mirrorlib.errors.ConfigError` when archives are off or cannot be used here (no
    cache directory, the user's own Java options for the driver, Spark's JVM already running);
    :class:`~mirrorlib.errors.MirrorError` when the JVM wrote none."""
    env = os.environ
    if env.get("PYSPARK_GATEWAY_PORT"):
        raise ConfigError(
            "Spark's JVM is already running (spark-submit): prepare the archive with "
            "`python -m mirrorlib.spark --prepare` outside spark-submit"
        )
    text = _spark_defaults(env)
    given = _java_options_given(env, text)
    if given is not None:
        key, where = given
        raise ConfigError(
            f"the driver's Java options are set ({key} in {where}): mirrorlib adds no "
            "class-data archive to them",
            key=key,
        )
    archive = archive_path(env, text)
    if archive is None:
        raise ConfigError(
            "no class-data archive: MIRRORLIB_SPARK_CDS turns it off, or there is no usable "
            "cache directory (XDG_CACHE_HOME or HOME, without spaces)",
            key="MIRRORLIB_SPARK_CDS",
        )
    if archive.is_file() and archive.stat().st_size > 0:
        return PreparedArchive(archive, archive.stat().st_size, written=False, seconds=0.0)
    try:
        archive.parent.mkdir(parents=True, exist_ok=True)
        writable = os.access(archive.parent, os.W_OK)
    except OSError:
        writable = False
    if not writable:
        raise ConfigError(f"no class-data archive: {archive.parent} cannot be written")
    from mirrorlib.spark.plane import rehearse

    began = time.monotonic()
    spark = launch_session(master or "local[1]")
    try:
        with tempfile.TemporaryDirectory(prefix="mirrorlib-prepare-") as directory:
            rehearse(spark, directory)
    finally:
        stop_session(spark)
    if not (archive.is_file() and archive.stat().st_size > 0):
        raise MirrorError(f"Spark's driver JVM exited without writing {archive}")
    return PreparedArchive(
        archive, archive.stat().st_size, written=True, seconds=time.monotonic() - began
    )


def stop_session(spark: Any, timeout: float = 60.0) -> None:
    """Stop a session mirrorlib launched and wait up to ``timeout`` seconds for its JVM to exit
    (a JVM writing the class-data-sharing archive does it as it exits: waiting keeps the archive
    whole when the process group is killed right after the driver)."""
    gateway = getattr(spark.sparkContext, "_gateway", None)
    proc = getattr(gateway, "proc", None)
    spark.stop()
    if not isinstance(proc, subprocess.Popen) or proc.stdin is None:
        return
    with contextlib.suppress(OSError):
        proc.stdin.close()  # Spark's gateway exits at the end of its standard input
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        log.warning("Spark's driver JVM still runs %.0fs after the session stopped", timeout)
