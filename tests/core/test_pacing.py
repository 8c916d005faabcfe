"""Batch sizing of paced partitions (remote topics with a small max.message.bytes)."""

from __future__ import annotations

from mirrorlib.core.pacing import (
    RECORD_OVERHEAD,
    batch_budget,
    batch_length,
    halved_budget,
    record_size,
    size_check_above,
)


class Record:
    def __init__(
        self,
        value: bytes | None,
        key: bytes | None = None,
        headers: list[tuple[str, bytes | None]] | None = None,
    ) -> None:
        self._value, self._key, self._headers = value, key, headers

    def key(self) -> bytes | None:
        return self._key

    def value(self) -> bytes | None:
        return self._value

    def headers(self) -> list[tuple[str, bytes | None]] | None:
        return self._headers


def test_a_records_size_counts_key_value_headers_and_framing() -> None:
    assert record_size(Record(None)) == RECORD_OVERHEAD
    rec = Record(b"v" * 10, b"kk", [("h", b"123"), ("n", None)])
    assert record_size(rec) == RECORD_OVERHEAD + 10 + 2 + (1 + 3) + 1


def test_a_record_whose_value_alone_can_exceed_the_limit_is_measured() -> None:
    limit = 1_048_588
    above = size_check_above(limit)
    # any record larger than the limit with a value this short has key + headers above half of it
    too_large = Record(b"v" * above, b"k" * (limit - above))
    assert record_size(too_large) > limit and len(too_large.key() or b"") > limit // 2
    assert record_size(Record(b"v" * (above + 1))) <= limit  # measured, and passes
    assert size_check_above(None) > 2**60  # no known limit: nothing is measured


def test_only_partitions_whose_limit_is_below_the_batch_size_are_paced() -> None:
    assert batch_budget(20_000, 1_000_000) == 20_000
    assert batch_budget(1_048_588, 1_000_000) is None
    assert batch_budget(None, 1_000_000) is None


def test_a_batch_holds_what_fits_in_the_budget_and_at_least_one_record() -> None:
    held = [Record(b"x" * 4_500) for _ in range(40)]  # 4,596 bytes each in a batch
    assert batch_length(held, 20_000) == 4
    assert batch_length(held, None) == 40
    assert batch_length(held[:2], 20_000) == 2
    assert batch_length([Record(b"x" * 30_000), *held], 20_000) == 1  # too large: alone
    assert batch_length([], 20_000) == 0


def test_a_refused_batch_halves_the_budget_unless_the_record_was_alone() -> None:
    small = Record(b"x" * 3_000)
    assert halved_budget(None, 1_000_000, small) == 500_000  # half the producer's batch.size
    assert halved_budget(20_000, 1_000_000, small) == 10_000
    assert halved_budget(2_000, 1_000_000, small) is None  # it filled the budget alone
