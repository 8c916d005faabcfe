"""The executors' daemon module: Spark's zips go last only before an identical installed package
(no Spark needed)."""

from __future__ import annotations

import zipfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from mirrorlib.spark.daemon import installed_same, reorder_path


def _zip(path: Path, package: str, version: str) -> str:
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"{package}/__init__.py", "")
        z.writestr(f"{package}/version.py", f'__version__ = "{version}"\n')
    return str(path)


def _installed(root: Path, package: str, version: str) -> str:
    (root / package).mkdir(parents=True)
    (root / package / "__init__.py").write_text("")
    (root / package / "version.py").write_text(f'__version__ = "{version}"\n')
    return str(root)


def test_zips_of_installed_identical_packages_go_last(tmp_path: Path) -> None:
    site = _installed(tmp_path / "site", "pyspark", "4.3.0")
    _installed(tmp_path / "site", "py4j", "0.10.9.9")
    spark_zip = _zip(tmp_path / "pyspark.zip", "pyspark", "4.3.0")
    py4j_zip = _zip(tmp_path / "py4j-0.10.9.9-src.zip", "py4j", "0.10.9.9")
    path = [spark_zip, py4j_zip, "/app", site]
    assert installed_same(spark_zip, "pyspark", path)
    assert reorder_path(path) == ["/app", site, spark_zip, py4j_zip]


def test_zips_stay_first_before_another_version_or_none(tmp_path: Path) -> None:
    site = _installed(tmp_path / "site", "pyspark", "4.2.0")  # a different PySpark installed
    spark_zip = _zip(tmp_path / "pyspark.zip", "pyspark", "4.3.0")
    py4j_zip = _zip(tmp_path / "py4j-0.10.9.9-src.zip", "py4j", "0.10.9.9")  # py4j not installed
    path = [spark_zip, py4j_zip, site]
    assert not installed_same(spark_zip, "pyspark", path)
    assert reorder_path(path) == path


def test_other_entries_and_unreadable_zips_are_left_alone(tmp_path: Path) -> None:
    site = _installed(tmp_path / "site", "pyspark", "4.3.0")
    broken = tmp_path / "pyspark.zip"
    broken.write_bytes(b"not a zip")
    other = _zip(tmp_path / "deps.zip", "pyspark", "4.3.0")  # not one of Spark's zips
    path = [str(broken), other, site]
    assert reorder_path(path) == path


def _where(_: Iterable[int]) -> Iterator[tuple[str, list[str]]]:
    import sys

    import pyspark

    yield pyspark.__file__ or "", [p for p in sys.path if p.endswith(".zip")]


@pytest.mark.integration
@pytest.mark.spark
def test_the_executors_import_pyspark_from_its_installed_package(spark: Any) -> None:
    import pyspark

    got = spark.sparkContext.parallelize(range(2), 2).mapPartitions(_where).collect()
    assert got and all(path == pyspark.__file__ for path, _ in got)  # not Spark's pyspark.zip
    assert all(any(z.endswith("pyspark.zip") for z in zips) for _, zips in got)  # kept, last
