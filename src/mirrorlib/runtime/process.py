"""Process-wide settings for the processes mirrorlib owns: ``mirrorlib run`` and a copier worker
(:mod:`mirrorlib.runtime.workers.child`). Never applied to an application that embeds a
:class:`~mirrorlib.runtime.replicator.Replicator`: its process is its own.

Python's cyclic garbage collector runs a young collection every 700 allocations of tracked
objects (its default thresholds: 700, 10, 10). confluent-kafka's ``Message`` objects are tracked,
and the copier allocates two per record (the consumed record, its delivery report) and keeps a
consumed batch and a round's reports alive, so they survive into the older generations and each
full collection walks them all: 0.5-1.7 s of collecting per 300,000 records of 1 KiB, against
0.06-0.12 s with a young threshold of 20,000, and the process's CPU per record at 1 KiB x 16
partitions went from 7.8 to 5.6-5.9 CPU-s per million records (docs/benchmarks.md, "Large
records: the fetch response size, and the producer"). The copier creates no reference cycles
per record, so collecting less often holds little more memory than the records it holds anyway.
"""

from __future__ import annotations

import gc

__all__ = ["GC_THRESHOLDS", "tune_gc"]

#: the collector's thresholds in a process mirrorlib owns (see the module docstring)
GC_THRESHOLDS = (20_000, 10, 10)


def tune_gc() -> None:
    """Collect garbage at :data:`GC_THRESHOLDS` in this process (mirrorlib's own processes only)."""
    gc.set_threshold(*GC_THRESHOLDS)
