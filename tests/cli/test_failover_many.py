"""``mirrorlib failover`` with many groups on real clusters: repeated ``--group``, ``--groups``,
``--all-groups``, per-group output (plain and JSON) and the exit codes of a partial failure."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import javaproperties
import pytest
from confluent_kafka import Consumer

from mirrorlib import DefaultReplicationPolicy, Replicator
from mirrorlib.cli import main
from mirrorlib.errors import ClusterError
from mirrorlib.kafka.client import MirrorClient
from mirrorlib.kafka.groups import GroupAdmin
from mirrorlib.testing import ClusterSet

TOPIC = "cfo.orders"
GROUPS = ["cfo-a", "cfo-b", "cfo-c", "cfo-d"]
BUSY = "cfo-busy"
# a separator of its own: this module's checkpoints topic holds only its own groups
SEPARATOR = "-"
EXTRA = {
    "A->B.topics": "cfo\\..*",
    "A->B.groups": "cfo-.*",
    "replication.policy.separator": SEPARATOR,
    "emit.checkpoints.interval.seconds": "1",
}


@pytest.fixture(scope="module")
def setup(kafka_clusters: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Five groups committed on A and checkpointed to B; the config file."""
    from tests.runtime.conftest import commit_group, config, mm2_properties, produce, wait_for

    clusters = kafka_clusters(["A", "B"])
    a, b = clusters
    a.create_topic(TOPIC, 1)
    produce(a, TOPIC, [{"value": f"v{i}".encode()} for i in range(50)])
    for i, group in enumerate([*GROUPS, BUSY]):
        commit_group(a, group, TOPIC, {0: 10 + i})
    policy = DefaultReplicationPolicy(separator=SEPARATOR)

    def checkpointed() -> bool:
        with MirrorClient(b.client_config(), policy) as client:
            try:
                return {g for g, _ in client.checkpoints("A", timeout=10)} >= {*GROUPS, BUSY}
            except ClusterError:  # the checkpoints topic is not created yet
                return False

    with Replicator(config(clusters, ["A->B"], **EXTRA)):
        wait_for("checkpoints of every group", checkpointed, 90)
    path = tmp_path_factory.mktemp("cfo") / "mm2.properties"
    path.write_text(javaproperties.dumps(mm2_properties(clusters, ["A->B"], **EXTRA)))
    yield clusters, path


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def _on_b(clusters: ClusterSet, group: str) -> dict[int, int]:
    admin = GroupAdmin(clusters[1].client_config(), alias="B")
    return {tp.partition: om.offset for tp, om in admin.committed_offsets(group).items()}


@pytest.mark.integration
def test_many_groups_plain_and_json_and_the_partial_failure_exit_code(
    setup: tuple[ClusterSet, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    from mirrorlib.cli import EXIT_OK, EXIT_PARTIAL, EXIT_REFUSED, EXIT_USAGE
    from tests.runtime.conftest import wait_for

    clusters, path = setup
    base = ["failover", str(path), "--from", "A", "--to", "B"]
    code, _, err = _run(capsys, *base)
    assert code == EXIT_USAGE and "--group GROUP" in err

    # repeated --group, dry run: one row per group, nothing committed
    code, out, err = _run(capsys, *base, "--group", "cfo-a", "--group", "cfo-b", "--dry-run")
    assert code == EXIT_OK, out + err
    assert "failover of 2 group(s) from A to B: 2 planned" in out
    assert "dry run: nothing committed" in out and _on_b(clusters, "cfo-a") == {}

    # a regex, JSON
    code, out, err = _run(capsys, *base, "--groups", "cfo-[ab]", "--json")
    assert code == EXIT_OK, out + err
    data = json.loads(out)
    assert [g["group"] for g in data["groups"]] == ["cfo-a", "cfo-b"]
    assert data["outcomes"]["committed"] == 2 and data["failed"] == []
    assert _on_b(clusters, "cfo-a") == {0: 10} and _on_b(clusters, "cfo-b") == {0: 11}

    # every group with checkpoints, one of them active on B: exit 6, the failed group named
    busy = Consumer({**clusters[1].client_config(), "group.id": BUSY, "enable.auto.commit": False})
    busy.subscribe([f"A{SEPARATOR}{TOPIC}"])
    try:
        wait_for("member on B", lambda: busy.consume(1, timeout=0.5) or busy.assignment())
        code, out, err = _run(capsys, *base, "--all-groups")
        assert code == EXIT_PARTIAL, out + err
        assert "REFUSED cfo-busy: group 'cfo-busy' already has active members on B" in out
        assert "failed: cfo-busy" in out
        assert "failover failed for 1 of 5 group(s): cfo-busy" in err
        assert _on_b(clusters, "cfo-c") == {0: 12} and _on_b(clusters, "cfo-d") == {0: 13}
        # only the refused group: exit 5, as for one group
        code, out, err = _run(capsys, *base, "--group", BUSY, "--group", "cfo-nosuch", "--json")
        assert code == EXIT_REFUSED, out + err
        data = json.loads(out)
        assert data["failed"] == [BUSY, "cfo-nosuch"]
        assert {g["group"]: g["outcome"] for g in data["groups"]} == {
            BUSY: "refused", "cfo-nosuch": "refused",
        }  # fmt: skip
    finally:
        busy.close()
    assert _on_b(clusters, BUSY) == {}
    # nothing matches: refused unless --allow-empty
    code, _, err = _run(capsys, *base, "--groups", "nomatch-.*")
    assert code == EXIT_REFUSED and "no group selected" in err
    code, out, _ = _run(capsys, *base, "--groups", "nomatch-.*", "--allow-empty")
    assert code == EXIT_OK and "failover of 0 group(s)" in out
