"""Old import path, kept: the implementation lives in :mod:`mirrorlib.core.policy`."""

from mirrorlib.core.policy import *  # noqa: F403
