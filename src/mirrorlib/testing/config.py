"""Pure helpers for the local test clusters: ports, cluster ids, broker and JVM settings.

Nothing here starts a process; everything is deterministic given its inputs (apart from the
free-port probe and the random cluster id) and unit-tested without Kafka.
"""

from __future__ import annotations

import base64
import os
import shlex
import socket
import threading
import uuid
from collections.abc import Mapping

import attrs
import javaproperties

from mirrorlib.errors import TestClusterError

__all__ = [
    "ADMIN_PASSWORD",
    "ADMIN_USER",
    "BROKER_DEFAULTS",
    "CLIENT_LISTENER",
    "CONTROLLER_LISTENER",
    "HOST",
    "INTERNAL_LISTENER",
    "LOG4J2_PROPERTIES",
    "BrokerTls",
    "JvmOptions",
    "broker_properties",
    "free_port",
    "jaas_config",
    "new_cluster_id",
    "render_properties",
    "replication_defaults",
]

#: Every listener binds here; the test bed never listens on other interfaces.
HOST = "127.0.0.1"
#: Listener names used in ``server.properties``.
CLIENT_LISTENER = "CLIENT"
CONTROLLER_LISTENER = "CONTROLLER"
#: The inter-broker listener of multi-node and proxied clusters (never behind the proxy).
INTERNAL_LISTENER = "INTERNAL"
#: The super user of ACL-enforcing clusters (the broker itself authenticates as this user).
ADMIN_USER = "admin"
ADMIN_PASSWORD = "admin-secret"

#: Broker settings for a single combined node on a small (2-core) machine, fast for tests.
BROKER_DEFAULTS: Mapping[str, str] = {
    # single node: every internal topic with RF 1
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "default.replication.factor": "1",
    "min.insync.replicas": "1",
    "num.partitions": "1",
    # test speed
    "group.initial.rebalance.delay.ms": "0",
    "auto.create.topics.enable": "false",
    "offsets.topic.num.partitions": "5",
    # after a kill -9 the old registration blocks the restarted broker until its session
    # expires (default 9 s); a shorter session makes kill+restart fault tests faster
    "broker.heartbeat.interval.ms": "1000",
    "broker.session.timeout.ms": "4500",
    "transaction.state.log.num.partitions": "5",
    # small machine
    "num.network.threads": "2",
    "num.io.threads": "4",
    "background.threads": "4",
    "num.recovery.threads.per.data.dir": "1",
    "log.cleaner.threads": "1",
    # on-heap at startup (default 128 MiB); the cleaner stays on for compacted topics
    "log.cleaner.dedupe.buffer.size": str(16 * 1024 * 1024),
}

#: Log4j 2 configuration for brokers: INFO to stdout (which goes to the cluster's log file).
LOG4J2_PROPERTIES = """\
status = warn
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = OUT
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.reqs.name = kafka.request.logger
logger.reqs.level = WARN
logger.state.name = state.change.logger
logger.state.level = WARN
"""

_handed_out: set[int] = set()
_ports_lock = threading.Lock()


def free_port(host: str = HOST, *, exclude: frozenset[int] = frozenset()) -> int:
    """A TCP port on ``host`` that is free now and not handed out before by this process.

    The OS picks the port (bind to port 0). Another process may still take it before the broker
    binds; :class:`~mirrorlib.testing.KafkaCluster` retries its first start on fresh ports then.
    """
    with _ports_lock:
        for _ in range(200):
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                sock.bind((host, 0))
                port = int(sock.getsockname()[1])
            if port not in _handed_out and port not in exclude:
                _handed_out.add(port)
                return port
    raise TestClusterError(f"could not find a free TCP port on {host}")


def new_cluster_id() -> str:
    """A random Kafka cluster id: a UUID, URL-safe base64 without padding (22 chars).

    Like Kafka's ``Uuid.randomUuid()``, never starts with ``-`` (it would look like a CLI flag)
    and is never the reserved all-zero id.
    """
    while True:
        raw = uuid.uuid4().bytes
        cid = base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")
        if not cid.startswith("-") and any(raw):
            return cid


def jaas_config(username: str, password: str, users: Mapping[str, str] | None = None) -> str:
    """A ``PlainLoginModule`` JAAS line; ``users`` adds server-side ``user_<name>`` entries."""

    def quote(value: str) -> str:
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'

    parts = [
        "org.apache.kafka.common.security.plain.PlainLoginModule required",
        f"username={quote(username)}",
        f"password={quote(password)}",
    ]
    parts.extend(f"user_{name}={quote(pwd)}" for name, pwd in (users or {}).items())
    return " ".join(parts) + ";"


@attrs.frozen
class BrokerTls:
    """The TLS side of a broker's client listener: PKCS#12 stores (JDK 17 reads them directly).

    ``client_auth`` makes the broker require client certificates (``ssl.client.auth=required``)
    signed by a CA of ``truststore``.
    """

    keystore: str
    truststore: str
    password: str
    client_auth: bool = False


def replication_defaults(nodes: int) -> dict[str, str]:
    """Replication settings for a cluster of ``nodes`` brokers: RF ``min(3, nodes)`` for
    topics and internal topics, ``min.insync.replicas`` 2 from three nodes on (else 1)."""
    rf = str(min(3, nodes))
    isr = "2" if nodes >= 3 else "1"
    return {
        "offsets.topic.replication.factor": rf,
        "transaction.state.log.replication.factor": rf,
        "transaction.state.log.min.isr": isr,
        "share.coordinator.state.topic.replication.factor": rf,
        "share.coordinator.state.topic.min.isr": isr,
        "default.replication.factor": rf,
        "min.insync.replicas": isr,
    }


def broker_properties(
    *,
    client_port: int,
    controller_port: int,
    log_dir: str,
    node_id: int = 1,
    acl: bool = False,
    users: Mapping[str, str] | None = None,
    tls: BrokerTls | None = None,
    overrides: Mapping[str, str] | None = None,
    voters: Mapping[int, int] | None = None,
    internal_port: int | None = None,
    advertised_port: int | None = None,
) -> dict[str, str]:
    """The ``server.properties`` of one combined broker+controller node of a KRaft cluster.

    Static quorum (``controller.quorum.voters``: ``voters``, node id to controller port, by
    default this node alone), so storage is formatted without ``--standalone``. With
    ``internal_port`` the brokers talk to each other on an ``INTERNAL`` listener of their own
    (always without TLS; SASL_PLAINTEXT with ``acl``), so nothing between clients and the client
    listener (a proxy) sits between brokers; ``advertised_port`` is the client port clients are
    told (a proxy's; default ``client_port``). Replication settings follow the number of voters
    (:func:`replication_defaults`). With ``acl=True`` all listeners use SASL (PLAIN), the
    ``StandardAuthorizer`` enforces ACLs, ``User:admin`` is the only super user and ``users``
    (name to password) are the other accounts. With ``tls`` the client listener is SSL (SASL_SSL
    with ``acl``); the controller listener stays without TLS. Without ``internal_port`` the
    broker reaches itself on the client listener. ``overrides`` win over everything.
    """
    controller_protocol = "SASL_PLAINTEXT" if acl else "PLAINTEXT"
    protocol = controller_protocol.replace("PLAINTEXT", "SSL") if tls else controller_protocol
    voters = dict(voters) if voters else {node_id: controller_port}
    if voters.get(node_id) != controller_port:
        raise TestClusterError(
            f"node {node_id} with controller port {controller_port} not in {voters}"
        )
    quorum = ",".join(f"{n}@{HOST}:{port}" for n, port in sorted(voters.items()))
    advertised = advertised_port if advertised_port is not None else client_port
    listeners = [
        f"{CLIENT_LISTENER}://{HOST}:{client_port}",
        f"{CONTROLLER_LISTENER}://{HOST}:{controller_port}",
    ]
    advertised_listeners = [
        f"{CLIENT_LISTENER}://{HOST}:{advertised}",
        f"{CONTROLLER_LISTENER}://{HOST}:{controller_port}",
    ]
    protocols = [f"{CLIENT_LISTENER}:{protocol}", f"{CONTROLLER_LISTENER}:{controller_protocol}"]
    if internal_port is not None:
        listeners.append(f"{INTERNAL_LISTENER}://{HOST}:{internal_port}")
        advertised_listeners.append(f"{INTERNAL_LISTENER}://{HOST}:{internal_port}")
        protocols.append(f"{INTERNAL_LISTENER}:{controller_protocol}")
    props: dict[str, str] = {
        "process.roles": "broker,controller",
        "node.id": str(node_id),
        "controller.quorum.voters": quorum,
        "listeners": ",".join(listeners),
        "advertised.listeners": ",".join(advertised_listeners),
        "inter.broker.listener.name": (
            CLIENT_LISTENER if internal_port is None else INTERNAL_LISTENER
        ),
        "controller.listener.names": CONTROLLER_LISTENER,
        "listener.security.protocol.map": ",".join(protocols),
        "log.dirs": log_dir,
        **BROKER_DEFAULTS,
        **(replication_defaults(len(voters)) if len(voters) > 1 else {}),
    }
    if tls is not None:
        props.update(
            {
                "ssl.keystore.type": "PKCS12",
                "ssl.keystore.location": tls.keystore,
                "ssl.keystore.password": tls.password,
                "ssl.key.password": tls.password,
                "ssl.truststore.type": "PKCS12",
                "ssl.truststore.location": tls.truststore,
                "ssl.truststore.password": tls.password,
                "ssl.client.auth": "required" if tls.client_auth else "none",
                "ssl.endpoint.identification.algorithm": "https",
            }
        )
    if acl:
        if users and ADMIN_USER in users:
            raise TestClusterError(f"user name {ADMIN_USER!r} is reserved for the super user")
        all_users = {ADMIN_USER: ADMIN_PASSWORD, **(users or {})}
        jaas = jaas_config(ADMIN_USER, ADMIN_PASSWORD, all_users)
        props.update(
            {
                "sasl.enabled.mechanisms": "PLAIN",
                "sasl.mechanism.inter.broker.protocol": "PLAIN",
                "sasl.mechanism.controller.protocol": "PLAIN",
                f"listener.name.{CLIENT_LISTENER.lower()}.plain.sasl.jaas.config": jaas,
                f"listener.name.{CONTROLLER_LISTENER.lower()}.plain.sasl.jaas.config": jaas,
                "authorizer.class.name": (
                    "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
                ),
                "super.users": f"User:{ADMIN_USER}",
                "allow.everyone.if.no.acl.found": "false",
            }
        )
        if internal_port is not None:
            props[f"listener.name.{INTERNAL_LISTENER.lower()}.plain.sasl.jaas.config"] = jaas
    elif users:
        raise TestClusterError("users= needs acl=True (SASL is only enabled on ACL clusters)")
    props.update(overrides or {})
    return props


def render_properties(props: Mapping[str, str]) -> str:
    """Java ``.properties`` text (escaped as Java expects), keys in a stable order."""
    return str(javaproperties.dumps(props, timestamp=False, sort_keys=True))


@attrs.frozen
class JvmOptions:
    """How the broker JVM is started.

    ``fast_jit`` adds ``-XX:TieredStopAtLevel=1`` (C1 only): faster startup on 2 cores, lower
    peak throughput, so turn it off for benchmarks. ``extra`` is appended last (so it wins).
    """

    heap: str = "512m"
    fast_jit: bool = True
    extra: tuple[str, ...] = ()

    @classmethod
    def from_env(cls) -> JvmOptions:
        """Defaults, adjusted by ``MIRRORLIB_KAFKA_FAST_JIT=0`` and ``MIRRORLIB_KAFKA_JVM_OPTS``."""
        fast = os.environ.get("MIRRORLIB_KAFKA_FAST_JIT", "1").strip().lower()
        extra = tuple(shlex.split(os.environ.get("MIRRORLIB_KAFKA_JVM_OPTS", "")))
        return cls(fast_jit=fast not in {"0", "false", "no", "off"}, extra=extra)

    def args(self) -> list[str]:
        """The JVM arguments (before ``-cp``)."""
        args = [
            f"-Xms{self.heap}",
            f"-Xmx{self.heap}",
            "-XX:+UseG1GC",
            "-XX:MaxGCPauseMillis=20",
            "-XX:InitiatingHeapOccupancyPercent=35",
            "-XX:+ExplicitGCInvokesConcurrent",
            "-Xshare:auto",
            "-Djava.awt.headless=true",
        ]
        if self.fast_jit:
            args.append("-XX:TieredStopAtLevel=1")
        args.extend(self.extra)
        return args
