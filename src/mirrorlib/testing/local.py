"""Local clusters that outlive the command that started them (``mirrorlib local``).

The clusters of :func:`~mirrorlib.testing.start_clusters` belong to the Python process that
started them. :func:`start_detached` instead starts a small *supervisor* —
``python -m mirrorlib.testing.local serve --dir DIR --clusters A,B``, in a session of its own, so
closing the terminal or pressing Ctrl-C there does not reach it — which starts the clusters
(broker data under ``DIR/clusters/``, its own log in ``DIR/supervisor.log``), writes
``DIR/state.json`` (its pid, and per cluster the bootstrap address, broker pid and work dir) once
they are ready, and holds them until it receives SIGTERM: then it stops the brokers and removes
the state file. :func:`stop_detached` sends that SIGTERM, waits, kills whatever is left and
removes what the supervisor wrote. Brokers listen on 127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import attrs

from mirrorlib.errors import TestClusterError
from mirrorlib.testing.cluster import ClusterFactory
from mirrorlib.testing.process import tail_file

__all__ = [
    "LocalCluster",
    "LocalClusters",
    "is_running",
    "read_state",
    "serve",
    "start_detached",
    "stop_detached",
]

STATE_FILE = "state.json"
LOG_FILE = "supervisor.log"
CLUSTERS_DIR = "clusters"
_SUPERVISOR_MARK = "mirrorlib.testing.local"
_BROKER_MARK = "kafka.Kafka"


@attrs.frozen
class LocalCluster:
    """One detached local cluster: its alias, bootstrap address, broker pid and work dir."""

    alias: str
    bootstrap_servers: str
    pid: int
    work_dir: str


@attrs.frozen
class LocalClusters:
    """What ``DIR/state.json`` records: the supervisor's pid and its clusters, in order."""

    directory: Path
    supervisor_pid: int
    clusters: tuple[LocalCluster, ...]

    @property
    def aliases(self) -> tuple[str, ...]:
        return tuple(c.alias for c in self.clusters)

    def to_json(self) -> str:
        return json.dumps(
            {
                "supervisor_pid": self.supervisor_pid,
                "clusters": [attrs.asdict(c) for c in self.clusters],
            },
            indent=2,
        )


def read_state(directory: str | os.PathLike[str]) -> LocalClusters | None:
    """The clusters recorded in ``directory`` (``None``: no state file)."""
    path = Path(directory) / STATE_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise TestClusterError(f"cannot read {path}: {exc}") from exc
    return LocalClusters(
        Path(directory),
        int(data["supervisor_pid"]),
        tuple(LocalCluster(**c) for c in data["clusters"]),
    )


def _alive(pid: int, mark: str) -> bool:
    """Whether process ``pid`` runs (not a zombie) and, where ``/proc`` tells, its command line
    contains ``mark`` (a recycled pid is not ours)."""
    with contextlib.suppress(ChildProcessError, OSError):
        if os.waitpid(pid, os.WNOHANG)[0] == pid:  # our own child that exited: reaped now
            return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return False  # someone else's process: the pid was recycled
    proc = Path(f"/proc/{pid}")
    if not proc.exists():
        return True
    try:
        stat = (proc / "stat").read_text()
        cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return False
    state = stat.rsplit(")", 1)[-1].split()[0]
    return state not in {"Z", "X"} and mark in cmdline


def is_running(state: LocalClusters) -> bool:
    """Whether the supervisor recorded in ``state`` still runs."""
    return _alive(state.supervisor_pid, _SUPERVISOR_MARK)


def start_detached(
    directory: str | os.PathLike[str], aliases: Sequence[str], *, timeout: float = 600.0
) -> LocalClusters:
    """Start the supervisor for clusters ``aliases`` in ``directory`` and wait until they are
    ready (the first start downloads Kafka's jars: allow minutes). Raises
    :class:`TestClusterError` when they already run there, or with the tail of the supervisor's
    log when it fails."""
    directory = Path(directory).absolute()
    existing = read_state(directory)
    if existing is not None and is_running(existing):
        raise TestClusterError(f"local clusters already run in {directory}")
    directory.mkdir(parents=True, exist_ok=True)
    (directory / STATE_FILE).unlink(missing_ok=True)
    log = directory / LOG_FILE
    cmd = [sys.executable, "-m", _SUPERVISOR_MARK, "serve", "--dir", str(directory),
           "--clusters", ",".join(aliases)]  # fmt: skip
    with log.open("ab") as out:
        proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True, close_fds=True,
        )  # fmt: skip
    deadline = time.monotonic() + timeout
    while True:
        state = read_state(directory)
        if state is not None:
            return state
        if proc.poll() is not None:
            raise TestClusterError(
                f"the local clusters did not start (exit code {proc.returncode}); "
                f"{log}:\n{tail_file(log, 30)}"
            )
        if time.monotonic() > deadline:
            stop_detached(directory)
            raise TestClusterError(
                f"the local clusters were not ready within {timeout:g}s; see {log}"
            )
        time.sleep(0.2)


def stop_detached(directory: str | os.PathLike[str], *, timeout: float = 60.0) -> bool:
    """Stop the clusters of ``directory`` (SIGTERM to the supervisor, which stops the brokers;
    SIGKILL for anything left after ``timeout``) and remove their data, state and log. Returns
    whether anything was running."""
    directory = Path(directory)
    state = read_state(directory)
    if state is None:
        return False
    ran = is_running(state)
    if ran:
        with contextlib.suppress(ProcessLookupError):
            os.kill(state.supervisor_pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while is_running(state) and time.monotonic() < deadline:
            time.sleep(0.2)
    leftovers = [(state.supervisor_pid, _SUPERVISOR_MARK)] + [
        (c.pid, _BROKER_MARK) for c in state.clusters
    ]
    for pid, mark in leftovers:  # a supervisor that crashed or hung leaves its brokers behind
        if _alive(pid, mark):
            ran = True
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    shutil.rmtree(directory / CLUSTERS_DIR, ignore_errors=True)
    (directory / STATE_FILE).unlink(missing_ok=True)
    (directory / LOG_FILE).unlink(missing_ok=True)
    return ran


def serve(directory: str | os.PathLike[str], aliases: Sequence[str]) -> int:
    """The supervisor: start the clusters, record them, hold them until SIGTERM or SIGINT (or
    until a broker dies), stop them. Returns the exit code."""
    directory = Path(directory)
    # A flag, not a threading.Event: a handler calling Event.set() while the main thread holds
    # the event's lock in wait() deadlocks (mirrorlib.runtime.signals explains it)
    stopping: list[int] = []

    def on_signal(signum: int, _frame: object) -> None:
        stopping.append(signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    factory = ClusterFactory(directory / CLUSTERS_DIR)
    try:
        clusters = factory.start(aliases)
        state = LocalClusters(
            directory,
            os.getpid(),
            tuple(
                LocalCluster(c.alias, c.bootstrap_servers, c.pid or 0, str(c.work_dir))
                for c in factory.clusters
            ),
        )
        tmp = directory / (STATE_FILE + ".tmp")
        tmp.write_text(state.to_json(), encoding="utf-8")
        tmp.replace(directory / STATE_FILE)
        print(f"clusters ready: {', '.join(f'{c.alias} at {c.bootstrap_servers}' for c in clusters)}",
              flush=True)  # fmt: skip
        while not stopping:
            time.sleep(1.0)
            dead = [c.alias for c in factory.clusters if not c.is_running]
            if dead:
                print(f"broker(s) {', '.join(dead)} exited; stopping", flush=True)
                return 1
        print("stopping", flush=True)
        return 0
    except TestClusterError as exc:
        print(f"mirrorlib local: {exc}", flush=True)
        return 1
    finally:
        factory.close()
        (directory / STATE_FILE).unlink(missing_ok=True)


def _main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mirrorlib.testing.local")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("serve", help="start local clusters and hold them until SIGTERM")
    run.add_argument("--dir", required=True)
    run.add_argument("--clusters", default="A,B", help="aliases, comma-separated")
    args = parser.parse_args(argv)
    return serve(args.dir, [a.strip() for a in args.clusters.split(",") if a.strip()])


if __name__ == "__main__":
    sys.exit(_main())
