"""Run the real Apache Kafka MirrorMaker 2 (dedicated mode) beside mirrorlib, for tests.

:class:`RealMirrorMaker` starts ``org.apache.kafka.connect.mirror.MirrorMaker`` — what
``bin/connect-mirror-maker.sh`` runs — in its own JVM from the jars that
:func:`~mirrorlib.testing.kafka_classpath` caches, with a properties mapping or file. Its Log4j 2
output (INFO, with the Kafka clients' config dumps turned down) goes to ``mm2.log`` in the work
dir. :func:`mm2_properties` builds a small, single-node-friendly ``mm2.properties`` for
clusters of the test bed: replication factor 1 for every internal topic and intervals of about a
second instead of minutes.

    from mirrorlib.testing import start_clusters
    from mirrorlib.testing.mm2 import RealMirrorMaker, mm2_properties

    with start_clusters(2) as (a, b):
        props = mm2_properties([a, b], flows=["A->B"], topics="orders")
        with RealMirrorMaker(props, work_dir=tmp) as mm2:    # waits for "Kafka MirrorMaker started"
            mm2.wait_until(lambda: "A.orders" in b.topic_names(), timeout=60)
"""

from __future__ import annotations

import atexit
import contextlib
import os
import subprocess
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Self

import javaproperties

from mirrorlib.errors import TestClusterError
from mirrorlib.testing.cluster import BaseCluster
from mirrorlib.testing.config import JvmOptions, render_properties
from mirrorlib.testing.jars import KAFKA_VERSION, java_executable, kafka_classpath
from mirrorlib.testing.process import tail_file, terminate

__all__ = [
    "MM2_LOG4J2_PROPERTIES",
    "MM2_MAIN_CLASS",
    "MM2_STARTED_MESSAGE",
    "RealMirrorMaker",
    "mm2_properties",
]

#: The dedicated-mode entry point (``bin/connect-mirror-maker.sh``).
MM2_MAIN_CLASS: Final = "org.apache.kafka.connect.mirror.MirrorMaker"
#: Logged by ``MirrorMaker.start()`` once every herder has been started.
MM2_STARTED_MESSAGE: Final = "Kafka MirrorMaker started"

#: Log4j 2 configuration for MM2: INFO to stdout (redirected to ``mm2.log``); the Kafka clients'
#: and configs' chatter at WARN.
MM2_LOG4J2_PROPERTIES: Final = """\
status = warn
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p [%t] %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = OUT
logger.clients.name = org.apache.kafka.clients
logger.clients.level = WARN
logger.config.name = org.apache.kafka.common.config
logger.config.level = WARN
logger.utils.name = org.apache.kafka.common.utils.AppInfoParser
logger.utils.level = WARN
logger.metrics.name = org.apache.kafka.common.metrics
logger.metrics.level = WARN
logger.reflections.name = org.reflections
logger.reflections.level = ERROR
"""

#: Internal-topic replication factors that default to 2 or 3 and fail on a single broker.
_REPLICATION_FACTOR_KEYS: Final = (
    "replication.factor",
    "checkpoints.topic.replication.factor",
    "heartbeats.topic.replication.factor",
    "offset-syncs.topic.replication.factor",
    "offset.storage.replication.factor",
    "status.storage.replication.factor",
    "config.storage.replication.factor",
)

_live: weakref.WeakSet[RealMirrorMaker] = weakref.WeakSet()


def _stop_leftovers() -> None:  # pragma: no cover - interpreter shutdown
    for mm2 in list(_live):
        with contextlib.suppress(Exception):
            mm2.kill()


atexit.register(_stop_leftovers)


def _flow(flow: str | tuple[str, str]) -> tuple[str, str]:
    if isinstance(flow, str):
        source, sep, target = flow.partition("->")
        if not sep or not source.strip() or not target.strip():
            raise TestClusterError(f"a flow is 'SOURCE->TARGET', got {flow!r}")
        return source.strip(), target.strip()
    source, target = flow
    return source, target


def mm2_properties(
    clusters: Sequence[BaseCluster] | Mapping[str, Mapping[str, str]],
    flows: Iterable[str | tuple[str, str]] | None = None,
    *,
    aliases: Sequence[str] | None = None,
    topics: str = ".*",
    groups: str = ".*",
    interval_seconds: int = 1,
    offset_flush_interval_ms: int = 1000,
    tasks_max: int = 1,
    sync_group_offsets: bool = False,
    sync_topic_acls: bool = False,
    user: str | None = None,
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """A minimal ``mm2.properties`` (as a mapping) for single-node test clusters.

    ``clusters`` are test-bed clusters (their Java client settings are used, as ``user`` on ACL
    clusters) or a mapping ``alias -> Java client settings``. ``aliases`` renames the clusters
    for MM2 (default: their own aliases) — useful to keep MM2's topic names unique on shared
    clusters. ``flows`` lists the enabled flows (``"A->B"`` or ``("A", "B")``; default: the
    first cluster to the second); every other pair is disabled *and* emits no heartbeats, so MM2
    runs one herder per enabled flow only.

    Everything is sized for one broker and quick tests: replication factor 1 for every internal
    topic, topic/group refresh, checkpoint, heartbeat and group-sync intervals of
    ``interval_seconds``, and ``<target>.offset.flush.interval.ms`` (the Connect worker's offset
    flush, which also flushes delayed offset syncs) of ``offset_flush_interval_ms``. ``topics``
    and ``groups`` are MM2's include regexes (for all flows). ``extra`` is applied last.
    """
    conns = _connections(clusters, user, aliases)
    names = list(conns)
    if len(names) < 2:
        raise TestClusterError("MirrorMaker 2 needs at least two clusters")
    enabled = _enabled_flows(flows, names)
    interval = str(interval_seconds)
    props: dict[str, str] = {"clusters": ", ".join(names)}
    for alias, conf in conns.items():
        for key, value in conf.items():
            props[f"{alias}.{key}"] = value
    props.update(_flow_switches(names, enabled))
    for target in sorted({t for _, t in enabled}):
        props[f"{target}.offset.flush.interval.ms"] = str(offset_flush_interval_ms)
    props.update({key: "1" for key in _REPLICATION_FACTOR_KEYS})
    props.update(
        {
            "topics": topics,
            "groups": groups,
            "tasks.max": str(tasks_max),
            "refresh.topics.interval.seconds": interval,
            "refresh.groups.interval.seconds": interval,
            "emit.checkpoints.interval.seconds": interval,
            "emit.heartbeats.interval.seconds": interval,
            "sync.group.offsets.enabled": "true" if sync_group_offsets else "false",
            "sync.group.offsets.interval.seconds": interval,
            "sync.topic.acls.enabled": "true" if sync_topic_acls else "false",
        }
    )
    props.update(extra or {})
    return props


def _connections(
    clusters: Sequence[BaseCluster] | Mapping[str, Mapping[str, str]],
    user: str | None,
    aliases: Sequence[str] | None,
) -> dict[str, dict[str, str]]:
    """The Java client settings of each cluster, by its alias for MM2."""
    if isinstance(clusters, Mapping):
        conns = {alias: dict(conf) for alias, conf in clusters.items()}
    else:
        conns = {c.alias: c.java_client_config(user) for c in clusters}
    if aliases is None:
        return conns
    if len(aliases) != len(conns) or len(set(aliases)) != len(aliases):
        raise TestClusterError(f"need {len(conns)} distinct aliases, got {list(aliases)}")
    return dict(zip(aliases, conns.values(), strict=True))


def _enabled_flows(
    flows: Iterable[str | tuple[str, str]] | None, names: Sequence[str]
) -> set[tuple[str, str]]:
    """The flows to enable (default: the first cluster to the second), checked against ``names``."""
    enabled = {_flow(f) for f in flows} if flows is not None else {(names[0], names[1])}
    for source, target in enabled:
        if source not in names or target not in names or source == target:
            raise TestClusterError(f"flow {source}->{target} does not join two of {list(names)}")
    return enabled


def _flow_switches(names: Sequence[str], enabled: set[tuple[str, str]]) -> dict[str, str]:
    """``<source>-><target>.enabled`` for every pair; disabled pairs emit no heartbeats either."""
    switches: dict[str, str] = {}
    for source in names:
        for target in names:
            if source == target:
                continue
            if (source, target) in enabled:
                switches[f"{source}->{target}.enabled"] = "true"
            else:
                switches[f"{source}->{target}.enabled"] = "false"
                switches[f"{source}->{target}.emit.heartbeats.enabled"] = "false"
    return switches


class RealMirrorMaker:
    """The real MirrorMaker 2 in dedicated mode, as a JVM process.

    ``properties`` is an ``mm2.properties`` mapping (written to ``<work_dir>/mm2.properties``)
    or the path of an existing file. ``clusters`` is passed as ``--clusters`` (the target
    clusters this node drives; default: all). ``heap`` sizes the JVM; ``fast_jit`` adds
    ``-XX:TieredStopAtLevel=1`` (default: on, unless ``MIRRORLIB_KAFKA_FAST_JIT=0``);
    ``jvm_args`` are appended last. Logs (stdout and stderr of the JVM, Log4j 2 at INFO) go to
    :attr:`log_path`.

    :meth:`start` returns once the process logged ``Kafka MirrorMaker started`` (its herders are
    starting; replication follows within seconds) — wait for concrete effects with
    :meth:`wait_until`. :meth:`stop` sends SIGTERM (MM2's shutdown hook stops the herders) and
    SIGKILLs after a timeout; :meth:`kill` is a crash. As a context manager it starts on enter and
    stops on exit. Processes still running at interpreter exit are killed.
    """

    __test__ = False

    def __init__(
        self,
        properties: Mapping[str, str] | str | os.PathLike[str],
        *,
        work_dir: str | os.PathLike[str],
        clusters: Sequence[str] | None = None,
        heap: str = "512m",
        fast_jit: bool | None = None,
        jvm_args: Sequence[str] = (),
        kafka_version: str = KAFKA_VERSION,
        startup_timeout: float = 120.0,
    ) -> None:
        self.work_dir = Path(work_dir)
        if isinstance(properties, Mapping):
            self._properties: dict[str, str] | None = {
                str(k): str(v) for k, v in properties.items()
            }
            self.properties_path = self.work_dir / "mm2.properties"
        else:
            self._properties = None
            self.properties_path = Path(properties)
        self.clusters = tuple(clusters or ())
        env_jvm = JvmOptions.from_env()
        self.jvm = JvmOptions(
            heap=heap,
            fast_jit=env_jvm.fast_jit if fast_jit is None else fast_jit,
            extra=tuple(jvm_args),
        )
        self.kafka_version = kafka_version
        self.startup_timeout = startup_timeout
        self._lock = threading.RLock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._last_returncode: int | None = None
        self._log_offset = 0
        #: Seconds the last :meth:`start` took until the started log line.
        self.last_startup_seconds: float | None = None

    # -- files --------------------------------------------------------------------------------

    @property
    def log_path(self) -> Path:
        """MM2's log: the JVM's stdout and stderr (Log4j 2 INFO)."""
        return self.work_dir / "mm2.log"

    @property
    def log4j_path(self) -> Path:
        return self.work_dir / "mm2-log4j2.properties"

    @property
    def properties(self) -> dict[str, str]:
        """The MM2 configuration this process runs with."""
        if self._properties is not None:
            return dict(self._properties)
        with self.properties_path.open(encoding="utf-8") as fh:
            return dict(javaproperties.load(fh))

    def command(self) -> list[str]:
        """The full ``java`` command line."""
        cmd = [
            java_executable(), *self.jvm.args(),
            f"-Dlog4j2.configurationFile={self.log4j_path}",
            "-cp", kafka_classpath(self.kafka_version),
            MM2_MAIN_CLASS, str(self.properties_path),
        ]  # fmt: skip
        if self.clusters:
            cmd += ["--clusters", *self.clusters]
        return cmd

    def _write_files(self) -> None:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        if self._properties is not None:
            self.properties_path.write_text(render_properties(self._properties), encoding="utf-8")
        elif not self.properties_path.is_file():
            raise TestClusterError(
                f"MirrorMaker 2 properties file {self.properties_path} not found"
            )
        self.log4j_path.write_text(MM2_LOG4J2_PROPERTIES, encoding="utf-8")

    def _note(self, line: str) -> None:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("a", encoding="utf-8") as fh:
            fh.write(f"[mirrorlib.testing {time.strftime('%H:%M:%S')}] {line}\n")

    # -- state --------------------------------------------------------------------------------

    @property
    def pid(self) -> int | None:
        """Process id of the JVM while it runs."""
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    @property
    def is_running(self) -> bool:
        return self.pid is not None

    @property
    def returncode(self) -> int | None:
        """The exit code once the process ended (MM2: 3 = start failed, 2 = fatal error)."""
        proc = self._proc
        return self._last_returncode if proc is None else proc.poll()

    def log_tail(self, lines: int = 50) -> str:
        """The last ``lines`` lines of :attr:`log_path` ("" if there is none yet)."""
        return tail_file(self.log_path, lines)

    def log_since_start(self) -> str:
        """Everything logged since the last :meth:`start`."""
        try:
            with self.log_path.open("rb") as fh:
                fh.seek(self._log_offset)
                return fh.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def _fail(self, message: str, lines: int = 60) -> TestClusterError:
        return TestClusterError(
            f"MirrorMaker 2: {message}\nwork dir: {self.work_dir}\n"
            f"--- last {lines} lines of {self.log_path} ---\n{self.log_tail(lines)}"
        )

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self, timeout: float | None = None) -> Self:
        """Launch the JVM and wait for ``Kafka MirrorMaker started``. No-op if running.

        Raises :class:`TestClusterError` (with the tail of the log) if the process exits or the
        line does not appear within ``timeout`` seconds; the process is then killed.
        """
        with self._lock:
            if self.is_running:
                return self
            deadline = time.monotonic() + (timeout or self.startup_timeout)
            self._write_files()
            cmd = self.command()
            self._note("starting MirrorMaker 2: " + " ".join(cmd))
            self._log_offset = self.log_path.stat().st_size
            t0 = time.monotonic()
            self._last_returncode = None
            with self.log_path.open("ab") as out:
                self._proc = subprocess.Popen(
                    cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                    cwd=self.work_dir,
                )  # fmt: skip
            _live.add(self)
            try:
                while MM2_STARTED_MESSAGE not in self.log_since_start():
                    code = self._proc.poll()
                    if code is not None:
                        raise self._fail(f"exited with code {code} during startup")
                    if time.monotonic() > deadline:
                        raise self._fail(f"no {MM2_STARTED_MESSAGE!r} log line in time")
                    time.sleep(0.1)
            except BaseException:
                self._terminate(force=True)
                raise
            self.last_startup_seconds = time.monotonic() - t0
            self._note(f"MirrorMaker 2 started in {self.last_startup_seconds:.1f}s")
            return self

    def wait_until(
        self,
        predicate: Callable[[], Any],
        timeout: float = 60.0,
        *,
        interval: float = 0.5,
        message: str | None = None,
    ) -> Any:
        """Poll ``predicate`` until it returns something truthy, and return that.

        An exception from ``predicate`` counts as "not yet"; the last exception or falsy result is
        reported if time runs out.
        Raises :class:`TestClusterError` with the log tail if MM2 exits meanwhile or ``timeout``
        seconds pass.
        """
        deadline = time.monotonic() + timeout
        last_error: BaseException | None = None
        last_result: Any = None
        what = message or getattr(predicate, "__name__", "condition")
        while True:
            try:
                result = predicate()
            except Exception as exc:
                last_error = exc
            else:
                if result:
                    return result
                last_error, last_result = None, result
            code = self.returncode
            if code is not None:
                raise self._fail(f"exited with code {code} while waiting for {what}")
            if time.monotonic() >= deadline:
                detail = (
                    f" (last error: {type(last_error).__name__}: {last_error})"
                    if last_error
                    else f" (last result: {last_result!r:.2000})"
                )
                raise self._fail(f"timed out after {timeout:g}s waiting for {what}{detail}")
            time.sleep(interval)

    def _terminate(self, *, force: bool, timeout: float = 30.0) -> None:
        proc = self._proc
        if proc is None:
            return
        self._last_returncode = terminate(
            proc, force=force, timeout=timeout, note=self._note, what="MirrorMaker 2"
        )
        self._proc = None
        _live.discard(self)

    def stop(self, timeout: float = 30.0) -> None:
        """Graceful stop: SIGTERM, wait up to ``timeout`` s, then SIGKILL. Idempotent."""
        with self._lock:
            if self.is_running:
                self._note("stopping MirrorMaker 2 (SIGTERM)")
            self._terminate(force=False, timeout=timeout)

    def kill(self) -> None:
        """SIGKILL (a crash: no offset flush, no graceful shutdown). Idempotent."""
        with self._lock:
            if self.is_running:
                self._note("killing MirrorMaker 2 (SIGKILL)")
            self._terminate(force=True)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = f"pid {self.pid}" if self.is_running else "stopped"
        return f"<RealMirrorMaker {self.work_dir} {state}>"
