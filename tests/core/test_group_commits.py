"""Decoding __consumer_offsets records, and the table of replicated groups' commits."""

from __future__ import annotations

import struct

import pytest

from mirrorlib.core.group_commits import CommitTable, GroupCommit, decode_commit
from mirrorlib.core.records import OffsetAndMetadata, TopicPartition
from mirrorlib.errors import CodecError


def _s(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


def key(group: str, topic: str, partition: int, kind: int = 1) -> bytes:
    return struct.pack(">h", kind) + _s(group) + _s(topic) + struct.pack(">i", partition)


def value(offset: int, metadata: str = "", commit_ms: int = 1000, version: int = 3) -> bytes:
    out = struct.pack(">hq", version, offset)
    if version >= 3:
        out += struct.pack(">i", 7)  # leader epoch
    if version >= 4:
        raw = metadata.encode()
        out += bytes([len(raw) + 1]) + raw  # compact string (short: one varint byte)
    else:
        out += _s(metadata)
    out += struct.pack(">q", commit_ms)
    if version == 1:
        out += struct.pack(">q", -1)  # expire timestamp
    if version >= 4:
        out += b"\x00"  # no tagged fields
    return out


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_every_value_version_decodes(version: int) -> None:
    commit = decode_commit(key("g", "t", 3), value(42, "meta", 1234, version))
    assert commit == GroupCommit("g", TopicPartition("t", 3), OffsetAndMetadata(42, "meta"), 1234)


def test_key_type_zero_is_an_offset_commit_and_others_are_ignored() -> None:
    assert decode_commit(key("g", "t", 0, kind=0), value(1)) is not None
    for kind in (2, 3, 4, 10):  # group metadata, KIP-848 records
        assert decode_commit(struct.pack(">h", kind) + _s("g"), b"\x00\x00") is None


def test_tombstone_deletes_the_offset() -> None:
    assert decode_commit(key("g", "t", 0), None) == GroupCommit(
        "g", TopicPartition("t", 0), None, None
    )


@pytest.mark.parametrize(
    ("k", "v"),
    [
        (None, b""),
        (b"\x00", None),
        (struct.pack(">h", 1) + _s("g"), None),  # truncated key
        (key("g", "t", 0), b"\x00\x03\x00"),  # truncated value
        (key("g", "t", 0), value(1, version=9)[:2] + value(1)[2:]),  # unknown version
        (key("g", "t", 0), struct.pack(">hq", 4, 1) + b"\x00\x00\x00\x07" + b"\x80"),  # varint
    ],
)
def test_malformed_records_raise_codec_error(k: bytes | None, v: bytes | None) -> None:
    with pytest.raises(CodecError):
        decode_commit(k, v)


def test_table_tracks_changed_groups_and_ignores_foreign_ones() -> None:
    asked: list[str] = []

    def accept(group: str) -> bool:
        asked.append(group)
        return group.startswith("app-")

    table = CommitTable(accept)
    tp = TopicPartition("t", 0)
    assert table.add_record(key("app-1", "t", 0), value(10, commit_ms=5))
    assert not table.add_record(key("other", "t", 0), b"garbage: never decoded")
    assert not table.add_record(key("other", "t", 1), b"garbage")
    assert asked == ["app-1", "other"]  # asked once per group
    assert table.take_changed() == {"app-1"} and table.take_changed() == set()
    assert not table.add_record(key("app-1", "t", 0), value(10, commit_ms=9))  # same offset
    assert not table.has_changed()
    assert table.commit_ms("app-1", tp) == 9
    assert table.add_record(key("app-1", "t", 0), value(11))
    assert table.offsets("app-1") == {tp: OffsetAndMetadata(11)}
    assert table.add_record(key("app-1", "t", 0), None)  # tombstone
    assert table.offsets("app-1") == {} and table.groups() == []
    assert table.take_changed() == {"app-1"}
    table.mark_changed({"app-1"})
    assert table.has_changed()


def test_commit_times_follow_commits_and_tombstones() -> None:
    table = CommitTable(lambda _g: True)
    tp0, tp1 = TopicPartition("t", 0), TopicPartition("t", 1)
    assert table.commit_times("g") == {} and table.commit_ms("g", tp0) is None
    table.add_record(key("g", "t", 0), value(10, commit_ms=5))
    table.add_record(key("g", "t", 1), value(20, commit_ms=6))
    times = table.commit_times("g")
    assert times == {tp0: 5, tp1: 6}
    table.add_record(key("g", "t", 0), value(10, commit_ms=7))  # same offset, later commit
    assert times[tp0] == 7 == table.commit_ms("g", tp0)  # a live view
    table.add_record(key("g", "t", 1), None)
    assert table.commit_times("g") == {tp0: 7} and table.offsets("g") == {
        tp0: OffsetAndMetadata(10)
    }
    table.add_record(key("g", "t", 0), None)
    assert table.commit_times("g") == {} and table.commit_ms("g", tp0) is None
