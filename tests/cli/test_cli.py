"""The ``mirrorlib`` command line: parsing, exit codes, and every command on real clusters."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import javaproperties
import pytest
from confluent_kafka import Consumer, Producer

from mirrorlib import Replicator
from mirrorlib.cli import (
    EXIT_CONFIG,
    EXIT_DIFFERENCES,
    EXIT_OK,
    EXIT_REFUSED,
    EXIT_USAGE,
    main,
)
from mirrorlib.testing import ClusterSet
from tests.cli.runs import start_run, stop_after_line


def test_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for command in ("run", "status", "plan", "verify", "failover", "demo"):
        assert command in out
    assert "exit codes" in out


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main([])
    assert exc.value.code == EXIT_USAGE
    with pytest.raises(SystemExit) as exc:
        main(["failover", "x.properties", "--group", "g"])  # --from/--to missing
    assert exc.value.code == EXIT_USAGE


def test_invalid_config_is_one_line_and_exit_3(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "mm2.properties"
    path.write_text("clusters = A, B\nA->B.enabled = yes\n", encoding="utf-8")
    for command in (
        ["status"],
        ["plan"],
        ["verify"],
        ["failover", "--group", "g", "--from", "A", "--to", "B"],
    ):
        assert main([*command, str(path)]) == EXIT_CONFIG
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("mirrorlib: configuration error:"), err
    assert main(["--verbose", "plan", str(path)]) == EXIT_CONFIG
    assert "Traceback" in capsys.readouterr().err


def test_failover_unknown_alias_is_a_config_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "mm2.properties"
    path.write_text(
        "clusters = A, B\nA.bootstrap.servers = 127.0.0.1:1\nB.bootstrap.servers = 127.0.0.1:1\n",
        encoding="utf-8",
    )
    assert main(["failover", str(path), "--group", "g", "--from", "A", "--to", "C"]) == EXIT_CONFIG
    assert "unknown cluster alias 'C'" in capsys.readouterr().err


def test_console_script_and_module_entry_points() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "mirrorlib", "--help"], capture_output=True, text=True, check=False
    )
    assert out.returncode == 0 and "failover" in out.stdout
    out = subprocess.run(
        [sys.executable, "-m", "mirrorlib", "demo", "--help"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0 and "--records" in out.stdout


# -- real clusters ----------------------------------------------------------------------------


def _write_config(clusters: ClusterSet, tmp_path: Path, **extra: str) -> Path:
    from tests.runtime.conftest import mm2_properties

    props = mm2_properties(clusters, ["A->B"], **{"A->B.topics": "cli\\..*", **extra})
    path = tmp_path / "mm2.properties"
    path.write_text(javaproperties.dumps(props), encoding="utf-8")
    return path


def _produce(cluster: Any, topic: str, n: int, partitions: int = 2) -> None:
    p = Producer(cluster.client_config())
    for i in range(n):
        p.produce(
            topic,
            key=f"k{i}".encode(),
            value=f"v{i}".encode(),
            partition=i % partitions,
            headers=[("h", str(i).encode())],
        )
    assert p.flush(10) == 0


def _consume_and_commit(cluster: Any, group: str, topic: str, n: int) -> None:
    """Consume ``n`` records of ``topic`` with ``group`` from the start, then commit."""
    c = Consumer(
        {
            **cluster.client_config(),
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    c.subscribe([topic])
    got = 0
    while got < n:
        got += len([m for m in c.consume(n - got, timeout=1) if m.error() is None])
    c.commit(asynchronous=False)
    c.close()


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.integration
def test_status_plan_verify_failover_on_real_clusters(
    two_clusters: ClusterSet, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.runtime.conftest import config, end_offsets, wait_for

    a, b = two_clusters
    a.create_topic("cli.orders", 2)
    _produce(a, "cli.orders", 100)
    path = _write_config(two_clusters, tmp_path)
    cfg = config(two_clusters, ["A->B"], **{"A->B.topics": "cli\\..*"})

    # plan before anything ran: the remote topic would be created; internal topics are skipped
    code, out, _ = _run(capsys, "plan", str(path), "--flow", "A->B")
    assert code == EXIT_OK
    assert "create topic A.cli.orders from cli.orders: 2 partition(s)" in out
    assert "skip topic __consumer_offsets (internal)" in out
    code, out, _ = _run(capsys, "plan", str(path), "--json")
    plan = json.loads(out)
    # (other tests sharing the clusters may have left topics on A, heartbeats say: not ours)
    assert plan[0]["creates"]["cli.orders"] == "A.cli.orders"
    assert {"topic": "__consumer_offsets", "reason": "internal"} in plan[0]["skipped"]

    with Replicator(cfg):
        wait_for("copied", lambda: sum(end_offsets(b, "A.cli.orders").values()) >= 100)

        def caught_up() -> Any:
            code, out, _ = _run(capsys, "status", str(path), "--json")
            flow = json.loads(out)["flows"][0]
            mine = [p for p in flow["partitions"] if p["topic"] == "cli.orders"]
            ok = flow["state"] == "running" and mine and all(p["lag_records"] == 0 for p in mine)
            return flow if ok and code == EXIT_OK else None

        flow = wait_for("status shows the flow caught up", caught_up)
        assert flow["flow"] == "A->B" and flow["heartbeat_age_s"] < 10

        # the in-process copier (tasks.max = 1) reports itself as worker slot 0 of this process
        def copier_row() -> Any:
            flow = json.loads(_run(capsys, "status", str(path), "--json")[1])["flows"][0]
            rows = [w for w in flow["workers"] if w["pid"] == os.getpid()]
            ok = (
                len(rows) == 1 and rows[0]["state"] == "running"
                and {"cli.orders-0", "cli.orders-1"} <= set(rows[0]["partitions"])
            )  # fmt: skip
            return rows[0] if ok else None

        row = wait_for("status shows the in-process copier as a worker", copier_row)
        assert row["slot"] == 0 and row["tasks_max"] == 1 and not row["silent"]
        code, out, _ = _run(capsys, "status", str(path))
        assert "A->B: running" in out and "cli.orders-0" in out
        # a consumer group on A, checkpointed, then failed over
        _consume_and_commit(a, "cli-group", "cli.orders", 30)
        wait_for(
            "checkpoint age shown",
            lambda: (
                json.loads(_run(capsys, "status", str(path), "--json")[1])["flows"][0][
                    "checkpoint_age_s"
                ]
                is not None
            ),
        )

    code, out, err = _run(capsys, "verify", str(path), "--topics", "cli\\.orders")
    assert code == EXIT_OK, out + err
    assert "flow A->B: OK" in out and "100 source record(s) checked: 0 missing" in out

    code, out, _ = _run(
        capsys,
        "failover",
        str(path),
        "--group",
        "cli-group",
        "--from",
        "A",
        "--to",
        "B",
        "--dry-run",
        "--json",
    )
    assert code == EXIT_OK
    dry = json.loads(out)
    assert not dry["applied"] and sum(p["translated"] for p in dry["partitions"]) == 30
    code, out, _ = _run(
        capsys, "failover", str(path), "--group", "cli-group", "--from", "A", "--to", "B"
    )
    assert code == EXIT_OK and "committed on B" in out and "records re-read: 0" in out

    # a consumer now active on B: a second failover is refused with exit code 5
    cb = Consumer({**b.client_config(), "group.id": "cli-group", "enable.auto.commit": False})
    cb.subscribe(["A.cli.orders"])
    wait_for("member on B", lambda: cb.consume(1, timeout=0.5) or cb.assignment())
    code, out, err = _run(
        capsys, "failover", str(path), "--group", "cli-group", "--from", "A", "--to", "B"
    )
    cb.close()
    assert code == EXIT_REFUSED and "REFUSED" in out and "failover refused" in err

    # tamper with the copy: verify reports the extra record and exits 4
    p = Producer(b.client_config())
    p.produce("A.cli.orders", value=b"intruder", partition=1)
    p.flush(10)
    code, out, _ = _run(capsys, "verify", str(path), "--topics", "cli\\.orders", "--json")
    assert code == EXIT_DIFFERENCES
    report = json.loads(out)[0]
    assert report["totals"]["extra"] == 1 and report["totals"]["missing"] == 0


@pytest.mark.integration
def test_demo_runs_on_given_clusters(
    two_clusters: ClusterSet, capsys: pytest.CaptureFixture[str]
) -> None:
    from mirrorlib.cli.demo import run_demo

    result = run_demo(
        120, clusters=two_clusters, topic="demo.orders", group="demo-billing", stop_primary=False
    )
    out = capsys.readouterr().out
    assert result["processed"] == 120 and result["re_read"] == 0
    assert "nothing lost" in out and "resumes at offset" in out


@pytest.mark.integration
def test_failover_refuses_skips_and_unknown_groups_with_exit_5(
    two_clusters: ClusterSet, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.runtime.conftest import commit_group, config, end_offsets, wait_for

    a, b = two_clusters
    a.create_topic("cli.skip", 1)
    _produce(a, "cli.skip", 20, partitions=1)
    path = _write_config(two_clusters, tmp_path, **{"A->B.topics": "cli\\.skip"})
    with Replicator(config(two_clusters, ["A->B"], **{"A->B.topics": "cli\\.skip"})):
        wait_for("copied", lambda: sum(end_offsets(b, "A.cli.skip").values()) >= 20)
    _consume_and_commit(a, "cli-skip", "cli.skip", 10)
    commit_group(b, "cli-skip", "A.cli.skip", {0: 16})  # 6 records past the translation

    failover = ["failover", str(path), "--from", "A", "--to", "B"]
    for extra in ([], ["--dry-run"]):
        code, out, err = _run(capsys, *failover, "--group", "cli-skip", *extra)
        assert code == EXIT_REFUSED, out + err
        assert "records skipped: 6" in out and "REFUSED" in out
        assert "A.cli.skip-0: 6" in err and "--allow-skip" in err
    code, out, err = _run(capsys, *failover, "--group", "cli-skip", "--allow-skip", "--json")
    assert code == EXIT_OK, out + err
    plan = json.loads(out)
    assert plan["skipped_total"] == 6 and plan["partitions"][0]["action"] == "keep"

    code, out, err = _run(capsys, *failover, "--group", "cli-nosuch")
    assert code == EXIT_REFUSED
    assert "'cli-nosuch' has no committed offsets on A" in err and "--allow-empty" in err
    code, out, err = _run(capsys, *failover, "--group", "cli-nosuch", "--allow-empty")
    assert code == EXIT_OK, out + err
    assert "nothing to translate" in out


@pytest.mark.integration
def test_status_shows_unknown_lag_and_heartbeats_apart(
    two_clusters: ClusterSet, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from mirrorlib import MirrorConfig
    from tests.runtime.conftest import mm2_properties, wait_for

    a, _b = two_clusters
    a.create_topic("fresh.t", 1)
    _produce(a, "fresh.t", 5, partitions=1)
    # B->A writes heartbeats to A, which A->B replicates: an internal topic of flow A->B
    props = mm2_properties(
        two_clusters, ["A->B", "B->A"], **{"A->B.topics": "fresh\\..*", "B->A.topics": "none"}
    )
    path = tmp_path / "mm2.properties"
    path.write_text(javaproperties.dumps(props), encoding="utf-8")

    # nothing ran: no stored position, so the lag is unknown, not 0
    _, out, _ = _run(capsys, "status", str(path), "--flow", "A->B", "--json")
    flow = json.loads(out)["flows"][0]
    assert flow["lag_records"] is None  # (the shared clusters may hold other tests' heartbeats)
    fresh = [p for p in flow["partitions"] if p["topic"] == "fresh.t"]
    assert fresh and fresh[0]["lag_records"] is None and fresh[0]["end_offset"] == 5
    assert flow["unknown_lag_partitions"] >= 1
    _, out, _ = _run(capsys, "status", str(path), "--flow", "A->B")
    assert "lag unknown" in out and "fresh.t-0" in out

    with Replicator(MirrorConfig.from_properties(props)) as r:
        ours = next(s for s in r.status() if s.name == "A->B")
        assert ours.lag_records is None  # just started: positions are not known yet

        def settled() -> Any:
            _, out, _ = _run(capsys, "status", str(path), "--flow", "A->B", "--json")
            flow = json.loads(out)["flows"][0]
            internal = [p for p in flow["partitions"] if p["internal"]]
            data = [p for p in flow["partitions"] if not p["internal"]]
            ok = (
                flow["state"] == "running" and flow["lag_records"] == 0
                and internal and all(p["topic"] == "heartbeats" for p in internal)
                and [p["topic"] for p in data] == ["fresh.t"]
                and flow["position_age_s"] is not None
            )  # fmt: skip
            return flow if ok else None

        wait_for("status with heartbeats apart", settled)
        _, out, _ = _run(capsys, "status", str(path), "--flow", "A->B")
        assert "internal topics (heartbeats" in out and "heartbeats-0" in out
        in_process = next(s for s in r.status() if s.name == "A->B")
        assert {p.topic for p in in_process.internal_partitions} == {"heartbeats"}
        assert in_process.stalled is None


def test_run_stopped_during_start_up_exits_cleanly(tmp_path: Path) -> None:
    """SIGTERM before the replicator installs its handlers (here: while the configuration's
    policy class is imported) stops ``mirrorlib run`` with exit code 0, not the signal."""
    path = tmp_path / "mm2.properties"
    path.write_text(
        "clusters = A, B\nA.bootstrap.servers = 127.0.0.1:1\nB.bootstrap.servers = 127.0.0.1:1\n"
        "A->B.enabled = true\n"
        "replication.policy.class = tests.fixtures.stop_on_import.StopOnImportPolicy\n",
        encoding="utf-8",
    )
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [sys.executable, "-m", "mirrorlib", "run", str(path)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        cwd=root,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")])),
        },
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "stop requested before the replicator started" in out.stderr


@pytest.mark.integration
def test_run_stopped_right_after_it_started_exits_0(
    two_clusters: ClusterSet, tmp_path: Path
) -> None:
    """SIGTERM as soon as the replicator says it started (its flows may not have come up yet:
    their clusters have not answered) is a clean stop: exit 0, no "never came up" report.
    The kill -9 tests stop it like this, and exit 1 used to fail them now and then."""
    path = _write_config(two_clusters, tmp_path)
    for _ in range(3):
        proc = start_run(str(path))
        stopped = stop_after_line(proc, "mirrorlib replicator started")
        assert proc.returncode == 0, stopped.stderr
        assert "never came up" not in stopped.rest and "Traceback" not in stopped.rest
