"""Real single-node KRaft Kafka clusters in local JVM processes, and handles on external ones."""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import uuid
import weakref
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Self, TypedDict, Unpack, overload

from mirrorlib.errors import TestClusterError
from mirrorlib.testing import config as _cfg
from mirrorlib.testing.config import ADMIN_PASSWORD, ADMIN_USER, JvmOptions
from mirrorlib.testing.jars import KAFKA_VERSION, java_executable, kafka_classpath
from mirrorlib.testing.process import tail_file, terminate
from mirrorlib.testing.proxy import NetworkLink, Route
from mirrorlib.testing.tls import TlsFiles

__all__ = [
    "BaseCluster",
    "ClusterFactory",
    "ClusterOptions",
    "ClusterSet",
    "ExternalCluster",
    "KafkaCluster",
    "KafkaNode",
    "default_aliases",
    "start_clusters",
]

STARTED_MESSAGE = "Kafka Server started"
_QUIET = {"log_level": "0"}  # librdkafka: no connection-refused noise while probing


def _rdkafka(conf: Mapping[str, str]) -> dict[str, str | int | float | bool]:
    return dict(conf)


def default_aliases(n: int) -> tuple[str, ...]:
    """``("A", "B", ...)`` for ``n`` clusters (``A``..``Z``, then ``C26``, ``C27``...)."""
    if n < 1:
        raise TestClusterError(f"need at least one cluster, got {n}")
    return tuple(chr(ord("A") + i) if i < 26 else f"C{i}" for i in range(n))


def _aliases(n_or_aliases: int | Iterable[str]) -> tuple[str, ...]:
    if isinstance(n_or_aliases, int):
        return default_aliases(n_or_aliases)
    aliases = tuple(n_or_aliases)
    if not aliases:
        raise TestClusterError("need at least one cluster alias")
    if len(set(aliases)) != len(aliases):
        raise TestClusterError(f"duplicate cluster aliases: {aliases}")
    return aliases


class BaseCluster:
    """What a test needs from a cluster, whether mirrorlib started it or not.

    Client configuration helpers return fresh dicts; the ``admin_client`` / ``produce`` /
    ``consume`` helpers are small conveniences for tests, with timeouts.
    """

    __test__ = False
    #: ``True`` for clusters this process started (they can be restarted and killed).
    managed: bool = False

    def __init__(
        self,
        alias: str,
        *,
        acl: bool = False,
        users: Mapping[str, str] | None = None,
        tls: TlsFiles | None = None,
        client_auth: bool = False,
    ) -> None:
        if client_auth and tls is None:
            raise TestClusterError(f"cluster {alias}: client_auth=True needs tls=True")
        self.alias = alias
        self.acl = acl
        self.users: dict[str, str] = dict(users or {})
        #: The certificates of a cluster whose client listener is TLS (``None``: plaintext).
        self.tls = tls
        #: ``True`` when the brokers require client certificates (mutual TLS).
        self.client_auth = client_auth

    @property
    def security_protocol(self) -> str:
        """``PLAINTEXT``, ``SSL``, ``SASL_PLAINTEXT`` or ``SASL_SSL``."""
        return ("SASL_" if self.acl else "") + ("SSL" if self.tls else "PLAINTEXT")

    @property
    def bootstrap_servers(self) -> str:
        raise NotImplementedError

    @property
    def replication_factor(self) -> int:
        """The replication factor :meth:`create_topic` uses by default."""
        return 1

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.alias} {self.bootstrap_servers}>"

    # -- client configuration -------------------------------------------------------------

    def _credentials(self, user: str | None) -> tuple[str, str]:
        name = user or ADMIN_USER
        if name == ADMIN_USER:
            return name, ADMIN_PASSWORD
        try:
            return name, self.users[name]
        except KeyError:
            raise TestClusterError(
                f"cluster {self.alias} has no user {name!r} (known: "
                f"{', '.join([ADMIN_USER, *self.users])})"
            ) from None

    def client_config(
        self, user: str | None = None, extra: Mapping[str, str] | None = None
    ) -> dict[str, str]:
        """librdkafka (confluent_kafka) settings to reach this cluster.

        On ACL clusters this includes the SASL/PLAIN settings of ``user`` (default: the
        ``admin`` super user); on TLS clusters the CA file (``ssl.ca.location``) and, if the
        brokers require client certificates, the client's PEM certificate and key. ``extra`` is
        merged last.
        """
        conf = {"bootstrap.servers": self.bootstrap_servers}
        if self.security_protocol != "PLAINTEXT":
            conf["security.protocol"] = self.security_protocol
        if self.tls is not None:
            conf["ssl.ca.location"] = str(self.tls.ca)
            if self.client_auth:
                conf["ssl.certificate.location"] = str(self.tls.client.certificate)
                conf["ssl.key.location"] = str(self.tls.client.key)
        if self.acl:
            name, password = self._credentials(user)
            conf.update(
                {
                    "sasl.mechanism": "PLAIN",
                    "sasl.username": name,
                    "sasl.password": password,
                }
            )
        elif user is not None:
            raise TestClusterError(
                f"cluster {self.alias} has no users (it was started without acl)"
            )
        conf.update(extra or {})
        return conf

    def admin_client_config(
        self, user: str | None = None, extra: Mapping[str, str] | None = None
    ) -> dict[str, str]:
        """Like :meth:`client_config`, for an ``AdminClient`` (short socket/request timeouts)."""
        conf = self.client_config(user)
        conf.setdefault("socket.timeout.ms", "10000")
        conf.update(extra or {})
        return conf

    def java_client_config(
        self, user: str | None = None, *, keystore_type: Literal["PEM", "PKCS12"] = "PEM"
    ) -> dict[str, str]:
        """Java client settings (e.g. for MirrorMaker 2 ``<alias>.`` properties).

        On TLS clusters these are what an MM2 user writes: a PEM truststore
        (``ssl.truststore.type=PEM``, the CA file) and, if the brokers require client
        certificates, a keystore of ``keystore_type``: one PEM file with the key and the
        certificate, or a PKCS#12 file with its password.
        """
        conf = {"bootstrap.servers": self.bootstrap_servers}
        if self.security_protocol != "PLAINTEXT":
            conf["security.protocol"] = self.security_protocol
        if self.tls is not None:
            conf["ssl.truststore.type"] = "PEM"
            conf["ssl.truststore.location"] = str(self.tls.ca)
            if self.client_auth and keystore_type == "PEM":
                conf["ssl.keystore.type"] = "PEM"
                conf["ssl.keystore.location"] = str(self.tls.client.bundle)
            elif self.client_auth:
                conf["ssl.keystore.type"] = "PKCS12"
                conf["ssl.keystore.location"] = str(self.tls.client_keystore)
                conf["ssl.keystore.password"] = self.tls.password
        if self.acl:
            name, password = self._credentials(user)
            conf.update(
                {
                    "sasl.mechanism": "PLAIN",
                    "sasl.jaas.config": _cfg.jaas_config(name, password),
                }
            )
        return conf

    # -- small client helpers -------------------------------------------------------------

    def admin_client(self, user: str | None = None) -> Any:
        """A ``confluent_kafka.admin.AdminClient`` for ``user`` (default: super user)."""
        from confluent_kafka.admin import AdminClient

        return AdminClient(_rdkafka(self.admin_client_config(user, {"log_level": "3"})))

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        *,
        config: Mapping[str, str] | None = None,
        user: str | None = None,
        timeout: float = 30.0,
        replication_factor: int | None = None,
    ) -> None:
        """Create a topic and wait until its metadata is visible.

        The replication factor is :attr:`replication_factor` unless given: 1 on single-node
        clusters, ``min(3, nodes)`` on multi-node ones.
        """
        from confluent_kafka.cimpl import NewTopic

        admin = self.admin_client(user)
        rf = self.replication_factor if replication_factor is None else replication_factor
        topic = NewTopic(
            name, num_partitions=partitions, replication_factor=rf, config=dict(config or {})
        )
        futures = admin.create_topics([topic], request_timeout=timeout, operation_timeout=timeout)
        futures[name].result(timeout=timeout)
        deadline = time.monotonic() + timeout
        while name not in self.topic_names(user=user, timeout=timeout):
            if time.monotonic() > deadline:
                raise TestClusterError(f"topic {name} not visible on {self.alias} after {timeout}s")
            time.sleep(0.1)

    def topic_names(self, *, user: str | None = None, timeout: float = 30.0) -> set[str]:
        """Names of the topics visible to ``user`` (including internal ones)."""
        metadata = self.admin_client(user).list_topics(timeout=timeout)
        return set(metadata.topics)

    def produce(
        self,
        topic: str,
        values: Iterable[bytes | str],
        *,
        key: bytes | str | None = None,
        partition: int | None = None,
        user: str | None = None,
        timeout: float = 30.0,
    ) -> None:
        """Produce ``values`` (``acks=all``) and flush; raises on any delivery error."""
        from confluent_kafka import KafkaException, Producer

        producer = Producer(
            self.client_config(
                user, {"acks": "all", "message.timeout.ms": str(int(timeout * 1000)), **_QUIET}
            )
        )
        errors: list[str] = []

        def on_delivery(err: Any, _msg: Any) -> None:
            if err is not None:
                errors.append(str(err))

        for value in values:
            kwargs: dict[str, Any] = {"value": value, "key": key, "on_delivery": on_delivery}
            if partition is not None:
                kwargs["partition"] = partition
            try:
                producer.produce(topic, **kwargs)
            except BufferError:
                producer.poll(0.5)
                producer.produce(topic, **kwargs)
            except KafkaException as exc:
                raise TestClusterError(f"produce to {topic} on {self.alias} failed: {exc}") from exc
        remaining = producer.flush(timeout)
        if remaining or errors:
            raise TestClusterError(
                f"produce to {topic} on {self.alias} failed: "
                f"{remaining} undelivered, errors: {errors[:3]}"
            )

    def consume(
        self,
        topic: str,
        count: int,
        *,
        user: str | None = None,
        group: str | None = None,
        timeout: float = 30.0,
    ) -> list[Any]:
        """Read ``count`` messages of ``topic`` from the beginning (all partitions).

        Without ``group`` the partitions are assigned directly (no group join, no commits);
        with ``group`` the consumer subscribes as a member of that group (and needs the group
        ACLs on ACL clusters), still without committing. Returns ``confluent_kafka.Message``
        objects; raises :class:`TestClusterError` if fewer arrive within ``timeout`` or on an
        error (e.g. an authorization failure).
        """
        from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

        consumer = Consumer(
            self.client_config(
                user,
                {
                    "group.id": group or f"__mirrorlib_reader_{uuid.uuid4().hex[:8]}",
                    "auto.offset.reset": "earliest",
                    "enable.auto.commit": "false",
                    "enable.partition.eof": "false",
                    **_QUIET,
                },
            )
        )
        messages: list[Any] = []
        deadline = time.monotonic() + timeout
        try:
            if group is None:
                metadata = consumer.list_topics(topic, timeout=timeout)
                info = metadata.topics.get(topic)
                if info is None or info.error is not None:
                    reason = info.error if info is not None else "unknown topic"
                    raise TestClusterError(f"cannot read {topic} on {self.alias}: {reason}")
                consumer.assign(
                    [TopicPartition(topic, p, -2) for p in sorted(info.partitions)]  # beginning
                )
            else:
                consumer.subscribe([topic])
            while len(messages) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TestClusterError(
                        f"consumed {len(messages)} of {count} messages from {topic} on "
                        f"{self.alias} within {timeout}s"
                    )
                msg = consumer.poll(min(left, 1.0))
                if msg is None:
                    continue
                err = msg.error()
                if err is not None:
                    if err.retriable() or (
                        group is None and err.code() == KafkaError.GROUP_AUTHORIZATION_FAILED
                    ):
                        continue
                    raise TestClusterError(f"consume from {topic} on {self.alias} failed: {err}")
                messages.append(msg)
        except KafkaException as exc:
            raise TestClusterError(f"consume from {topic} on {self.alias} failed: {exc}") from exc
        finally:
            consumer.close()
        return messages

    # -- lifecycle (no-ops or errors for clusters not started here) -----------------------

    def start(self, timeout: float | None = None) -> Self:
        return self

    def stop(self, timeout: float = 30.0) -> None:
        return None

    def restart(self, timeout: float | None = None) -> Self:
        raise TestClusterError(f"cluster {self.alias} was not started by mirrorlib; cannot restart")

    def kill(self) -> None:
        raise TestClusterError(f"cluster {self.alias} was not started by mirrorlib; cannot kill")

    def freeze(self) -> None:
        raise TestClusterError(f"cluster {self.alias} was not started by mirrorlib; cannot freeze")

    def thaw(self) -> None:
        raise TestClusterError(f"cluster {self.alias} was not started by mirrorlib; cannot thaw")

    def log_tail(self, lines: int = 50) -> str:
        return ""

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class ExternalCluster(BaseCluster):
    """A cluster someone else runs (``MIRRORLIB_TEST_CLUSTERS``); cannot be restarted or killed.

    ``client_extra`` is merged into every :meth:`client_config` (e.g. security settings).
    """

    def __init__(
        self, alias: str, bootstrap_servers: str, client_extra: Mapping[str, str] | None = None
    ) -> None:
        super().__init__(alias)
        self._bootstrap = bootstrap_servers
        self.client_extra = dict(client_extra or {})

    @property
    def bootstrap_servers(self) -> str:
        return self._bootstrap

    def client_config(
        self, user: str | None = None, extra: Mapping[str, str] | None = None
    ) -> dict[str, str]:
        if user is not None:
            raise TestClusterError(f"external cluster {self.alias} has no mirrorlib users")
        return {"bootstrap.servers": self._bootstrap, **self.client_extra, **(extra or {})}

    def java_client_config(
        self, user: str | None = None, *, keystore_type: Literal["PEM", "PKCS12"] = "PEM"
    ) -> dict[str, str]:
        return self.client_config(user)


_live: weakref.WeakSet[KafkaCluster] = weakref.WeakSet()


@atexit.register
def _stop_leftovers() -> None:  # pragma: no cover - interpreter shutdown
    for cluster in list(_live):
        with contextlib.suppress(Exception):
            cluster.stop(timeout=10.0)


_SSL_KEYS = ("ssl.ca.location", "ssl.certificate.location", "ssl.key.location")


class KafkaNode:
    """One node of a :class:`KafkaCluster`: a combined broker+controller in its own JVM.

    Its ports (client, controller and, in multi-node or proxied clusters, the inter-broker
    ``INTERNAL`` listener) are chosen once and kept across restarts, like its data. A
    single-node cluster's node lives in the cluster's work dir; node ``n`` of a multi-node
    cluster in ``<work_dir>/node-<n>/``.
    """

    __test__ = False

    def __init__(self, cluster: KafkaCluster, node_id: int, work_dir: Path) -> None:
        self._cluster = cluster
        self.node_id = node_id
        self.work_dir = work_dir
        self._lock = threading.RLock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._formatted = False
        self._frozen = False
        self._log_offset = 0
        self.port = 0
        self.controller_port = 0
        self.internal_port: int | None = None
        self.proxy_port: int | None = None

    def _allocate_ports(self, internal: bool, proxy: bool) -> None:
        self.port = _cfg.free_port()
        self.controller_port = _cfg.free_port()
        self.internal_port = _cfg.free_port() if internal else None
        self.proxy_port = _cfg.free_port() if proxy else None

    def __repr__(self) -> str:
        state = "frozen" if self.is_frozen else f"pid {self.pid}" if self.is_running else "stopped"
        return f"<KafkaNode {self._cluster.alias}/{self.node_id} {self.address} {state}>"

    # -- addresses, paths and config ------------------------------------------------------

    @property
    def address(self) -> str:
        """``host:port`` clients are told for this node (the proxy's port on proxied clusters)."""
        return f"{_cfg.HOST}:{self.proxy_port or self.port}"

    @property
    def direct_address(self) -> str:
        """``host:port`` that reaches the broker without the proxy (its inter-broker listener
        when it has one)."""
        return f"{_cfg.HOST}:{self.internal_port or self.port}"

    @property
    def data_dir(self) -> Path:
        return self.work_dir / "data"

    @property
    def log_path(self) -> Path:
        """The node's log file (stdout+stderr of the format step and of the broker JVM)."""
        return self.work_dir / "broker.log"

    @property
    def properties_path(self) -> Path:
        return self.work_dir / "server.properties"

    def server_properties(self) -> dict[str, str]:
        """The broker configuration this node runs with."""
        cluster = self._cluster
        tls = cluster.tls
        return _cfg.broker_properties(
            client_port=self.port,
            controller_port=self.controller_port,
            log_dir=str(self.data_dir),
            node_id=self.node_id,
            acl=cluster.acl,
            users=cluster.users,
            tls=None if tls is None else _cfg.BrokerTls(
                keystore=str(tls.broker_keystore),
                truststore=str(tls.broker_truststore),
                password=tls.password,
                client_auth=cluster.client_auth,
            ),
            overrides=cluster.overrides,
            voters=(
                {n.node_id: n.controller_port for n in cluster.nodes}
                if len(cluster.nodes) > 1 else None
            ),
            internal_port=self.internal_port,
            advertised_port=self.proxy_port,
        )  # fmt: skip

    # -- state ------------------------------------------------------------------------------

    @property
    def pid(self) -> int | None:
        """Process id of the JVM while it runs (also while frozen)."""
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    @property
    def is_running(self) -> bool:
        """Whether the JVM process exists (a frozen node counts as running)."""
        return self.pid is not None

    @property
    def is_frozen(self) -> bool:
        """Whether the node is stopped with SIGSTOP (:meth:`freeze`)."""
        return self._frozen and self.is_running

    def log_tail(self, lines: int = 50) -> str:
        """The last ``lines`` lines of :attr:`log_path` ("" if there is none yet)."""
        return tail_file(self.log_path, lines)

    def _fail(self, message: str, lines: int = 40) -> TestClusterError:
        cluster = self._cluster
        where = cluster.alias if len(cluster.nodes) == 1 else f"{cluster.alias} node {self.node_id}"
        return TestClusterError(
            f"Kafka cluster {where} ({self.address}): {message}\n"
            f"work dir: {self.work_dir}\n--- last {lines} lines of {self.log_path} ---\n"
            f"{self.log_tail(lines)}"
        )

    def _log(self, line: str) -> None:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("a", encoding="utf-8") as fh:
            fh.write(f"[mirrorlib.testing {time.strftime('%H:%M:%S')}] {line}\n")

    # -- process steps --------------------------------------------------------------------

    def _write_files(self) -> None:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.properties_path.write_text(
            _cfg.render_properties(self.server_properties()), encoding="utf-8"
        )
        (self.work_dir / "log4j2.properties").write_text(_cfg.LOG4J2_PROPERTIES, encoding="utf-8")

    def _format(self, java: str, classpath: str, deadline: float) -> None:
        cmd = [
            java, "-Xmx256m", "-XX:TieredStopAtLevel=1", "-Xshare:auto",
            f"-Dlog4j2.configurationFile={self.work_dir / 'log4j2.properties'}",
            "-cp", classpath, "kafka.tools.StorageTool", "format",
            "--config", str(self.properties_path),
            "--cluster-id", self._cluster.cluster_id, "--ignore-formatted",
        ]  # fmt: skip
        self._log("formatting storage: " + " ".join(cmd[-7:]))
        try:
            with self.log_path.open("ab") as out:
                proc = subprocess.run(
                    cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                    timeout=max(1.0, deadline - time.monotonic()), check=False,
                )  # fmt: skip
        except subprocess.TimeoutExpired:
            raise self._fail("storage format timed out") from None
        if proc.returncode != 0:
            raise self._fail(f"storage format failed (StorageTool exit {proc.returncode})")
        self._formatted = True

    def _launch(self, java: str, classpath: str) -> None:
        cmd = [
            java, *self._cluster.jvm.args(),
            f"-Dlog4j2.configurationFile={self.work_dir / 'log4j2.properties'}",
            f"-Dkafka.logs.dir={self.work_dir / 'logs'}",
            "-cp", classpath, "kafka.Kafka", str(self.properties_path),
        ]  # fmt: skip
        self._log("starting broker: " + " ".join(cmd))
        self._log_offset = self.log_path.stat().st_size
        with self.log_path.open("ab") as out:
            self._proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                cwd=self.work_dir,
            )  # fmt: skip
        self._frozen = False

    def _log_since_launch(self) -> str:
        try:
            with self.log_path.open("rb") as fh:
                fh.seek(self._log_offset)
                return fh.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def _wait_started(self, deadline: float) -> None:
        proc = self._proc
        assert proc is not None
        while STARTED_MESSAGE not in self._log_since_launch():
            if proc.poll() is not None:
                raise self._fail(f"broker exited with code {proc.returncode} during startup")
            if time.monotonic() > deadline:
                raise self._fail(f"no {STARTED_MESSAGE!r} log line in time")
            time.sleep(0.1)

    def _prepare(self, java: str, classpath: str, deadline: float) -> None:
        """Write the files, format (the first time) and launch the JVM."""
        self._write_files()
        if not self._formatted:
            self._format(java, classpath, deadline)
        self._launch(java, classpath)

    def _terminate(self, *, force: bool, timeout: float = 30.0) -> None:
        proc = self._proc
        if proc is None:
            return
        if self._frozen and proc.poll() is None:
            if not force:  # a stopped JVM handles SIGTERM only once it runs again
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGTERM)
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGCONT)
        terminate(proc, force=force, timeout=timeout, note=self._log, what="broker")
        self._proc = None
        self._frozen = False

    # -- lifecycle --------------------------------------------------------------------------

    def start(self, timeout: float | None = None) -> KafkaNode:
        """Start this node and wait until it is registered with the cluster's controllers.

        Ready means the ``Kafka Server started`` log line (the broker was unfenced) and the
        node listed by ``describe_cluster`` (asked without the proxy). A frozen node is thawed.
        Starting one node of a cluster whose other nodes all stopped needs a controller quorum:
        use :meth:`KafkaCluster.start` for that.
        """
        with self._lock:
            if self.is_running:
                self.thaw()
                return self
            cluster = self._cluster
            deadline = time.monotonic() + (timeout or cluster.startup_timeout)
            try:
                self._prepare(java_executable(), kafka_classpath(cluster.kafka_version), deadline)
                self._wait_started(deadline)
                _live.add(cluster)
                cluster._wait_registered({self.node_id}, deadline)
            except BaseException:
                self._terminate(force=True)
                raise
            self._log(f"node {self.node_id} ready")
            return self

    def stop(self, timeout: float = 30.0) -> None:
        """Controlled shutdown: SIGTERM, wait up to ``timeout`` s, then SIGKILL. Idempotent."""
        with self._lock:
            if self._proc is not None:
                self._log("stopping broker (SIGTERM)")
            self._terminate(force=False, timeout=timeout)

    def kill(self) -> None:
        """SIGKILL the node (a crash: no controlled shutdown). :meth:`start` recovers it."""
        with self._lock:
            if self._proc is not None:
                self._log("killing broker (SIGKILL)")
            self._terminate(force=True)

    def restart(self, timeout: float | None = None) -> KafkaNode:
        """Stop (if running) and start again: same ports and data."""
        with self._lock:
            self.stop()
            return self.start(timeout)

    def freeze(self) -> None:
        """SIGSTOP the JVM: its sockets stay open, nothing answers (a hung broker)."""
        with self._lock:
            pid = self.pid
            if pid is None:
                raise TestClusterError(f"{self!r} is not running; cannot freeze it")
            if not self._frozen:
                self._log("freezing broker (SIGSTOP)")
                os.kill(pid, signal.SIGSTOP)
                self._frozen = True

    def thaw(self) -> None:
        """SIGCONT a frozen JVM (no-op otherwise)."""
        with self._lock:
            pid = self.pid
            if self._frozen and pid is not None:
                self._log("thawing broker (SIGCONT)")
                os.kill(pid, signal.SIGCONT)
            self._frozen = False


class KafkaCluster(BaseCluster):
    """A local KRaft Kafka cluster of ``nodes`` combined broker+controller nodes, each in its
    own JVM (one node by default).

    Ports (on 127.0.0.1) are chosen at construction and kept across :meth:`restart`; so are the
    cluster id and the data. A single-node cluster keeps everything in ``work_dir``:
    ``server.properties``, ``log4j2.properties``, ``data/`` and ``broker.log`` (the JVM's
    stdout/stderr, including the storage format step); node ``n`` of a multi-node cluster the
    same in ``work_dir/node-<n>/``. ``nodes`` >= 2 get a quorum of all nodes, a separate
    inter-broker listener and RF ``min(3, nodes)`` (min ISR 2 from three nodes on) for topics
    and internal topics. ``proxy=True`` puts a :class:`~mirrorlib.testing.proxy.NetworkLink`
    between clients and every node (:attr:`link`).

    Use as a context manager, or call :meth:`start` / :meth:`stop`. Processes still running at
    interpreter exit are stopped.
    """

    managed = True

    def __init__(
        self,
        alias: str,
        work_dir: str | os.PathLike[str],
        *,
        acl: bool = False,
        users: Mapping[str, str] | None = None,
        tls: bool = False,
        client_auth: bool = False,
        overrides: Mapping[str, str] | None = None,
        jvm: JvmOptions | None = None,
        kafka_version: str = KAFKA_VERSION,
        startup_timeout: float = 120.0,
        ready_probe: bool = True,
        nodes: int = 1,
        proxy: bool = False,
    ) -> None:
        if not isinstance(nodes, int) or nodes < 1:
            raise TestClusterError(f"cluster {alias}: nodes must be a positive int, got {nodes!r}")
        files = TlsFiles(Path(work_dir) / "tls") if tls else None
        super().__init__(alias, acl=acl, users=users, tls=files, client_auth=client_auth)
        self.work_dir = Path(work_dir)
        self.overrides: dict[str, str] = dict(overrides or {})
        self.jvm = jvm if jvm is not None else JvmOptions.from_env()
        self.kafka_version = kafka_version
        self.startup_timeout = startup_timeout
        self.ready_probe = ready_probe
        self.proxy = proxy
        self.cluster_id = _cfg.new_cluster_id()
        self._lock = threading.RLock()
        self._started_once = False
        #: Seconds the last successful :meth:`start` took (format + brokers + readiness).
        self.last_startup_seconds: float | None = None
        #: The nodes, by node id (1, 2, ...).
        self.nodes: tuple[KafkaNode, ...] = tuple(
            KafkaNode(self, i, self.work_dir if nodes == 1 else self.work_dir / f"node-{i}")
            for i in range(1, nodes + 1)
        )
        self._link: NetworkLink | None = None
        self._allocate_ports()
        # validate early (e.g. users without acl) - raises TestClusterError
        self.server_properties()

    @property
    def _internal(self) -> bool:
        return len(self.nodes) > 1 or self.proxy

    def _allocate_ports(self) -> None:
        for node in self.nodes:
            node._allocate_ports(self._internal, self.proxy)
        if self.proxy:
            self._link = NetworkLink(
                [Route((_cfg.HOST, n.proxy_port or 0), (_cfg.HOST, n.port)) for n in self.nodes],
                name=self.alias,
            )

    # -- nodes ------------------------------------------------------------------------------

    def node(self, node_id: int) -> KafkaNode:
        """The node with ``node_id`` (1, 2, ...)."""
        for node in self.nodes:
            if node.node_id == node_id:
                return node
        raise TestClusterError(f"cluster {self.alias} has no node {node_id}")

    @property
    def link(self) -> NetworkLink:
        """The network between clients and this cluster (``proxy=True`` clusters only)."""
        if self._link is None:
            raise TestClusterError(f"cluster {self.alias} has no proxy (start it with proxy=True)")
        return self._link

    @property
    def replication_factor(self) -> int:
        return min(3, len(self.nodes))

    def _direct_admin(self) -> Any:
        from confluent_kafka.admin import AdminClient

        return AdminClient(_rdkafka(self.direct_client_config(extra={
            "socket.timeout.ms": "10000", **_QUIET,
        })))  # fmt: skip

    def _partition(self, topic: str, partition: int, timeout: float) -> Any:
        md = self._direct_admin().list_topics(topic, timeout=timeout)
        info = md.topics.get(topic)
        if info is None or info.error is not None:
            reason = info.error if info is not None else "unknown topic"
            raise TestClusterError(f"no metadata for {topic} on {self.alias}: {reason}")
        if partition not in info.partitions:
            raise TestClusterError(f"{topic} on {self.alias} has no partition {partition}")
        return info.partitions[partition]

    def leader(self, topic: str, partition: int = 0, *, timeout: float = 30.0) -> KafkaNode:
        """The node leading ``topic``-``partition`` now (fresh metadata from a new client,
        without the proxy); waits up to ``timeout`` while the partition has no leader."""
        deadline = time.monotonic() + timeout
        while True:
            leader = self._partition(topic, partition, timeout).leader
            if leader >= 0:
                return self.node(leader)
            if time.monotonic() > deadline:
                raise TestClusterError(f"{topic}-{partition} on {self.alias} has no leader")
            time.sleep(0.2)

    def isr(self, topic: str, partition: int = 0, *, timeout: float = 30.0) -> tuple[int, ...]:
        """The node ids of ``topic``-``partition``'s in-sync replicas (fresh metadata)."""
        return tuple(sorted(self._partition(topic, partition, timeout).isrs))

    def wait_in_sync(self, topic: str, *, timeout: float = 60.0) -> None:
        """Wait until every replica of every partition of ``topic`` is in sync."""
        deadline = time.monotonic() + timeout
        last: object = None
        while time.monotonic() < deadline:
            try:
                md = self._direct_admin().list_topics(topic, timeout=10)
                parts = md.topics[topic].partitions.values()
                last = {p.id: (sorted(p.replicas), sorted(p.isrs)) for p in parts}
                if parts and all(sorted(p.replicas) == sorted(p.isrs) for p in parts):
                    return
            except Exception as exc:
                last = exc
            time.sleep(0.3)
        raise TestClusterError(
            f"{topic} on {self.alias} not in sync within {timeout:g}s "
            f"(partition: (replicas, isr)): {last}"
        )

    # -- addresses, paths and config --------------------------------------------------------

    @property
    def port(self) -> int:
        """The client port of the first node (what the brokers bind, not the proxy's)."""
        return self.nodes[0].port

    @property
    def controller_port(self) -> int:
        return self.nodes[0].controller_port

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(n.address for n in self.nodes)

    @property
    def direct_bootstrap_servers(self) -> str:
        """Addresses that reach the brokers without the proxy (see :meth:`direct_client_config`)."""
        return ",".join(n.direct_address for n in self.nodes)

    def direct_client_config(
        self, user: str | None = None, extra: Mapping[str, str] | None = None
    ) -> dict[str, str]:
        """Like :meth:`BaseCluster.client_config`, but past the proxy: on multi-node and proxied
        clusters the brokers' inter-broker listener (no TLS; SASL with ``acl``), which a cut or
        a delay of :attr:`link` does not touch. For test set-up and checks during faults."""
        conf = self.client_config(user)
        if self._internal:
            conf["bootstrap.servers"] = self.direct_bootstrap_servers
            for key in _SSL_KEYS:
                conf.pop(key, None)
            if self.acl:
                conf["security.protocol"] = "SASL_PLAINTEXT"
            else:
                conf.pop("security.protocol", None)
        conf.update(extra or {})
        return conf

    @property
    def data_dir(self) -> Path:
        """The first node's data directory."""
        return self.nodes[0].data_dir

    @property
    def log_path(self) -> Path:
        """The first node's log file (each node has its own: ``node.log_path``)."""
        return self.nodes[0].log_path

    @property
    def properties_path(self) -> Path:
        return self.nodes[0].properties_path

    def server_properties(self) -> dict[str, str]:
        """The broker configuration of the first node (``node.server_properties()``)."""
        return self.nodes[0].server_properties()

    @property
    def pid(self) -> int | None:
        """Process id of the (first) node's JVM while it runs."""
        return self.nodes[0].pid

    @property
    def pids(self) -> tuple[int, ...]:
        """Process ids of the running nodes' JVMs."""
        return tuple(p for p in (n.pid for n in self.nodes) if p is not None)

    @property
    def is_running(self) -> bool:
        """Whether every node's JVM runs (frozen counts as running)."""
        return all(n.is_running for n in self.nodes)

    def log_tail(self, lines: int = 50) -> str:
        """The last ``lines`` lines of the log (of every node, each under a header)."""
        if len(self.nodes) == 1:
            return self.nodes[0].log_tail(lines)
        return "\n".join(
            f"--- node {n.node_id}: {n.log_path} ---\n{n.log_tail(lines)}" for n in self.nodes
        )

    def _fail(self, message: str, lines: int = 40) -> TestClusterError:
        if len(self.nodes) == 1:
            return self.nodes[0]._fail(message, lines)
        per_node = max(10, lines // len(self.nodes))
        return TestClusterError(
            f"Kafka cluster {self.alias} ({self.bootstrap_servers}): {message}\n"
            f"work dir: {self.work_dir}\n{self.log_tail(per_node)}"
        )

    def _log(self, line: str) -> None:
        for node in self.nodes:
            node._log(line)

    # -- lifecycle --------------------------------------------------------------------------

    def _wait_registered(self, node_ids: set[int], deadline: float) -> None:
        """Until ``describe_cluster`` (without the proxy) lists every node of ``node_ids``."""
        admin = self._direct_admin()
        last: object = None
        while True:
            for node_id in node_ids:
                if not self.node(node_id).is_running:
                    raise self.node(node_id)._fail("broker exited during startup")
            left = deadline - time.monotonic()
            if left <= 0:
                raise self._fail(
                    f"describe_cluster never listed nodes {sorted(node_ids)} (last: {last})"
                )
            try:
                result = admin.describe_cluster(request_timeout=min(5.0, left)).result(
                    timeout=min(6.0, left)
                )
                listed = {n.id for n in result.nodes}
                if node_ids <= listed:
                    return
                last = f"listed {sorted(listed)}"
            except Exception as exc:
                last = exc
            time.sleep(0.1)

    def _probe(self, deadline: float) -> None:
        """Create a throw-away topic (RF :attr:`replication_factor`), produce one record
        (``acks=all``), read it back, delete the topic."""
        topic = f"__mirrorlib_probe_{uuid.uuid4().hex[:10]}"
        group = "__mirrorlib_probe"
        timeout = max(1.0, deadline - time.monotonic())
        try:
            admin = self.admin_client()
            # FindCoordinator creates __consumer_offsets; start it now, do not wait for it
            admin.describe_consumer_groups([group], request_timeout=timeout)
            self.create_topic(topic, timeout=timeout)
            self.produce(topic, [b"probe"], timeout=timeout)
            self.consume(topic, 1, timeout=timeout)
            admin.delete_topics([topic], operation_timeout=timeout)[topic].result(timeout=timeout)
        except Exception as exc:
            raise self._fail(f"produce/consume readiness probe failed: {exc}") from exc

    def _start_all(self, java: str, classpath: str, deadline: float) -> None:
        launched = time.monotonic()
        if self.tls is not None:
            self.tls.create()
        if self._link is not None:
            self._link.start()
        errors = _parallel([lambda n=n: n._prepare(java, classpath, deadline) for n in self.nodes])
        if not errors:
            errors = _parallel([lambda n=n: n._wait_started(deadline) for n in self.nodes])
        if errors:
            raise errors[0]
        started = time.monotonic()
        self._wait_registered({n.node_id for n in self.nodes}, deadline)
        described = time.monotonic()
        if self.ready_probe:
            self._probe(deadline)
        self._log(
            f"startup phases: format+log line {started - launched:.1f}s, describe_cluster "
            f"{described - started:.1f}s, probe {time.monotonic() - described:.1f}s"
        )

    def start(self, timeout: float | None = None) -> Self:
        """Format storage (first time only), start the brokers and wait until they are ready.

        Ready means: the ``Kafka Server started`` log line of every node, ``describe_cluster``
        listing every node and (``ready_probe``) a produce (``acks=all``, RF
        :attr:`replication_factor`) + consume round trip. On failure the brokers are killed and
        :class:`TestClusterError` carries the tail of their logs. If some nodes run, only the
        others are started (and frozen ones thawed); no-op if all run.
        """
        with self._lock:
            if any(n.is_running for n in self.nodes):
                for node in self.nodes:
                    node.start(timeout)
                return self
            deadline = time.monotonic() + (timeout or self.startup_timeout)
            java = java_executable()
            classpath = kafka_classpath(self.kafka_version)
            attempts = 1 if self._started_once else 3
            t0 = time.monotonic()
            for attempt in range(1, attempts + 1):
                t0 = time.monotonic()
                try:
                    _live.add(self)
                    self._start_all(java, classpath, deadline)
                except TestClusterError as exc:
                    self._terminate(force=True)
                    taken = "Address already in use" in str(exc) or any(
                        "Address already in use" in n.log_tail(200) for n in self.nodes
                    )
                    if attempt < attempts and taken:
                        # a port was taken between probing and binding: fresh ports, fresh data
                        self._log("port taken by another process; retrying on new ports")
                        if self._link is not None:
                            self._link.stop()
                        for node in self.nodes:
                            shutil.rmtree(node.data_dir, ignore_errors=True)
                            node._formatted = False
                        self._allocate_ports()
                        continue
                    raise
                except BaseException:
                    self._terminate(force=True)
                    raise
                break
            self._started_once = True
            t2 = time.monotonic()
            self.last_startup_seconds = t2 - t0
            self._log(f"cluster ready on {self.bootstrap_servers} in {t2 - t0:.1f}s")
            return self

    def _terminate(self, *, force: bool, timeout: float = 30.0) -> None:
        _parallel([lambda n=n: n._terminate(force=force, timeout=timeout) for n in self.nodes])

    def stop(self, timeout: float = 30.0) -> None:
        """Controlled shutdown of every node (in parallel; SIGTERM, wait up to ``timeout`` s,
        then SIGKILL) and of the proxy. Idempotent."""
        with self._lock:
            _parallel([lambda n=n: n.stop(timeout) for n in self.nodes])
            if self._link is not None:
                self._link.stop()
            _live.discard(self)

    def kill(self) -> None:
        """SIGKILL every node (a crash: no controlled shutdown). :meth:`start` recovers it."""
        with self._lock:
            for node in self.nodes:
                node.kill()

    def restart(self, timeout: float | None = None) -> Self:
        """Stop (if running) and start again: same ports, cluster id and data."""
        with self._lock:
            self.stop()
            return self.start(timeout)

    def freeze(self) -> None:
        """SIGSTOP every node (the whole cluster hangs; connections stay open)."""
        for node in self.nodes:
            node.freeze()

    def thaw(self) -> None:
        """SIGCONT every frozen node."""
        for node in self.nodes:
            node.thaw()


class ClusterSet(Sequence[BaseCluster]):
    """An ordered group of clusters, indexable by position or alias; stops them all on exit."""

    def __init__(self, clusters: Iterable[BaseCluster]) -> None:
        self._clusters = tuple(clusters)

    @overload
    def __getitem__(self, key: int | str) -> BaseCluster: ...
    @overload
    def __getitem__(self, key: slice) -> Sequence[BaseCluster]: ...
    def __getitem__(self, key: int | str | slice) -> BaseCluster | Sequence[BaseCluster]:
        if isinstance(key, str):
            for cluster in self._clusters:
                if cluster.alias == key:
                    return cluster
            raise KeyError(key)
        return self._clusters[key]

    def __len__(self) -> int:
        return len(self._clusters)

    def __iter__(self) -> Iterator[BaseCluster]:
        return iter(self._clusters)

    def __repr__(self) -> str:
        return f"ClusterSet({list(self._clusters)!r})"

    @property
    def aliases(self) -> tuple[str, ...]:
        return tuple(c.alias for c in self._clusters)

    def stop(self) -> None:
        """Stop every cluster (in parallel)."""
        _parallel([c.stop for c in self._clusters])

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def _parallel(calls: Sequence[Any]) -> list[BaseException]:
    """Run the zero-argument ``calls`` in threads; return the exceptions raised (in order)."""
    if not calls:
        return []
    errors: list[BaseException] = []
    with ThreadPoolExecutor(max_workers=len(calls), thread_name_prefix="mirrorlib-kafka") as pool:
        futures = [pool.submit(call) for call in calls]
        for future in futures:
            exc = future.exception()
            if exc is not None:
                errors.append(exc)
    return errors


class ClusterOptions(TypedDict, total=False):
    """How clusters are made: the keyword arguments of :meth:`ClusterFactory.start`,
    :func:`start_clusters` and the ``kafka_clusters`` fixtures, every one optional.

    ``acl`` (``False``) / ``users`` (none): ACL-enforcing SASL clusters with these users (see
    :func:`~mirrorlib.testing.config.broker_properties`). ``tls`` (``False``): the client
    listener is TLS, with certificates made for each cluster
    (:class:`~mirrorlib.testing.tls.TlsFiles`); ``client_auth`` (``False``): the brokers also
    require client certificates (mutual TLS). ``overrides``: broker settings for every cluster;
    ``cluster_overrides``: per alias, applied after ``overrides``. ``nodes`` (1): nodes per
    cluster (three give RF 3, min ISR 2; see :class:`KafkaCluster`). ``proxy`` (``False``): a
    network-fault proxy between clients and each cluster (``cluster.link``).
    """

    acl: bool
    users: Mapping[str, str] | None
    tls: bool
    client_auth: bool
    overrides: Mapping[str, str] | None
    cluster_overrides: Mapping[str, Mapping[str, str]] | None
    nodes: int
    proxy: bool


def check_options(options: ClusterOptions) -> ClusterOptions:
    """``options``, or ``TypeError`` for a keyword that is not a :class:`ClusterOptions`
    (as a misspelt keyword argument of an explicit signature)."""
    unknown = sorted(set(options) - set(ClusterOptions.__annotations__))
    if unknown:
        raise TypeError(f"unexpected keyword argument(s): {', '.join(unknown)}")
    return options


class ClusterFactory:
    """Creates, starts (in parallel) and finally stops local :class:`KafkaCluster` instances.

    Each cluster gets ``<work_dir>/<alias>-<n>/``. Without ``work_dir`` a temporary directory
    is used and deleted by :meth:`close` (unless ``keep_work_dir`` or
    ``MIRRORLIB_KEEP_WORK_DIR=1``, or a start failed: then the logs are kept for you).
    """

    def __init__(
        self,
        work_dir: str | os.PathLike[str] | None = None,
        *,
        kafka_version: str = KAFKA_VERSION,
        jvm: JvmOptions | None = None,
        startup_timeout: float = 120.0,
        ready_probe: bool = True,
        keep_work_dir: bool | None = None,
    ) -> None:
        self._owns_dir = work_dir is None
        self.work_dir = Path(work_dir) if work_dir else Path(tempfile.mkdtemp(prefix="mirrorlib-"))
        if keep_work_dir is None:
            keep_work_dir = os.environ.get("MIRRORLIB_KEEP_WORK_DIR", "") not in {"", "0"}
        self.keep_work_dir = keep_work_dir
        self.kafka_version = kafka_version
        self.jvm = jvm
        self.startup_timeout = startup_timeout
        self.ready_probe = ready_probe
        self.clusters: list[KafkaCluster] = []
        self._failed = False
        self._counter = 0
        self._lock = threading.Lock()

    def create(
        self, n_or_aliases: int | Iterable[str] = 2, **options: Unpack[ClusterOptions]
    ) -> list[KafkaCluster]:
        """New, not yet started clusters (see :meth:`start` for the arguments)."""
        check_options(options)
        aliases = _aliases(n_or_aliases)
        overrides = options.get("overrides")
        cluster_overrides = options.get("cluster_overrides")
        unknown = set(cluster_overrides or {}) - set(aliases)
        if unknown:
            raise TestClusterError(f"cluster_overrides for unknown aliases: {sorted(unknown)}")
        created = []
        for alias in aliases:
            with self._lock:
                self._counter += 1
                sub = self.work_dir / f"{alias}-{self._counter}"
            props = {**(overrides or {}), **(cluster_overrides or {}).get(alias, {})}
            cluster = KafkaCluster(
                alias, sub, acl=options.get("acl", False), users=options.get("users"),
                tls=options.get("tls", False), client_auth=options.get("client_auth", False),
                overrides=props, jvm=self.jvm,
                kafka_version=self.kafka_version, startup_timeout=self.startup_timeout,
                ready_probe=self.ready_probe, nodes=options.get("nodes", 1),
                proxy=options.get("proxy", False),
            )  # fmt: skip
            created.append(cluster)
        with self._lock:
            self.clusters.extend(created)
        return created

    def start(
        self,
        n_or_aliases: int | Iterable[str] = 2,
        *,
        timeout: float | None = None,
        **options: Unpack[ClusterOptions],
    ) -> ClusterSet:
        """Start independent clusters in parallel and wait until all are ready.

        ``n_or_aliases``: a count (aliases ``A``, ``B``, ...) or the aliases themselves;
        ``options``: how they are made (:class:`ClusterOptions`: ``acl``, ``users``, ``tls``,
        ``client_auth``, ``overrides``, ``cluster_overrides``, ``nodes``, ``proxy``). If any cluster fails to start,
        all of them are stopped and the first error is raised.
        """
        clusters = self.create(n_or_aliases, **options)
        # resolve jars / check java once, before the threads race for the lock
        java_executable()
        kafka_classpath(self.kafka_version)
        errors = _parallel([lambda c=c: c.start(timeout) for c in clusters])
        if errors:
            self._failed = True
            _parallel([c.kill for c in clusters])
            first = errors[0]
            if len(errors) > 1:
                first.add_note(f"{len(errors) - 1} other cluster(s) failed to start as well")
            raise first
        return ClusterSet(clusters)

    def stop_all(self) -> None:
        """Stop every cluster this factory created (in parallel)."""
        _parallel([c.stop for c in self.clusters])

    def close(self) -> None:
        """Stop everything; delete the temporary work dir unless it must be kept."""
        self.stop_all()
        if self._owns_dir and not self.keep_work_dir and not self._failed:
            shutil.rmtree(self.work_dir, ignore_errors=True)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is not None:
            self._failed = True
        self.close()


class _FactoryClusterSet(ClusterSet):
    def __init__(self, clusters: Iterable[BaseCluster], factory: ClusterFactory) -> None:
        super().__init__(clusters)
        self._factory = factory

    def stop(self) -> None:
        self._factory.close()


def start_clusters(
    n_or_aliases: int | Iterable[str] = 2,
    *,
    work_dir: str | os.PathLike[str] | None = None,
    jvm: JvmOptions | None = None,
    timeout: float = 120.0,
    **options: Unpack[ClusterOptions],
) -> ClusterSet:
    """Start clusters in parallel; use the result as a context manager to stop them::

        with start_clusters(2) as (a, b):
            a.create_topic("t")

    ``options``: how they are made (:class:`ClusterOptions`: ``acl``, ``users``, ``tls``,
    ``client_auth``, ``overrides``, ``cluster_overrides``, ``nodes``, ``proxy``). A temporary work dir is removed on
    stop unless ``work_dir`` is given (or a start failed).
    """
    factory = ClusterFactory(work_dir, jvm=jvm, startup_timeout=timeout)
    try:
        started = factory.start(n_or_aliases, **options)
    except BaseException:
        factory.close()
        raise
    return _FactoryClusterSet(started, factory)
