"""Old import path, kept: the implementation lives in :mod:`mirrorlib.runtime.replicator`."""

from mirrorlib.runtime.replicator import *  # noqa: F403
