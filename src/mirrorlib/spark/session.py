"""Settings of the Spark sessions that :class:`~mirrorlib.spark.SparkReplicator` creates itself,
launching Spark's JVM (a session passed in, or one started by ``spark-submit``, is used as it
is).

The driver's JVM runs with ``-XX:TieredStopAtLevel=1`` (only the C1 compiler): Spark's start-up
compiles much less on a busy machine, which brings the first record seconds earlier (see
``docs/spark.md``, start-up). In the driver JVM only scheduling and small task results run: no
record passes through it. Not set when the user gives the driver's Java options
(``spark.driver.extraJavaOptions`` or ``--driver-java-options``, in ``PYSPARK_SUBMIT_ARGS`` or
``spark-defaults.conf``), which it would replace.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

__all__ = ["DRIVER_JAVA_OPTIONS", "session_defaults"]

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


def session_defaults(
    environ: Mapping[str, str] | None = None, spark_defaults: str | None = None
) -> dict[str, str]:
    """The settings to give a session mirrorlib creates, given the process environment and the text of ``spark-defaults.conf`` (read from the environment's
    Spark when ``None``). None if the JVM is already running (``spark-submit``)."""
    env = os.environ if environ is None else environ
    if env.get("PYSPARK_GATEWAY_PORT"):  # spark-submit launched the JVM and configured it
        return {}
    text = _spark_defaults(env) if spark_defaults is None else spark_defaults
    submit_args = env.get("PYSPARK_SUBMIT_ARGS", "")
    out: dict[str, str] = {}
    given = submit_args + "\n" + text
    if not any(key in given for key in _JAVA_OPTION_KEYS):
        out["spark.driver.extraJavaOptions"] = DRIVER_JAVA_OPTIONS
    return out
