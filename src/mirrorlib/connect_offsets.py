"""Old import path, kept: the implementation lives in :mod:`mirrorlib.core.connect_offsets`."""

from mirrorlib.core.connect_offsets import *  # noqa: F403
