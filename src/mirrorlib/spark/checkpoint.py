"""A flow's Spark checkpoint directory: the small files mirrorlib keeps next to Spark's own.

:class:`CheckpointFiles` reads and writes them through the driver's JVM (any Hadoop file
system); the plan log (:class:`~mirrorlib.spark.planner.PlanLog`) and the parked partitions'
log (:class:`~mirrorlib.spark.plane.ParkedLog`) write their files through it, and
:func:`refuse_earlier_checkpoint` checks that the directory is one this engine can resume.
"""

from __future__ import annotations

import json
from typing import Any

from mirrorlib.errors import ConfigError

__all__ = ["CheckpointFiles", "refuse_earlier_checkpoint"]


class CheckpointFiles:
    """Small files in a flow's Spark checkpoint directory (any Hadoop file system), read and
    written through the driver's JVM."""

    def __init__(self, spark: Any, directory: str) -> None:
        jvm = spark._jvm
        self._path = jvm.org.apache.hadoop.fs.Path
        self._root = self._path(directory.rstrip("/"))
        self._fs = self._root.getFileSystem(spark._jsc.hadoopConfiguration())
        self._io = jvm.org.apache.commons.io.IOUtils

    def ids(self, folder: str) -> list[int]:
        """The numeric file names in ``folder`` (batch ids), sorted."""
        path = self._path(self._root, folder)
        if not self._fs.exists(path):
            return []
        names = [st.getPath().getName() for st in self._fs.listStatus(path)]
        return sorted(int(n) for n in names if n.isdigit())

    def read(self, name: str) -> bytes | None:
        path = self._path(self._root, name)
        if not self._fs.exists(path):
            return None
        stream = self._fs.open(path)
        try:
            return bytes(self._io.toByteArray(stream))
        finally:
            stream.close()

    def write(self, name: str, data: bytes) -> None:
        out = self._fs.create(self._path(self._root, name), True)
        try:
            out.write(bytearray(data))
        finally:
            out.close()

    def delete(self, name: str) -> None:
        self._fs.delete(self._path(self._root, name), False)


def refuse_earlier_checkpoint(files: CheckpointFiles, directory: str) -> None:
    """Raise :class:`~mirrorlib.errors.ConfigError` when ``directory`` was written by an
    earlier engine (its Python data source kept ``{topic: {partition: offset}}`` as the source's
    offsets; the query's source is Spark's ``rate-micro-batch`` now, which Spark would refuse to
    read them as, failing the query with a JVM stack trace)."""
    ids = files.ids("offsets")
    data = files.read(f"offsets/{ids[-1]}") if ids else None
    if not data:
        return
    try:
        offsets = json.loads(data.decode().splitlines()[-1])
    except (UnicodeDecodeError, ValueError, IndexError):
        return  # not ours to judge: Spark reports its own checkpoint's problems
    if isinstance(offsets, dict) and offsets and all(isinstance(v, dict) for v in offsets.values()):
        raise ConfigError(
            f"the Spark checkpoint location {directory} was written by an earlier mirrorlib "
            "(its Python data source's offsets); this engine cannot resume it: start with a "
            "new checkpoint_location (the flows resume after the positions stored in the "
            "offsets topic)",
            value=directory,
        )
