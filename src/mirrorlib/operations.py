"""Old import path, kept: the implementation lives in :mod:`mirrorlib.runtime.operations`."""

from mirrorlib.runtime.operations import *  # noqa: F403
