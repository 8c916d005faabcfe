"""The metric catalog (mirrorlib.core.metrics), as docs/replicator.md documents it."""

from __future__ import annotations

from pathlib import Path

from mirrorlib.core.metrics import METRICS


def test_every_metric_is_documented_with_its_mm2_name() -> None:
    docs = (Path(__file__).parents[2] / "docs" / "replicator.md").read_text(encoding="utf-8")
    rows = [line for line in docs.splitlines() if line.startswith("| `mirrorlib_")]
    for spec in METRICS:
        row = next((r for r in rows if r.startswith(f"| `mirrorlib_{spec.name}`")), None)
        assert row is not None, spec.name
        assert f"| {spec.kind} |" in row, row
        assert (f"`{spec.mm2}`" in row) if spec.mm2 else ("—" in row), row
