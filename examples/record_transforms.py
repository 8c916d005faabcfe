"""Record transforms: drop, change and tag records on their way, with MM2's keys.

An ``mm2.properties`` that uses Connect's SMTs keeps working: ``Filter`` with the predicates
``RecordIsTombstone``, ``HasHeaderKey`` and ``TopicNameMatches``, ``InsertHeader``,
``DropHeaders`` and ``HeaderFrom`` are understood under their Java names and keys. Anything else
is a Python class: subclass :class:`mirrorlib.Transform`, return the record changed
(``attrs.evolve``: key, value, headers, timestamp) or ``None`` to drop it, and name it by
its Python path, as ``replication.policy.class`` names a policy::

    transforms = dropTombstones, origin, redact
    transforms.dropTombstones.type = org.apache.kafka.connect.transforms.Filter
    transforms.dropTombstones.predicate = isTombstone
    transforms.origin.type = org.apache.kafka.connect.transforms.InsertHeader
    transforms.origin.header = origin
    transforms.origin.value.literal = us-east
    transforms.redact.type = examples.record_transforms:Redact
    transforms.redact.field = card
    predicates = isTombstone
    predicates.isTombstone.type = org.apache.kafka.connect.transforms.predicates.RecordIsTombstone

(``us-east->eu-west.transforms…`` applies them to one flow only.) The module must be importable
wherever records are copied: copier worker processes (``tasks.max`` > 1) and Spark executors
build the transforms again from these keys. Run ``python examples/record_transforms.py`` to see
them at work on a few records.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import attrs

from mirrorlib import MirrorConfig, Transform, TransformRecord


@attrs.frozen
class Redact(Transform):
    """Masks the field ``transforms.<name>.field`` of JSON object values; passes other values
    through unchanged (raising would stop the partition at the record instead)."""

    field: str

    @classmethod
    def from_config(cls, config: Mapping[str, str]) -> Redact:
        return cls(config.get("field", "password"))

    def apply(self, record: TransformRecord) -> TransformRecord | None:
        try:
            doc = json.loads(record.value or b"")
        except ValueError:
            return record
        if not isinstance(doc, dict) or self.field not in doc:
            return record
        doc[self.field] = "***"
        return attrs.evolve(record, value=json.dumps(doc).encode())


PROPERTIES = {
    "clusters": "us-east, eu-west",
    "us-east.bootstrap.servers": "localhost:9092",
    "eu-west.bootstrap.servers": "localhost:9093",
    "us-east->eu-west.enabled": "true",
    "transforms": "dropTombstones, origin, redact",
    "transforms.dropTombstones.type": "org.apache.kafka.connect.transforms.Filter",
    "transforms.dropTombstones.predicate": "isTombstone",
    "transforms.origin.type": "org.apache.kafka.connect.transforms.InsertHeader",
    "transforms.origin.header": "origin",
    "transforms.origin.value.literal": "us-east",
    "transforms.redact.type": f"{__name__}:Redact",
    "transforms.redact.field": "card",
    "predicates": "isTombstone",
    "predicates.isTombstone.type": (
        "org.apache.kafka.connect.transforms.predicates.RecordIsTombstone"
    ),
}


def main() -> list[TransformRecord | None]:
    config = MirrorConfig.from_properties(PROPERTIES)
    chain = config.flow("us-east", "eu-west").record_transforms
    assert chain is not None
    records = [
        TransformRecord(b"o1", b'{"order": 1, "card": "4111"}', (), 0, "orders", 0, 0, "us-east.orders"),
        TransformRecord(b"o1", None, (), 0, "orders", 0, 1, "us-east.orders"),
        TransformRecord(b"o2", b"not json", (("trace", b"t"),), 0, "orders", 0, 2, "us-east.orders"),
    ]  # fmt: skip
    out = [chain.apply(r) for r in records]
    for before, after in zip(records, out, strict=True):
        shown = "dropped" if after is None else f"value={after.value!r} headers={after.headers}"
        print(f"offset {before.offset}: value={before.value!r} -> {shown}")
    return out


if __name__ == "__main__":
    main()
