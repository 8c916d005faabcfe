"""The wait instrumentation's pure parts."""

from __future__ import annotations

from bench.wait import CELLS, parse_cells


def test_cells_parse_from_size_partitions_and_count() -> None:
    assert parse_cells("10240x16:40000, 10240x1:40000") == ((10240, 16, 40000), (10240, 1, 40000))
    assert parse_cells("") == ()
    assert CELLS and all(len(c) == 3 for c in CELLS)
