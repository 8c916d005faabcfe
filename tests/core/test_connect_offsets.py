"""MM2's Connect offsets-topic records (source positions) and Kafka's murmur2 partitioner."""

from __future__ import annotations

import pytest

from mirrorlib import CodecError
from mirrorlib.core.connect_offsets import SourcePosition, murmur2, murmur2_partition


def test_source_position_bytes_match_connect() -> None:
    pos = SourcePosition("us-west", "orders", 0, 99)
    assert (
        pos.encode_key()
        == b'["MirrorSourceConnector",{"cluster":"us-west","partition":0,"topic":"orders"}]'
    )
    assert pos.encode_value() == b'{"offset":99}'
    assert SourcePosition.decode(pos.encode_key(), pos.encode_value()) == pos
    assert pos.next_offset == 100


def test_tombstones_and_negative_offsets_mean_no_position() -> None:
    key = SourcePosition("A", "t", 1, None).encode_key()
    assert SourcePosition.decode(key, None) == SourcePosition("A", "t", 1, None)
    assert SourcePosition.decode(key, b'{"offset":-1}').next_offset is None  # type: ignore[union-attr]


def test_other_connectors_are_ignored_and_any_key_order_is_read() -> None:
    hb = b'["MirrorHeartbeatConnector",{"sourceClusterAlias":"A","targetClusterAlias":"B"}]'
    assert SourcePosition.decode(hb, b'{"offset":0}') is None
    reordered = b'["MirrorSourceConnector",{"topic":"t","partition":2,"cluster":"A"}]'
    assert SourcePosition.decode(reordered, b'{"offset":5}') == SourcePosition("A", "t", 2, 5)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        (None, b"{}"),
        (b"not json", b"{}"),
        (b'{"a":1}', b"{}"),
        (b'["MirrorSourceConnector",{"cluster":"A","partition":"x","topic":"t"}]', b"{}"),
        (b'["MirrorSourceConnector",{"cluster":"A","partition":0,"topic":"t"}]', b"oops"),
        (b'["MirrorSourceConnector",{"cluster":"A","partition":0,"topic":"t"}]', b'{"offset":"1"}'),
    ],
)
def test_malformed_records_raise_codec_error(key: bytes | None, value: bytes) -> None:
    with pytest.raises(CodecError):
        SourcePosition.decode(key, value)


def test_murmur2_matches_kafka_utils_test_vectors() -> None:
    # org.apache.kafka.common.utils.UtilsTest#testMurmur2
    assert murmur2(b"21") == -973932308
    assert murmur2(b"foobar") == -790332482
    assert murmur2(b"a-little-bit-long-string") == -985981536
    assert murmur2(b"a-little-bit-longer-string") == -1486304829
    assert murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8") == -58897971


def test_partition_is_positive_and_in_range() -> None:
    for i in range(200):
        assert 0 <= murmur2_partition(str(i).encode(), 25) < 25
    with pytest.raises(ValueError):
        murmur2_partition(b"x", 0)
