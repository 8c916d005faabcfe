"""The compact OffsetTranslator answers exactly like the object-per-sync one it replaced."""

from __future__ import annotations

import random

import attrs
import pytest

from mirrorlib.core.records import OffsetSync
from mirrorlib.core.syncs import SyncLineage
from mirrorlib.core.translate import OffsetTranslator
from tests.core import reference_translate as reference

TOPIC = "t"


def _stream(rng: random.Random, count: int) -> list[tuple[OffsetSync, SyncLineage | None]]:
    """Syncs of two partitions with every irregularity: runs, upstream gaps, skipped sequences,
    writer changes, MM2 syncs without lineage, upstream and downstream rewinds, repeats."""
    out: list[tuple[OffsetSync, SyncLineage | None]] = []
    state = {p: [0, 0, 0, "w0"] for p in range(2)}
    for _ in range(count):
        p = rng.randrange(2)
        up, down, seq, writer = state[p]
        roll = rng.random()
        step = rng.choice([1, 2, 5, 101, 1000, 2**20])
        if roll < 0.55:  # contiguous: equal deltas, next sequence
            up, down, seq = up + step, down + step, seq + 1
        elif roll < 0.7:  # upstream gap: the writer skips a sequence
            up, down, seq = up + step + rng.randrange(1, 9), down + step, seq + 2
        elif roll < 0.75:
            writer, seq = f"w{rng.randrange(4)}", rng.randrange(3)
            up, down = up + step, down + step
        elif roll < 0.85:  # the same values again
            seq += 1
        elif roll < 0.9:  # upstream rewind
            up, seq = max(up - rng.randrange(1, 5000), 0), seq + 1
        elif roll < 0.93:  # downstream rewind
            down, seq = max(down - rng.randrange(1, 5000), 0), seq + 1
            up += step
        else:  # MM2's sync, no lineage
            up, down = up + step, down + rng.randrange(0, step + 1)
        state[p] = [up, down, seq, writer]
        lineage = None if roll >= 0.93 else SyncLineage(writer, seq)
        out.append((OffsetSync(TOPIC, p, up, down), lineage))
    return out


def _probes(old: reference.OffsetTranslator, p: int, rng: random.Random) -> list[int]:
    history = old.history(TOPIC, p)
    points = {s.upstream_offset + d for s in history for d in (-1, 0, 1)}
    for run in old.runs(TOPIC, p):
        points |= {run.upstream_start, run.upstream_end, run.upstream_end + 1}
    if history:
        points |= {rng.randrange(0, history[0].upstream_offset + 2) for _ in range(20)}
    return sorted(points)


@pytest.mark.parametrize("seed", range(40))
@pytest.mark.parametrize("max_runs", [1, 3, 64])
def test_same_answers_as_the_reference_translator(seed: int, max_runs: int) -> None:
    rng = random.Random(seed)
    old = reference.OffsetTranslator(max_runs=max_runs)
    new = OffsetTranslator(max_runs=max_runs)
    for i, (sync, lineage) in enumerate(_stream(rng, 600)):
        old.add(sync, lineage)
        new.add(sync, lineage)
        if i % 37 and i != 599:
            continue
        for p in range(2):
            assert new.history_slots(TOPIC, p) == old.history_slots(TOPIC, p)
            assert [attrs.astuple(r) for r in new.runs(TOPIC, p)] == [
                attrs.astuple(r) for r in old.runs(TOPIC, p)
            ]
            for u in _probes(old, p, rng):
                assert new.translate(TOPIC, p, u) == old.translate(TOPIC, p, u), (p, u)
                assert new.translate_mm2(TOPIC, p, u) == old.translate_mm2(TOPIC, p, u)


def test_pool_compaction_keeps_answers() -> None:
    """Far more syncs than the 255-entry pool holds: the history stays MM2's."""
    old, new = reference.OffsetTranslator(), OffsetTranslator()
    for i in range(3000):
        sync = OffsetSync(TOPIC, 0, i * 7, i * 5)
        old.add(sync, SyncLineage("w", i))
        new.add(sync, SyncLineage("w", i))
    assert new.history_slots(TOPIC, 0) == old.history_slots(TOPIC, 0)
    for u in range(0, 3000 * 7, 13):
        assert new.translate(TOPIC, 0, u) == old.translate(TOPIC, 0, u)


def test_stamp_changes_on_clear_and_tracks_the_newest_sync() -> None:
    t = OffsetTranslator()
    assert t.stamp(TOPIC, 0) is None
    t.add(OffsetSync(TOPIC, 0, 100, 10))
    generation, newest = t.stamp(TOPIC, 0) or (0, 0)
    assert newest == 100
    t.add(OffsetSync(TOPIC, 0, 200, 20))
    assert t.stamp(TOPIC, 0) == (generation, 200)
    t.add(OffsetSync(TOPIC, 0, 50, 30))  # upstream rewind: history cleared
    assert t.stamp(TOPIC, 0) not in (None, (generation, 200))
    assert (t.stamp(TOPIC, 0) or (0, 0))[1] == 50
