"""Codec tests: golden bytes from MM2's wire format, round trips, and malformed input."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mirrorlib import (
    Checkpoint,
    CodecError,
    Heartbeat,
    OffsetAndMetadata,
    OffsetSync,
    TopicPartition,
)

# Worked examples from the MM2 reference (derived from the Java Schema layout); the Java interop
# test (tests/java/test_interop.py) checks the same layout against MM2's own classes.
CHECKPOINT_KEY = bytes.fromhex(
    "0008 6d792d67726f7570 000e 75732d776573742e6f7264657273 00000000".replace(" ", "")
)
CHECKPOINT_VALUE = bytes.fromhex("0000 0000000000000064 000000000000005f 0000".replace(" ", ""))
HEARTBEAT_KEY = bytes.fromhex("0007 75732d77657374 0007 75732d65617374".replace(" ", ""))
HEARTBEAT_VALUE = bytes.fromhex("0000 0000018bcfe56800".replace(" ", ""))
OFFSET_SYNC_KEY = bytes.fromhex("0006 6f7264657273 00000003".replace(" ", ""))
OFFSET_SYNC_VALUE = bytes.fromhex("0000000000000064 000000000000005f".replace(" ", ""))


def test_checkpoint_golden_bytes() -> None:
    cp = Checkpoint("my-group", "us-west.orders", 0, 100, 95)
    assert cp.encode_key() == CHECKPOINT_KEY
    assert cp.encode_value() == CHECKPOINT_VALUE
    assert Checkpoint.decode(CHECKPOINT_KEY, CHECKPOINT_VALUE) == cp


def test_heartbeat_golden_bytes() -> None:
    hb = Heartbeat("us-west", "us-east", 1_700_000_000_000)
    assert hb.encode_key() == HEARTBEAT_KEY
    assert hb.encode_value() == HEARTBEAT_VALUE
    assert Heartbeat.decode(HEARTBEAT_KEY, HEARTBEAT_VALUE) == hb


def test_offset_sync_golden_bytes() -> None:
    sync = OffsetSync("orders", 3, 100, 95)
    assert sync.encode_key() == OFFSET_SYNC_KEY
    assert sync.encode_value() == OFFSET_SYNC_VALUE
    assert OffsetSync.decode(OFFSET_SYNC_KEY, OFFSET_SYNC_VALUE) == sync


def test_checkpoint_with_metadata_and_unicode() -> None:
    cp = Checkpoint("gröup", "A.tôpic", 7, 2**40, 2**40 - 3, "meta ✓")
    value = cp.encode_value()
    assert value[:2] == b"\x00\x00"
    assert value[-len("meta ✓".encode()) - 2 :][:2] == struct.pack(">h", len("meta ✓".encode()))
    assert Checkpoint.decode(cp.encode_key(), value) == cp


def test_values_are_immutable_hashable_and_ordered() -> None:
    a = OffsetSync("t", 0, 1, 2)
    b = OffsetSync("t", 0, 1, 3)
    assert a < b
    assert len({a, OffsetSync("t", 0, 1, 2), b}) == 2
    with pytest.raises(AttributeError):
        a.upstream_offset = 5  # type: ignore[misc]
    assert a.topic_partition == TopicPartition("t", 0)


def test_checkpoint_none_metadata_becomes_empty_like_java() -> None:
    cp = Checkpoint("g", "t", 0, 1, 1, None)  # type: ignore[arg-type]
    assert cp.metadata == ""
    assert OffsetAndMetadata(5, None).metadata == ""  # type: ignore[arg-type]
    assert cp.offset_and_metadata == OffsetAndMetadata(1, "")


def test_str_matches_mm2_formatters() -> None:
    assert str(Checkpoint("g", "A.t", 1, 5, 4, "m")) == (
        "Checkpoint{consumerGroupId=g, topicPartition=A.t-1, upstreamOffset=5, "
        "downstreamOffset=4, metadata=m}"
    )
    assert str(Heartbeat("A", "B", 3)) == (
        "Heartbeat{sourceClusterAlias=A, targetClusterAlias=B, timestamp=3}"
    )


def test_decoding_ignores_trailing_bytes_like_java() -> None:
    cp = Checkpoint("g", "t", 0, 1, 1)
    assert Checkpoint.decode(cp.encode_key() + b"xx", cp.encode_value() + b"\x00") == cp


def test_decoding_accepts_other_versions_like_java() -> None:
    value = b"\x00\x07" + HEARTBEAT_VALUE[2:]
    assert Heartbeat.decode(HEARTBEAT_KEY, value).timestamp == 1_700_000_000_000


@pytest.mark.parametrize(
    ("cls", "key", "value", "match"),
    [
        (Checkpoint, None, CHECKPOINT_VALUE, "key is missing"),
        (Checkpoint, CHECKPOINT_KEY, None, "value is missing"),
        (Checkpoint, CHECKPOINT_KEY[:-1], CHECKPOINT_VALUE, "truncated.*partition"),
        (Checkpoint, CHECKPOINT_KEY, CHECKPOINT_VALUE[:5], "truncated.*upstreamOffset"),
        (Checkpoint, b"\xff\xff", CHECKPOINT_VALUE, "negative length"),
        (Checkpoint, b"\x00\x02\xff\xfe" + CHECKPOINT_KEY[10:], CHECKPOINT_VALUE, "UTF-8"),
        (Heartbeat, b"", HEARTBEAT_VALUE, "truncated"),
        (Heartbeat, HEARTBEAT_KEY, b"\x00\x00\x01", "truncated.*timestamp"),
        (OffsetSync, OFFSET_SYNC_KEY, OFFSET_SYNC_VALUE[:15], "truncated"),
        (OffsetSync, "text", OFFSET_SYNC_VALUE, "must be bytes"),
    ],
)
def test_malformed_bytes_raise_codec_error(
    cls: type[Checkpoint | Heartbeat | OffsetSync], key: object, value: object, match: str
) -> None:
    with pytest.raises(CodecError, match=match):
        cls.decode(key, value)  # type: ignore[arg-type]


def test_encoding_rejects_values_outside_the_wire_format() -> None:
    with pytest.raises(CodecError, match="32767"):
        Checkpoint("g" * 40000, "t", 0, 0, 0).encode_key()
    with pytest.raises(CodecError, match="int32"):
        OffsetSync("t", 2**31, 0, 0).encode_key()
    with pytest.raises(CodecError, match="int64"):
        OffsetSync("t", 0, 2**63, 0).encode_value()
    with pytest.raises(CodecError, match="must be a str"):
        Heartbeat(None, "B", 0).encode_key()  # type: ignore[arg-type]


# -- property-based -------------------------------------------------------------------------------

names = st.text(max_size=60)
int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)


@given(names, names, int32, int64, int64, names)
def test_checkpoint_round_trip(g: str, t: str, p: int, u: int, d: int, m: str) -> None:
    try:
        cp = Checkpoint(g, t, p, u, d, m)
        key, value = cp.encode_key(), cp.encode_value()
    except CodecError:
        return  # lone surrogates cannot be encoded as UTF-8; that is the only expected failure
    assert Checkpoint.decode(key, value) == cp


@given(names, names, int64)
def test_heartbeat_round_trip(s: str, t: str, ts: int) -> None:
    try:
        hb = Heartbeat(s, t, ts)
        key, value = hb.encode_key(), hb.encode_value()
    except CodecError:
        return
    assert Heartbeat.decode(key, value) == hb


@given(names, int32, int64, int64)
def test_offset_sync_round_trip(t: str, p: int, u: int, d: int) -> None:
    try:
        sync = OffsetSync(t, p, u, d)
        key, value = sync.encode_key(), sync.encode_value()
    except CodecError:
        return
    assert OffsetSync.decode(key, value) == sync


@given(st.binary(max_size=80), st.binary(max_size=80))
def test_arbitrary_bytes_decode_or_raise_codec_error(key: bytes, value: bytes) -> None:
    for cls in (Checkpoint, Heartbeat, OffsetSync):
        try:
            cls.decode(key, value)
        except CodecError:
            pass


def test_checkpoint_encoding_in_parts_matches_the_whole() -> None:
    for metadata in ("", "meta"):
        cp = Checkpoint("group", "A.topic", 3, 100, 90, metadata)
        key = Checkpoint.key_prefix(cp.group) + Checkpoint.key_suffix(cp.topic, cp.partition)
        assert key == cp.encode_key()
        assert Checkpoint.value_bytes(100, 90, metadata) == cp.encode_value()
        assert Checkpoint.decode(key, cp.encode_value()) == cp
