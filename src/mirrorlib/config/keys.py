"""Old import path, kept: the implementation lives in :mod:`mirrorlib.core.config.keys`."""

from mirrorlib.core.config.keys import *  # noqa: F403
