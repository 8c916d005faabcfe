"""Old import path, kept: the implementation lives in :mod:`mirrorlib.core.records`."""

from mirrorlib.core.records import *  # noqa: F403
