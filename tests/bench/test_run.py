"""The benchmark commands refuse what would silently measure something else."""

from __future__ import annotations

from pathlib import Path

import pytest
from bench.run import main
from bench.wait import parse_variant


@pytest.mark.parametrize("name", ["elsewhere/src", "v-patched"])
def test_a_mirrorlib_src_without_mirrorlib_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """A wrong ``--mirrorlib-src`` (no ``mirrorlib`` package in it, or not a ``src/``
    directory) used to run the installed package under the patch's name."""
    src = tmp_path / name
    (src / "mirrorlib").mkdir(parents=True)  # a package directory without __init__.py
    if name == "v-patched":
        (src / "mirrorlib" / "__init__.py").write_text("")  # a package, but not in src/
    monkeypatch.setenv("BENCH_WORK_DIR", str(tmp_path / "work"))
    with pytest.raises(SystemExit, match="not a src/ directory holding mirrorlib"):
        main(["--mirrorlib-src", str(src), "--out", str(tmp_path / "out"), "--no-scenarios"])
    with pytest.raises(SystemExit, match="not a src/ directory holding mirrorlib"):
        parse_variant(f"patched:{src}")  # python -m bench.wait --variant ...


def test_the_results_page_says_whether_the_spark_archive_was_prepared() -> None:
    """A Spark job's start-up depends on the driver's class-data archive: the page says whether
    the run wrote it first, and runs from before that setting existed say nothing."""
    from bench.run import spark_prepare_line

    assert spark_prepare_line({"settings": {}}) == ""
    assert "--no-spark-prepare" in spark_prepare_line({"settings": {"spark_prepare": None}})
    done = {"status": 0, "seconds": 26.4, "output": "class-data archive written in 25.9s: x.jsa"}
    line = spark_prepare_line({"settings": {"spark_prepare": done}})
    assert "took 26.4 s, exit status 0: class-data archive written in 25.9s" in line
