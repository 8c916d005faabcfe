"""PySpark's Python worker daemon, with the copy task's modules imported before it forks.

Spark starts one daemon per executor (``python -m <spark.python.daemon.module>``) and forks a
Python worker from it for each task slot. PySpark's own daemon (``pyspark.daemon``) imports
``pyspark.worker`` only after each fork, and the first copy task then imports mirrorlib and
confluent-kafka in every worker. This daemon imports them once, before forking (neither starts
a thread at import), so a worker is ready as soon as it is forked::

    --conf spark.python.daemon.module=mirrorlib.spark.daemon

:class:`~mirrorlib.spark.SparkReplicator` sets it on the sessions it creates.
"""

from __future__ import annotations

import pyspark.worker  # noqa: F401  (imported before the fork, for every worker)
from pyspark.daemon import manager

import mirrorlib.kafka.ranges  # noqa: F401

__all__ = ["manager"]

if __name__ == "__main__":
    manager()
