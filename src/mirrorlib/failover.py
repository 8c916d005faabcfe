"""Old import path, kept: the implementation lives in :mod:`mirrorlib.runtime.failover`."""

from mirrorlib.runtime.failover import *  # noqa: F403
