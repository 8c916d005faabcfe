"""Old import path, kept: the implementation lives in :mod:`mirrorlib.core.translate`."""

from mirrorlib.core.translate import *  # noqa: F403
