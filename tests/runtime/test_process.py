"""Process-wide settings of mirrorlib's own processes."""

from __future__ import annotations

import gc

from mirrorlib.runtime.process import GC_THRESHOLDS, tune_gc


def test_tune_gc_collects_less_often_than_pythons_default() -> None:
    before = gc.get_threshold()
    try:
        gc.set_threshold(700, 10, 10)
        tune_gc()
        assert gc.get_threshold() == GC_THRESHOLDS
        assert GC_THRESHOLDS[0] > 700
    finally:
        gc.set_threshold(*before)
