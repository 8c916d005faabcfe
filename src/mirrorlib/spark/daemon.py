"""Spark's Python worker daemon, importing PySpark from its installed package when it can.

Spark starts one Python daemon per executor (``python -m pyspark.daemon``; it forks the Python
workers that run the tasks), with Spark's ``pyspark.zip`` (and py4j's zip) first on
``PYTHONPATH``. Python compiles every module it imports from a zip again in every process: it
keeps no bytecode cache for them. PySpark's daemon imports most of PySpark, so on the test
machine the daemon took 1.3-1.5 s of CPU to start from the zip against 0.3 s from the installed
package with its cached bytecode, at the moment a job starts, on the cores the driver's JVM
needs to start the query (``docs/spark.md``, start-up).

With ``spark.python.daemon.module=mirrorlib.spark.daemon`` (which a session mirrorlib launches
gets: :func:`mirrorlib.spark.session.session_defaults`) the executors start this module
instead: it moves a zip to the end of ``sys.path`` only when the same package is installed where
the interpreter finds it *and* its ``version.py`` is byte for byte the zip's (a ``pip install
pyspark``, whose ``pyspark.zip`` is a copy of the package beside it); otherwise (a Spark
distribution with another PySpark, or none installed) the path stays as Spark made it. Then it
runs ``pyspark.daemon`` as Spark would have. It imports nothing of mirrorlib or PySpark before
that (the daemon must not start threads before it forks).
"""

from __future__ import annotations

import os
import runpy
import sys
import zipfile
from collections.abc import Sequence
from importlib.machinery import PathFinder

__all__ = ["installed_same", "main", "reorder_path"]

#: Spark's zips of packages that may also be installed: file name prefix → package
_ZIPPED = {"pyspark.zip": "pyspark", "py4j-": "py4j"}


def _package_of(entry: str) -> str | None:
    name = os.path.basename(entry)
    if not name.endswith(".zip"):
        return None
    return next((pkg for prefix, pkg in _ZIPPED.items() if name.startswith(prefix)), None)


def installed_same(zip_entry: str, package: str, path: Sequence[str]) -> bool:
    """Whether ``package`` is found on ``path`` (outside any zip) with a ``version.py`` equal,
    byte for byte, to the one in ``zip_entry``."""
    spec = PathFinder.find_spec(package, [p for p in path if not p.endswith(".zip")])
    if spec is None or not spec.submodule_search_locations:
        return False
    installed = os.path.join(next(iter(spec.submodule_search_locations)), "version.py")
    try:
        with zipfile.ZipFile(zip_entry) as z:
            zipped = z.read(f"{package}/version.py")
        with open(installed, "rb") as f:
            return f.read() == zipped
    except (OSError, KeyError, zipfile.BadZipFile):
        return False


def reorder_path(path: Sequence[str]) -> list[str]:
    """``path`` with Spark's zips of packages installed in the same version moved to its end
    (kept there: a module only the zip has is still found)."""
    moved = [
        entry
        for entry in path
        if (pkg := _package_of(entry)) is not None and installed_same(entry, pkg, path)
    ]
    return [entry for entry in path if entry not in moved] + moved


def main() -> None:
    """Run ``pyspark.daemon`` (Spark's arguments untouched) with :func:`reorder_path`."""
    sys.path[:] = reorder_path(sys.path)
    runpy.run_module("pyspark.daemon", run_name="__main__", alter_sys=True)


if __name__ == "__main__":  # pragma: no cover - the executors' daemon process
    main()
