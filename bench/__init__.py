"""mirrorlib benchmarks: mirrorlib side by side with the real MirrorMaker 2 (see docs/benchmarks.md).

Run ``bash scripts/bench`` (or ``.venv/bin/python -m bench.run``). The pure parts (statistics,
ratio table, JSON shape) live in :mod:`bench.stats` and are unit-tested without a broker.
"""
