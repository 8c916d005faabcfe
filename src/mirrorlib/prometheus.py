"""Old import path, kept: the implementation lives in :mod:`mirrorlib.runtime.prometheus`."""

from mirrorlib.runtime.prometheus import *  # noqa: F403
