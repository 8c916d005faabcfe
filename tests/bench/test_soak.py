"""The soak with random faults: its own checks, and a short run on real three-node clusters."""

from __future__ import annotations

from pathlib import Path

import pytest
from bench.soak import SoakOptions, run_soak, skips

ROWS = [(0, b"a"), (1, b"b"), (3, b"c"), (4, b"d"), (6, b"e")]  # gaps: transaction markers


def test_skips_counts_records_not_offsets() -> None:
    # resuming at the first unprocessed record (c at offset 3): nothing skipped or re-read
    assert skips(ROWS, b"c", 3) == (0, 0, 3)
    # resuming on the marker before it is as good
    assert skips(ROWS, b"c", 2) == (0, 0, 3)
    # resuming earlier re-reads b
    assert skips(ROWS, b"c", 1) == (0, 1, 3)
    # resuming past c and d skips both (the marker at 5 is not a record)
    assert skips(ROWS, b"c", 6) == (2, 0, 3)
    # a first unprocessed record that never reached the target is a skip
    assert skips(ROWS, b"zz", 0) == (1, 0, -1)
    # everything processed: what lies past the translation is read again
    assert skips(ROWS, None, 4) == (0, 2, None)


@pytest.mark.integration
def test_a_short_soak_loses_nothing_and_copies_nothing_twice(tmp_path: Path) -> None:
    """A minute and a half of random faults (every kind, three-node clusters, exactly-once): every
    acknowledged record on the target once, the replicator up, the group's failover exact."""
    options = SoakOptions(
        minutes=1.5, mode="eos", nodes=3, seed=34, every=(8.0, 15.0), work_dir=tmp_path,
        catch_up_timeout=240, min_faults=4,
    )  # fmt: skip
    result = run_soak(options)
    assert len(result["faults"]) >= 4, result["faults"]
    assert result["acked"] > 10_000
    assert result["ok"], result["problems"]
