"""Old import path, kept: the implementation lives in :mod:`mirrorlib.core.config`."""

from mirrorlib.core.config import *  # noqa: F403
