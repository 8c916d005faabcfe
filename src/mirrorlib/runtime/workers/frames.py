"""The worker protocol's frames on a stream: the parent's pipes to a copier worker process and
the worker's stdin and stdout (the messages and their frames: :mod:`mirrorlib.core.workerproto`).
"""

from __future__ import annotations

from typing import IO, Any

from mirrorlib.core.workerproto import FRAME_HEADER_SIZE, decode_frame, encode_frame, frame_size

__all__ = ["read_frame", "write_frame"]


def write_frame(stream: IO[bytes], message: object) -> None:
    """Write the frame of ``message`` and flush."""
    stream.write(encode_frame(message))
    stream.flush()


def read_frame(stream: IO[bytes]) -> Any:
    """Read one frame's message; ``None`` at the end of the stream (the other side is gone),
    also in the middle of a frame. Raises :class:`~mirrorlib.errors.WorkerProtocolError` for a
    frame longer than :data:`~mirrorlib.core.workerproto.MAX_FRAME`."""
    header = _read_exactly(stream, FRAME_HEADER_SIZE)
    if header is None:
        return None
    body = _read_exactly(stream, frame_size(header))
    return None if body is None else decode_frame(body)


def _read_exactly(stream: IO[bytes], size: int) -> bytes | None:
    chunks: list[bytes] = []
    left = size
    while left:
        chunk = stream.read(left)
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)
