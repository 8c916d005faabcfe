"""Old import path, kept: the implementation lives in :mod:`mirrorlib.core.audit`."""

from mirrorlib.core.audit import *  # noqa: F403
