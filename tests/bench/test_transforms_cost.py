"""The filter-cost benchmark's ratios (bench.transforms_cost)."""

from __future__ import annotations

from typing import Any

from bench.stats import MIRRORLIB, MM2_TUNED
from bench.transforms_cost import FILTER, MATRIX, ratios


def _row(cid: str, size: int, parts: int, rate: float, cpu: float) -> dict[str, Any]:
    return {
        "contender": cid,
        "record_size": size,
        "partitions": parts,
        "records_per_s": rate,
        "cpu_s_per_million": cpu,
    }


def test_ratios_compare_each_engine_with_itself_and_mirrorlib_with_mm2() -> None:
    size, parts, _ = MATRIX[0]
    rows = [
        _row(MIRRORLIB, size, parts, 400_000, 2.0),
        _row(MIRRORLIB + FILTER, size, parts, 300_000, 3.0),
        _row(MM2_TUNED, size, parts, 200_000, 6.0),
        _row(MM2_TUNED + FILTER, size, parts, 150_000, 9.0),
    ]
    cell = ratios(rows)[0]
    assert cell["mirrorlib_filter_throughput_ratio"] == 0.75
    assert cell["mirrorlib_filter_cpu_ratio"] == 1.5
    assert cell["mm2_filter_throughput_ratio"] == 0.75
    assert cell["filtered_mirrorlib_vs_mm2_throughput"] == 2.0
    assert cell["filtered_mirrorlib_vs_mm2_cpu"] == 0.333
    # a cell not measured has no ratio (never a 0 or a made-up one)
    assert set(ratios(rows)[1]) == {"record_size", "partitions"}
