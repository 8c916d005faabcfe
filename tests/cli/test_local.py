"""``mirrorlib local``: detached local clusters and a ready mm2.properties, end to end."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mirrorlib.cli import EXIT_OK, main
from mirrorlib.testing.local import read_state


def _mirrorlib(*argv: str, cwd: Path, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.run(
        [sys.executable, "-m", "mirrorlib", *argv],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().rsplit(")", 1)[-1].split()[0] == "Z"


def test_local_status_and_down_without_clusters(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["local", "status", "--dir", str(tmp_path / "none")]) == 1
    assert "no local clusters" in capsys.readouterr().out
    assert main(["local", "down", "--dir", str(tmp_path / "none")]) == EXIT_OK
    assert "no local clusters ran" in capsys.readouterr().out
    assert main(["local", "up", "--clusters", "A", "--dir", str(tmp_path)]) == 1
    assert "at least two distinct aliases" in capsys.readouterr().err


@pytest.mark.integration
def test_local_up_run_status_verify_failover_down(tmp_path: Path) -> None:
    up = _mirrorlib("local", "up", cwd=tmp_path, timeout=600)
    directory = tmp_path / ".mirrorlib-local"
    state = read_state(directory)
    try:
        assert up.returncode == EXIT_OK, up.stdout + up.stderr
        assert state is not None and state.aliases == ("A", "B")
        assert all(c.bootstrap_servers.startswith("127.0.0.1:") for c in state.clusters)
        assert "local clusters running: A at 127.0.0.1:" in up.stdout
        assert "mirrorlib run .mirrorlib-local/mm2.properties" in up.stdout
        config = ".mirrorlib-local/mm2.properties"
        assert (tmp_path / config).is_file()

        again = _mirrorlib("local", "up", cwd=tmp_path)
        assert again.returncode == EXIT_OK and "already run" in again.stdout
        assert read_state(directory) == state
        assert _mirrorlib("local", "status", cwd=tmp_path).returncode == EXIT_OK

        # run replicates the sample topic: the status shows the flow caught up
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        with (tmp_path / "run.log").open("w") as log:
            run = subprocess.Popen(
                [sys.executable, "-m", "mirrorlib", "run", config],
                cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip
        try:
            deadline = time.monotonic() + 60
            while True:
                status = _mirrorlib("status", config, "--json", cwd=tmp_path)
                flow = json.loads(status.stdout)["flows"][0] if status.stdout else {}
                checkpointed = flow.get("checkpoint_age_s") is not None
                if status.returncode == EXIT_OK and flow.get("lag_records") == 0 and checkpointed:
                    break
                assert time.monotonic() < deadline, status.stdout + status.stderr
                time.sleep(1)
            status = _mirrorlib("status", config, cwd=tmp_path)
            assert status.returncode == EXIT_OK and "A->B: running" in status.stdout
            assert "warning" not in status.stderr  # the written file is clean
        finally:
            run.send_signal(signal.SIGINT)
            assert run.wait(30) == EXIT_OK, (tmp_path / "run.log").read_text()

        verify = _mirrorlib("verify", config, cwd=tmp_path)
        assert verify.returncode == EXIT_OK, verify.stdout + verify.stderr
        assert "1000 source record(s) checked: 0 missing" in verify.stdout
        assert "verify A->B: 2000/2000 records read (100%)" in verify.stderr
        failover = _mirrorlib(
            "failover", config, "--group", "billing", "--from", "A", "--to", "B",
            "--dry-run", "--json", cwd=tmp_path,
        )  # fmt: skip
        assert failover.returncode == EXIT_OK, failover.stdout + failover.stderr
        plan = json.loads(failover.stdout)
        assert sum(p["translated"] for p in plan["partitions"]) == 400
    finally:
        down = _mirrorlib("local", "down", cwd=tmp_path)
    assert down.returncode == EXIT_OK and "stopped the local clusters" in down.stdout
    assert state is not None
    for pid in (state.supervisor_pid, *(c.pid for c in state.clusters)):
        assert _gone(pid), pid
    assert not directory.exists()
