"""Bad inputs through the ``mirrorlib`` command, as a user types them: each gets its exit code
and a one-line message that says what is wrong, never a traceback.

No Kafka cluster is needed: an unreachable cluster is a loopback port nothing listens on.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

from mirrorlib.cli import EXIT_CONFIG, EXIT_FAILURE, EXIT_USAGE
from tests.cli.runs import start_run, stop_after_line


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def _mirrorlib(*args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mirrorlib", *args],
        capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip


@attrs.frozen
class Files:
    """Configuration files for the cases; ``{port}`` in a case is the closed port."""

    dir: Path
    port: int

    def write(self, name: str, text: str) -> str:
        path = self.dir / name
        path.write_text(text.format(port=self.port), encoding="utf-8")
        return str(path)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Files]:
    yield Files(tmp_path_factory.mktemp("bad-inputs"), _closed_port())


_GOOD = (
    "clusters = A, B\n"
    "A.bootstrap.servers = 127.0.0.1:{port}\n"
    "B.bootstrap.servers = 127.0.0.1:{port}\n"
    "A->B.enabled = true\n"
)
CONFIGS = {
    "good": _GOOD,
    "typo": _GOOD + "replicaton.factor = 3\nA->C.enabled = true\n",
    "no-clusters": "A.bootstrap.servers = 127.0.0.1:{port}\n",
    "bad-bool": _GOOD + "A->B.emit.heartbeats.enabled = yes\n",
    "no-bootstrap": "clusters = A, B\nA->B.enabled = true\n",
    "missing-pem": _GOOD + "A.security.protocol = SSL\n"
    "A.ssl.truststore.type = PEM\nA.ssl.truststore.location = /nonexistent/ca.pem\n",
    "bad-alias": "clusters = A, B # the two data centres\nA->B.enabled = true\n",
}

# (command line with {good}-style config names, expected exit code, expected message fragment:
# on stderr, or in the report on stdout for status)
CASES: list[tuple[str, int, str]] = [
    # usage errors: argparse, exit 2
    ("", EXIT_USAGE, "required: COMMAND"),
    ("bogus {good}", EXIT_USAGE, "invalid choice: 'bogus'"),
    ("--log-level BANANA plan {good}", EXIT_USAGE, "invalid choice: 'BANANA'"),
    ("status {good} --flow AB", EXIT_USAGE, "'AB' is not a flow: write SOURCE->TARGET"),
    ("plan {good} --flow A->", EXIT_USAGE, "'A->' is not a flow"),
    ("verify {good} --flow A->B->A", EXIT_USAGE, "is not a flow"),
    ("verify {good} --topics [orders", EXIT_USAGE, "'[orders' is not a valid regular expression"),
    ("verify {good} --timeout -1", EXIT_USAGE, "'-1' is not a positive number of seconds"),
    ("status {good} --timeout 0", EXIT_USAGE, "'0' is not a positive number of seconds"),
    ("status {good} --timeout nan", EXIT_USAGE, "'nan' is not a positive number of seconds"),
    ("plan {good} --timeout ten", EXIT_USAGE, "'ten' is not a positive number of seconds"),
    ("status {good} --watch -5", EXIT_USAGE, "'-5' is not a positive number of seconds"),
    ("failover {good} --group g --timeout -3 --from A --to B", EXIT_USAGE, "'-3' is not"),
    ("run {good} --metrics-port 70000", EXIT_USAGE, "'70000' is not a port number (1-65535)"),
    ("run {good} --metrics-port -1", EXIT_USAGE, "'-1' is not a port number"),
    ("run {good} --timeout 0", EXIT_USAGE, "'0' is not a positive number of seconds"),
    ("demo --records 0", EXIT_USAGE, "'0' is not a positive whole number"),
    ("failover {good} --group g", EXIT_USAGE, "the following arguments are required: --from"),
    # configuration errors: exit 3, naming the key
    ("plan /nonexistent/mm2.properties", EXIT_CONFIG, "Cannot read configuration file"),
    ("status {no-clusters}", EXIT_CONFIG, "clusters is missing"),
    ("plan {bad-bool}", EXIT_CONFIG, "A->B.emit.heartbeats.enabled"),
    ("plan {no-bootstrap}", EXIT_CONFIG, "set A.bootstrap.servers"),
    ("plan {bad-alias}", EXIT_CONFIG, "invalid cluster alias 'B # the two data centres'"),
    (
        "verify {missing-pem}",
        EXIT_CONFIG,
        "ssl.truststore.location in MM2 terms)='/nonexistent/ca.pem' (cluster A): no such file",
    ),
    ("run {missing-pem}", EXIT_CONFIG, "'/nonexistent/ca.pem' (cluster A): no such file"),
    ("status {good} --flow A->C", EXIT_CONFIG, "unknown cluster alias 'C'"),
    ("failover {good} --group g --from A --to C", EXIT_CONFIG, "unknown cluster alias 'C'"),
    ("failover {good} --group g --from A --to A", EXIT_CONFIG, "must name different clusters"),
    ("run {good} --clusters C", EXIT_CONFIG, "--clusters names unknown cluster alias(es) C"),
    ("plan {typo} --strict", EXIT_CONFIG, "2 configuration warning(s) (--strict)"),
    # unreachable clusters: exit 1, naming the cluster and its address, within the timeout
    (
        "plan {good} --timeout 1",
        EXIT_FAILURE,
        "cluster A (127.0.0.1:{port}) is unreachable: no answer within 1s",
    ),
    ("verify {good} --timeout 1", EXIT_FAILURE, "cluster B (127.0.0.1:{port}) is unreachable"),
    (
        "failover {good} --group g --from A --to B --timeout 1",
        EXIT_FAILURE,
        "cluster B (127.0.0.1:{port}) is unreachable: no answer within 1s (127.0.0.1:{port}"
        "/bootstrap: Connect to ipv4#127.0.0.1:{port} failed: Connection refused)",
    ),
    ("status {good} --timeout 1", EXIT_FAILURE, "cluster A (127.0.0.1:{port}) is unreachable"),
]


@pytest.mark.parametrize(("line", "code", "message"), CASES, ids=[c[0] or "-" for c in CASES])
def test_bad_input_exits_with_a_message_and_no_traceback(
    files: Files, line: str, code: int, message: str
) -> None:
    names = {name: files.write(f"{name}.properties", text) for name, text in CONFIGS.items()}
    args = [arg.format(**names) for arg in line.split()]
    started = time.monotonic()
    out = _mirrorlib(*args)
    assert out.returncode == code, out.stderr
    assert message.format(port=files.port) in out.stderr + out.stdout  # status: the report
    assert "Traceback" not in out.stderr
    assert time.monotonic() - started < 8.0  # unreachable: the timeout, not librdkafka's 30 s


def test_at_least_25_bad_inputs() -> None:
    assert len(CASES) >= 25


def test_metrics_port_in_use_names_the_port(files: Files) -> None:
    config = files.write("good.properties", _GOOD)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = _mirrorlib("run", config, "--metrics-port", str(port))
    assert out.returncode == EXIT_FAILURE
    assert f"cannot serve metrics on 127.0.0.1:{port}" in out.stderr
    assert "in use" in out.stderr and "Traceback" not in out.stderr


def test_configuration_warnings_are_shown_once_by_every_command(files: Files) -> None:
    config = files.write("typo.properties", CONFIGS["typo"])
    for command in (
        ["plan"], ["status"], ["verify"], ["failover", "--group", "g", "--from", "A", "--to", "B"]
    ):  # fmt: skip
        out = _mirrorlib(*command, config, "--timeout", "1")
        assert out.returncode == EXIT_FAILURE, out.stderr  # the cluster is unreachable
        assert out.stderr.count("replicaton.factor: not an MM2 configuration key") == 1
        assert out.stderr.count("A->C.enabled: names a flow between clusters that are not") == 1


def test_json_into_a_closed_pipe_is_quiet(files: Files) -> None:
    config = files.write("good.properties", _GOOD)
    proc = subprocess.Popen(
        [sys.executable, "-m", "mirrorlib", "status", config, "--json", "--timeout", "1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # like `| head` that has seen enough
    stderr = proc.stderr.read()
    proc.stderr.close()
    assert proc.wait(30) == EXIT_FAILURE
    assert "Broken pipe" not in stderr and "Traceback" not in stderr


def test_run_reports_an_unreachable_cluster_and_exits_1_on_sigterm(files: Files) -> None:
    config = files.write("good.properties", _GOOD)
    proc = start_run(config, "--timeout", "1")
    # the file enables A->B; B->A runs too (heartbeats only, as in MM2): wait for A->B's own
    # report, since B->A's may come first
    stopped = stop_after_line(proc, "flow A->B: cluster ", within=20, exit_within=30)
    assert f"cluster B (127.0.0.1:{files.port}) is unreachable" in stopped.seen, stopped.seen
    assert proc.returncode == EXIT_FAILURE, stopped.stderr
    assert "mirrorlib: flow A->B never came up: connection: cluster " in stopped.rest
    assert "Traceback" not in stopped.rest


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A loopback port that accepts connections and never answers (a hung broker)."""
    accepted: list[socket.socket] = []
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(64)
        server.settimeout(0.2)
        done = threading.Event()

        def accept() -> None:
            while not done.is_set():
                try:
                    accepted.append(server.accept()[0])
                except TimeoutError:
                    continue

        thread = threading.Thread(target=accept, daemon=True)
        thread.start()
        try:
            yield server.getsockname()[1]
        finally:
            done.set()
            thread.join()
            for conn in accepted:
                conn.close()


def test_run_stopped_while_a_cluster_never_answers_exits_0_quickly(
    files: Files, silent_port: int
) -> None:
    """Start-up requests are stop-aware: SIGTERM while the clusters accept connections and never
    answer (``--timeout 60``) ends ``mirrorlib run`` within seconds, with exit code 0 (a clean
    stop during start-up: no cluster failed to answer within its timeout yet)."""
    config = files.write("silent.properties", _GOOD.replace("{port}", str(silent_port)))
    proc = start_run(config, "--timeout", "60")
    stopped = stop_after_line(proc, "mirrorlib replicator started", delay=2.0, within=30)
    assert proc.returncode == 0, stopped.stderr
    assert "flow A->B stopped while starting" in stopped.rest, stopped.stderr
    assert "Traceback" not in stopped.rest and "never came up" not in stopped.rest
    assert stopped.exit_seconds < 5.0, f"{stopped.exit_seconds:.1f}s\n{stopped.stderr}"
