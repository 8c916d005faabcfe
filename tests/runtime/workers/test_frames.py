"""The worker protocol's frames on a stream."""

from __future__ import annotations

import io

import pytest

from mirrorlib.core.catalog import RemoteTopic
from mirrorlib.core.workerproto import MAX_FRAME, Applied, Assign, Topics, WorkerProtocolError
from mirrorlib.runtime.workers.frames import read_frame, write_frame


def test_frames_round_trip_and_end_with_none() -> None:
    stream = io.BytesIO()
    messages = [
        Assign(3, frozenset({("t", 0), ("t", 1)})),
        Topics({"t": RemoteTopic("A.t", 2, 1000)}),
        Applied(3),
    ]
    for m in messages:
        write_frame(stream, m)
    stream.seek(0)
    assert [read_frame(stream) for _ in messages] == messages
    assert read_frame(stream) is None


def test_a_truncated_frame_is_the_end_of_the_stream() -> None:
    stream = io.BytesIO()
    write_frame(stream, Applied(1))
    data = stream.getvalue()
    assert read_frame(io.BytesIO(data[:-1])) is None


def test_a_corrupt_length_is_refused() -> None:
    with pytest.raises(WorkerProtocolError):
        read_frame(io.BytesIO((MAX_FRAME + 1).to_bytes(4, "big") + b"x"))
