"""Record transforms and filters (mirrorlib.core.transforms): MM2's SMTs under their Java names
with their keys, predicates and negate, Python transforms by path, the configuration errors, and
offset syncs that stay exact across dropped records."""

from __future__ import annotations

import json
import pickle
from collections.abc import Mapping
from typing import Self

import attrs
import pytest

from mirrorlib import ConfigError, MirrorConfig, OffsetTranslator, Predicate, Transform
from mirrorlib import TransformRecord as Record
from mirrorlib.core.records import TopicPartition
from mirrorlib.core.settings import FlowSettings
from mirrorlib.core.syncs import OffsetSyncEmitter
from mirrorlib.core.transforms import TransformChain, load_transforms

SMT = "org.apache.kafka.connect.transforms."
PRED = SMT + "predicates."


def record(
    value: bytes | None = b"v",
    *,
    key: bytes | None = b"k",
    headers: tuple[tuple[str, bytes | None], ...] = (),
    remote_topic: str = "A.orders",
    offset: int = 7,
) -> Record:
    return Record(key, value, headers, 1000, "orders", 0, offset, remote_topic)


def chain(props: Mapping[str, str]) -> TransformChain:
    built = load_transforms(props)
    assert built is not None
    return built


# -- Python transforms used by path ---------------------------------------------------------------


@attrs.frozen
class Upper(Transform):
    """Upper-cases values; ``suffix`` (its own key) is appended."""

    suffix: bytes

    @classmethod
    def from_config(cls, config: Mapping[str, str]) -> Self:
        return cls(config.get("suffix", "").encode())

    def apply(self, record: Record) -> Record | None:
        if record.value is None:
            return record
        return attrs.evolve(record, value=record.value.upper() + self.suffix, timestamp=5)


class Wrong(Transform):
    @classmethod
    def from_config(cls, config: Mapping[str, str]) -> Self:
        raise RuntimeError("no")

    def apply(self, record: Record) -> Record | None:
        return record


class Retopic(Transform):
    def apply(self, record: Record) -> Record | None:
        return attrs.evolve(record, remote_topic="elsewhere")


class Boom(Transform):
    def apply(self, record: Record) -> Record | None:
        raise RuntimeError("boom")


class KeyIsA(Predicate):
    def test(self, record: Record) -> bool:
        return record.key == b"a"


class NotATransform:
    def apply(self, record: Record) -> Record | None:
        return record


class Abstract(Transform):
    pass


HERE = __name__


# -- no transforms ----------------------------------------------------------------------------------


def test_no_transforms_is_none() -> None:
    assert load_transforms({}) is None
    assert load_transforms({"transforms": ""}) is None
    cfg = MirrorConfig.from_properties(
        {"clusters": "A, B", "A.bootstrap.servers": "x:1", "B.bootstrap.servers": "y:1"}
    )
    flow = cfg.flow("A", "B")
    assert flow.record_transforms is None
    assert FlowSettings.from_config(cfg, flow).record_transforms is None


# -- Filter and the predicates --------------------------------------------------------------------


def test_filter_without_a_predicate_drops_everything() -> None:
    c = chain({"transforms": "f", "transforms.f.type": SMT + "Filter"})
    assert c.apply(record()) is None
    assert c.apply(record(None)) is None


@pytest.mark.parametrize("negate", [False, True])
def test_filter_on_tombstones(negate: bool) -> None:
    c = chain(
        {
            "transforms": "f",
            "transforms.f.type": SMT + "Filter",
            "transforms.f.predicate": "tomb",
            "transforms.f.negate": str(negate).lower(),
            "predicates": "tomb",
            "predicates.tomb.type": PRED + "RecordIsTombstone",
        }
    )
    tombstone, live = record(None), record(b"x")
    assert (c.apply(tombstone) is None) is not negate
    assert (c.apply(live) is None) is negate


def test_filter_on_a_header_key() -> None:
    c = chain(
        {
            "transforms": "f",
            "transforms.f.type": "Filter",  # Connect's alias: the simple name
            "transforms.f.predicate": "h",
            "predicates": "h",
            "predicates.h.type": "HasHeaderKey",
            "predicates.h.name": "internal",
        }
    )
    assert c.apply(record(headers=(("internal", None),))) is None
    assert c.apply(record(headers=(("x", b"1"), ("internal", b"")))) is None
    kept = record(headers=(("internally", b"1"),))
    assert c.apply(kept) is kept


def test_topic_name_matches_the_whole_remote_topic_name() -> None:
    c = chain(
        {
            "transforms": "f",
            "transforms.f.type": SMT + "Filter",
            "transforms.f.predicate": "t",
            "predicates": "t",
            "predicates.t.type": PRED + "TopicNameMatches",
            "predicates.t.pattern": r"\QA.audit\E.*",  # Java's quoting
        }
    )
    assert c.apply(record(remote_topic="A.audit.log")) is None
    assert c.apply(record(remote_topic="A.orders")) is not None
    assert c.apply(record(remote_topic="xA.audit")) is not None  # a full match, as Java's


def test_a_predicate_applies_to_any_transform_and_negate_inverts_it() -> None:
    props = {
        "transforms": "tag",
        "transforms.tag.type": SMT + "InsertHeader",
        "transforms.tag.header": "seen",
        "transforms.tag.value.literal": "yes",
        "transforms.tag.predicate": "isA",
        "predicates": "isA",
        "predicates.isA.type": f"{HERE}:KeyIsA",
    }
    c = chain(props)
    assert c.apply(record(key=b"a")) == record(key=b"a", headers=(("seen", b"yes"),))
    assert c.apply(record(key=b"b")) == record(key=b"b")
    c = chain({**props, "transforms.tag.negate": "TRUE"})
    assert c.apply(record(key=b"a")) == record(key=b"a")
    assert c.apply(record(key=b"b")) == record(key=b"b", headers=(("seen", b"yes"),))


# -- header SMTs -------------------------------------------------------------------------------------


def test_insert_header_appends_even_when_the_name_exists() -> None:
    c = chain(
        {
            "transforms": "i,n",
            "transforms.i.type": SMT + "InsertHeader",
            "transforms.i.header": "origin",
            "transforms.i.value.literal": "site-a",
            "transforms.n.type": SMT + "InsertHeader",
            "transforms.n.header": "nothing",
            "transforms.n.value.literal": "null",
        }
    )
    out = c.apply(record(headers=(("origin", b"old"),)))
    assert out is not None
    assert out.headers == (("origin", b"old"), ("origin", b"site-a"), ("nothing", None))
    assert out.header("origin") == b"site-a"
    assert (out.key, out.value, out.timestamp) == (b"k", b"v", 1000)


def test_drop_headers() -> None:
    c = chain(
        {
            "transforms": "d",
            "transforms.d.type": SMT + "DropHeaders",
            "transforms.d.headers": "a, b",
        }
    )
    out = c.apply(record(headers=(("a", b"1"), ("c", b"2"), ("b", None), ("a", b"3"))))
    assert out is not None and out.headers == (("c", b"2"),)
    untouched = record(headers=(("c", b"2"),))
    assert c.apply(untouched) is untouched


def test_header_from_value_copy_and_move() -> None:
    value = json.dumps({"id": 24, "ts": 1626102708861, "name": "John", "who": None}).encode()
    base = {
        "transforms": "h",
        "transforms.h.type": SMT + "HeaderFrom$Value",
        "transforms.h.fields": "id,name,who,absent",
        "transforms.h.headers": "record_id,record_name,who,absent",
    }
    copied = chain({**base, "transforms.h.operation": "copy"}).apply(record(value))
    assert copied is not None and copied.value == value
    assert copied.headers == (
        ("record_id", b"24"),
        ("record_name", b"John"),
        ("who", None),
        ("absent", None),
    )
    moved = chain({**base, "transforms.h.operation": "move"}).apply(record(value))
    assert moved is not None and moved.headers == copied.headers
    assert moved.value is not None and json.loads(moved.value) == {"ts": 1626102708861}


def test_header_from_key() -> None:
    c = chain(
        {
            "transforms": "h",
            "transforms.h.type": SMT + "HeaderFrom$Key",
            "transforms.h.fields": "tenant",
            "transforms.h.headers": "tenant",
            "transforms.h.operation": "move",
        }
    )
    out = c.apply(record(key=b'{"tenant":"t1","id":3}'))
    assert out is not None
    assert out.headers == (("tenant", b"t1"),) and out.key == b'{"id":3}' and out.value == b"v"


@pytest.mark.parametrize("value", [b"not json", b"[1, 2]", None, b"\xff"])
def test_header_from_a_value_that_is_not_a_json_object_fails(value: bytes | None) -> None:
    c = chain(
        {
            "transforms": "h",
            "transforms.h.type": SMT + "HeaderFrom$Value",
            "transforms.h.fields": "a",
            "transforms.h.headers": "a",
            "transforms.h.operation": "copy",
        }
    )
    with pytest.raises(ValueError, match=r"transform h failed on orders-0@7: .*HeaderFrom"):
        c.apply(record(value))


# -- Python transforms -------------------------------------------------------------------------------


@pytest.mark.parametrize("sep", [":", "."])
def test_a_python_transform_by_path_with_its_own_keys(sep: str) -> None:
    c = chain(
        {
            "transforms": "up,d",
            "transforms.up.type": f"{HERE}{sep}Upper",
            "transforms.up.suffix": "!",
            "transforms.d.type": SMT + "DropHeaders",
            "transforms.d.headers": "x",
        }
    )
    out = c.apply(record(b"abc", headers=(("x", b""),)))
    assert out == Record(b"k", b"ABC!", (), 5, "orders", 0, 7, "A.orders")
    assert [s.name for s in c.stages] == ["up", "d"]


def test_a_transform_may_not_change_where_a_record_comes_from_or_goes() -> None:
    c = chain({"transforms": "r", "transforms.r.type": f"{HERE}:Retopic"})
    with pytest.raises(ValueError, match="may change key, value, headers and timestamp only"):
        c.apply(record())


def test_a_raising_transform_names_itself_and_the_record() -> None:
    c = chain({"transforms": "b", "transforms.b.type": f"{HERE}:Boom"})
    with pytest.raises(ValueError, match=r"transform b failed on orders-0@7: RuntimeError: boom"):
        c.apply(record())


def test_the_chain_pickles_as_its_configuration() -> None:
    c = chain(
        {
            "transforms": "up,f",
            "transforms.up.type": f"{HERE}:Upper",
            "transforms.f.type": SMT + "Filter",
            "transforms.f.predicate": "t",
            "predicates": "t",
            "predicates.t.type": PRED + "RecordIsTombstone",
            "unrelated": "x",
        }
    )
    again = pickle.loads(pickle.dumps(c))
    assert again.config == c.config and "unrelated" not in again.config
    assert again == c and hash(again) == hash(c) and again is not c
    assert again.apply(record(b"a")) == c.apply(record(b"a"))
    assert again.apply(record(None)) is None


# -- configuration ------------------------------------------------------------------------------------


BASE = {
    "clusters": "A, B",
    "A.bootstrap.servers": "127.0.0.1:1",
    "B.bootstrap.servers": "127.0.0.1:2",
    "A->B.enabled": "true",
    "B->A.enabled": "true",
}


def test_flow_prefixed_keys_win_over_top_level_ones_per_key() -> None:
    cfg = MirrorConfig.from_properties(
        {
            **BASE,
            "transforms": "tag",
            "transforms.tag.type": SMT + "InsertHeader",
            "transforms.tag.header": "origin",
            "transforms.tag.value.literal": "top",
            "A->B.transforms.tag.value.literal": "flow",
            "B->A.transforms": "",
        }
    )
    assert not [w for w in cfg.warnings if "transforms" in w.key]
    ab = cfg.flow("A", "B").record_transforms
    assert ab is not None
    out = ab.apply(record())
    assert out is not None and out.headers == (("origin", b"flow"),)
    assert cfg.flow("B", "A").record_transforms is None
    settings = FlowSettings.from_config(cfg, cfg.flow("A", "B"))
    assert settings.record_transforms is ab
    assert pickle.loads(pickle.dumps(settings)).record_transforms.apply(record()) == out


@pytest.mark.parametrize(
    ("props", "key", "says"),
    [
        ({"A->B.transforms": "x"}, "A->B.transforms.x.type", "is required"),
        (
            {"transforms": "r", "transforms.r.type": SMT + "RegexRouter"},
            "transforms.r.type",
            "ReplicationPolicy",
        ),
        (
            {"transforms": "r", "transforms.r.type": SMT + "ReplaceField$Value"},
            "transforms.r.type",
            "Python transform",
        ),
        (
            {"transforms": "r", "transforms.r.type": "io.confluent.connect.transforms.Drop"},
            "transforms.r.type",
            "Python transform",
        ),
        (
            {"transforms": "r", "transforms.r.type": "no_such_module_xyz:T"},
            "transforms.r.type",
            "cannot import",
        ),
        (
            {"transforms": "r", "transforms.r.type": f"{HERE}:NotATransform"},
            "transforms.r.type",
            "not a subclass of mirrorlib.Transform",
        ),
        (
            {"transforms": "r", "transforms.r.type": f"{HERE}:KeyIsA"},
            "transforms.r.type",
            "not a subclass of mirrorlib.Transform",
        ),
        (
            {"transforms": "r", "transforms.r.type": f"{HERE}:Abstract"},
            "transforms.r.type",
            "abstract methods: apply",
        ),
        (
            {"transforms": "i", "transforms.i.type": SMT + "InsertHeader"},
            "transforms.i.header",
            "required",
        ),
        (
            {
                "transforms": "i",
                "transforms.i.type": SMT + "InsertHeader",
                "transforms.i.header": "h",
            },
            "transforms.i.value.literal",
            "required",
        ),
        (
            {"transforms": "d", "transforms.d.type": SMT + "DropHeaders"},
            "transforms.d.headers",
            "required",
        ),
        (
            {
                "transforms": "h",
                "transforms.h.type": SMT + "HeaderFrom$Value",
                "transforms.h.fields": "a,b",
                "transforms.h.headers": "a",
                "transforms.h.operation": "copy",
            },
            "transforms.h.headers",
            "as many",
        ),
        (
            {
                "transforms": "h",
                "transforms.h.type": SMT + "HeaderFrom$Value",
                "transforms.h.fields": "a",
                "transforms.h.headers": "a",
                "transforms.h.operation": "swap",
            },
            "transforms.h.operation",
            "move' or 'copy",
        ),
        (
            {
                "transforms": "f",
                "transforms.f.type": SMT + "Filter",
                "transforms.f.predicate": "p",
            },
            "transforms.f.predicate",
            "not a predicate named in predicates",
        ),
        (
            {
                "transforms": "f",
                "transforms.f.type": SMT + "Filter",
                "transforms.f.predicate": "p",
                "transforms.f.negate": "yes",
                "predicates": "p",
                "predicates.p.type": PRED + "RecordIsTombstone",
            },
            "transforms.f.negate",
            "true or false",
        ),
        (
            {"transforms": "f", "transforms.f.type": SMT + "Filter", "predicates": "p"},
            "predicates.p.type",
            "is required",
        ),
        (
            {
                "transforms": "f",
                "transforms.f.type": SMT + "Filter",
                "predicates": "p",
                "predicates.p.type": PRED + "TopicNameMatches",
                "predicates.p.pattern": "(",
            },
            "predicates.p.pattern",
            "not a regular expression mirrorlib can read",
        ),
        (
            {
                "transforms": "f",
                "transforms.f.type": SMT + "Filter",
                "predicates": "p",
                "predicates.p.type": PRED + "HasHeaderKey",
            },
            "predicates.p.name",
            "required",
        ),
        (
            {
                "transforms": "f",
                "transforms.f.type": SMT + "Filter",
                "predicates": "p",
                "predicates.p.type": f"{HERE}:Upper",
            },
            "predicates.p.type",
            "not a subclass of mirrorlib.Predicate",
        ),
        (
            {
                "transforms": "f",
                "transforms.f.type": SMT + "Filter",
                "predicates": "p",
                "predicates.p.type": PRED + "HasHeaderValue",
            },
            "predicates.p.type",
            "Java code",
        ),
    ],
)
def test_configuration_errors_name_the_key(props: dict[str, str], key: str, says: str) -> None:
    with pytest.raises(ConfigError, match=says) as info:
        MirrorConfig.from_properties({**BASE, "B->A.enabled": "false", **props})
    assert info.value.key == key, str(info.value)
    assert key in str(info.value) and info.value.alias == "A->B"


def test_a_transform_whose_building_fails_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"transforms\.w\.type.*building it failed") as info:
        load_transforms({"transforms": "w", "transforms.w.type": f"{HERE}:Wrong"})
    assert info.value.key == "transforms.w.type"


# -- offset syncs across dropped records ------------------------------------------------------------


def test_translation_stays_exact_across_dropped_records() -> None:
    """Records 0-9 copied to 0-9, 10-14 dropped by a filter, 15-24 copied to 10-19, 25-29 dropped
    (the end of the log): every committed offset translates to the downstream offset of the
    first record not yet processed (the end, 20, past the last copy): a dropped record is an
    upstream gap, whose syncs the emitter writes on both sides of it."""
    tp = TopicPartition("orders", 0)
    copied = [*range(10), *range(15, 25)]
    downstream = dict(zip(copied, range(20), strict=True))
    emitter = OffsetSyncEmitter(offset_lag_max=100)
    translator = OffsetTranslator()
    for up in copied:
        emitter.record(tp, up, downstream[up])
        for emitted in emitter.take_pending():
            translator.add(emitted.sync, emitted.lineage)
    emitter.promote_delayed()
    for emitted in emitter.take_pending():
        translator.add(emitted.sync, emitted.lineage)

    def expected(committed: int) -> int:
        return next((downstream[u] for u in copied if u >= committed), 20)

    for committed in range(31):
        got = translator.translate("orders", 0, committed)
        want = expected(committed)
        assert got == want, (committed, got, want)  # exact: nothing skipped, nothing re-read
