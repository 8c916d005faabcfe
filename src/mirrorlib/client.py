"""Old import path, kept: the implementation lives in :mod:`mirrorlib.kafka.client`."""

from mirrorlib.kafka.client import *  # noqa: F403
