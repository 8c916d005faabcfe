"""Old import path, kept: the implementation lives in :mod:`mirrorlib.core.syncs`."""

from mirrorlib.core.syncs import *  # noqa: F403
