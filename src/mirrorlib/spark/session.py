"""Settings of the Spark sessions that :class:`~mirrorlib.spark.SparkReplicator` creates itself,
launching Spark's JVM (a session passed in, or one started by ``spark-submit``, is used as it
is).

Both cut the start-up to the first record (see ``docs/spark.md``, start-up):

* ``spark.python.daemon.module=mirrorlib.spark.daemon``: Python workers are forked with the
  copy task's modules already imported. Only with a ``local`` master: the executors then run
  where mirrorlib is installed (a cluster's executors may get it through ``--py-files`` only,
  which PySpark adds to the path after the daemon started);
* ``-XX:TieredStopAtLevel=1`` for the driver's JVM (only the C1 compiler): Spark's start-up
  compiles much less on a busy machine. In the driver JVM only scheduling and small task
  results run: no record passes through it. Not set when the user gives the driver's Java
  options (``spark.driver.extraJavaOptions`` or ``--driver-java-options``, in
  ``PYSPARK_SUBMIT_ARGS`` or ``spark-defaults.conf``), which it would replace.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

__all__ = ["DAEMON_MODULE", "DRIVER_JAVA_OPTIONS", "session_defaults"]

DAEMON_MODULE = "mirrorlib.spark.daemon"
DRIVER_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1"
_JAVA_OPTION_KEYS = ("spark.driver.extraJavaOptions", "--driver-java-options")


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


def _master(master: str | None, submit_args: str, spark_defaults: str) -> str:
    if master:
        return master
    for pattern, text in (
        (r"--master[ =](\S+)", submit_args),
        (r"spark\.master=(\S+)", submit_args),
        (r"^\s*spark\.master[\s=:]+(\S+)", spark_defaults),
    ):
        found = re.search(pattern, text, re.MULTILINE)
        if found:
            return found.group(1).strip("'\"")
    return "local[*]"


def session_defaults(
    master: str | None = None,
    environ: Mapping[str, str] | None = None,
    spark_defaults: str | None = None,
) -> dict[str, str]:
    """The settings to give a session mirrorlib creates (``master`` as given to it), given the
    process environment and the text of ``spark-defaults.conf`` (read from the environment's
    Spark when ``None``). None if the JVM is already running (``spark-submit``)."""
    env = os.environ if environ is None else environ
    if env.get("PYSPARK_GATEWAY_PORT"):  # spark-submit launched the JVM and configured it
        return {}
    text = _spark_defaults(env) if spark_defaults is None else spark_defaults
    submit_args = env.get("PYSPARK_SUBMIT_ARGS", "")
    out: dict[str, str] = {}
    if _master(master, submit_args, text).startswith("local"):
        out["spark.python.daemon.module"] = DAEMON_MODULE
    given = submit_args + "\n" + text
    if not any(key in given for key in _JAVA_OPTION_KEYS):
        out["spark.driver.extraJavaOptions"] = DRIVER_JAVA_OPTIONS
    return out
