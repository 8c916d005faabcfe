"""Translating Java Kafka client settings into librdkafka settings.

MM2 configures Java clients; mirrorlib's clients are librdkafka (confluent-kafka). Most settings
carry over, under the same or a different name; some Java-only settings have no effect and are
dropped; a few have no faithful librdkafka equivalent and are rejected with a
:class:`~mirrorlib.errors.ConfigError` that names the key as the user wrote it, the cluster alias,
the (masked) value and the librdkafka setting to use instead.

* **Same name.** Any librdkafka 2.x property passes through (``linger.ms``, ``acks``,
  ``isolation.level``…), so a librdkafka-native setting may also be written directly.
* **Renamed.** ``max.request.size`` → ``message.max.bytes``; ``buffer.memory`` (bytes) →
  ``queue.buffering.max.kbytes``; ``fetch.max.wait.ms`` → ``fetch.wait.max.ms``;
  ``send.buffer.bytes`` / ``receive.buffer.bytes`` → ``socket.*.buffer.bytes``;
  ``partition.assignment.strategy`` Java class names → ``range`` / ``roundrobin`` /
  ``cooperative-sticky``; ``compression.<codec>.level`` → ``compression.level``.
* **SASL.** ``sasl.jaas.config`` is parsed like Kafka's ``JaasConfig`` (quoted values, escapes,
  control flag, trailing ``;``): PLAIN and SCRAM logins become ``sasl.username`` /
  ``sasl.password``; a Kerberos keytab login becomes ``sasl.kerberos.keytab`` /
  ``sasl.kerberos.principal``; OAuth client-credentials (with Kafka's
  ``OAuthBearerLoginCallbackHandler``) becomes ``sasl.oauthbearer.method=oidc`` with
  ``sasl.oauthbearer.client.id`` / ``client.secret`` / ``scope``; the unsecured OAuth login
  becomes ``enable.sasl.oauthbearer.unsecure.jwt``.
* **TLS.** PEM truststores/keystores become ``ssl.ca.location`` / ``ssl.certificate.location`` +
  ``ssl.key.location`` (or ``ssl.ca.pem`` / ``ssl.certificate.pem`` / ``ssl.key.pem`` for inline
  PEM); PKCS#12 keystores stay ``ssl.keystore.location``. JKS stores — Java's default type — and
  PKCS#12 truststores cannot be read by librdkafka: an error names ``ssl.ca.location``.
  ``ssl.endpoint.identification.algorithm=`` (empty) becomes ``none``.
* **Dropped.** Serializers, interceptors, metric reporters, Java TLS/SASL tuning… are listed in
  :attr:`ClientSettings.dropped` with the reason, as is any key librdkafka does not know.

The isolation level of the replication consumer (the flow's source consumer) is decided here too,
for every engine: :func:`replication_isolation` — ``read_committed`` unless the configuration
says ``read_uncommitted`` (and never for an exactly-once flow). MM2's default is
``read_uncommitted``, which copies the records of aborted source transactions as committed ones.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Final

import attrs

from mirrorlib.core.config.keys import SECURITY_PROTOCOLS, is_sensitive, mask, masked_repr
from mirrorlib.errors import ConfigError

__all__ = [
    "ISOLATION_LEVELS",
    "LIBRDKAFKA_PROPERTIES",
    "READ_COMMITTED",
    "READ_UNCOMMITTED",
    "ROLES",
    "ClientSettings",
    "DroppedSetting",
    "JaasEntry",
    "Setting",
    "parse_jaas",
    "replication_isolation",
    "translate_client_settings",
]

ROLES: Final = ("producer", "consumer", "admin")

# librdkafka 2.16 property names (CONFIGURATION.md) that take a string value, by client type:
# "*" both, "C" consumer, "P" producer. Callback/pointer properties are left out.
_BOTH: Final = """
allow.auto.create.topics api.version.fallback.ms api.version.request api.version.request.timeout.ms
bootstrap.servers broker.address.family broker.address.ttl broker.version.fallback
builtin.features client.dns.lookup client.id client.rack connections.max.idle.ms debug
enable.metrics.push enable.random.seed enable.sasl.oauthbearer.unsecure.jwt
enable.ssl.certificate.verification enabled_events https.ca.location https.ca.pem
internal.termination.signal log.connection.close log.queue log.thread.name log_level
max.in.flight max.in.flight.requests.per.connection message.copy.max.bytes message.max.bytes
metadata.broker.list metadata.max.age.ms metadata.recovery.rebootstrap.trigger.ms
metadata.recovery.strategy plugin.library.paths receive.message.max.bytes
reconnect.backoff.jitter.ms reconnect.backoff.max.ms reconnect.backoff.ms retry.backoff.max.ms
retry.backoff.ms sasl.kerberos.keytab sasl.kerberos.kinit.cmd
sasl.kerberos.min.time.before.relogin sasl.kerberos.principal sasl.kerberos.service.name
sasl.mechanism sasl.mechanisms sasl.oauthbearer.assertion.algorithm
sasl.oauthbearer.assertion.claim.aud sasl.oauthbearer.assertion.claim.exp.seconds
sasl.oauthbearer.assertion.claim.iss sasl.oauthbearer.assertion.claim.jti.include
sasl.oauthbearer.assertion.claim.nbf.seconds sasl.oauthbearer.assertion.claim.sub
sasl.oauthbearer.assertion.file sasl.oauthbearer.assertion.jwt.template.file
sasl.oauthbearer.assertion.private.key.file sasl.oauthbearer.assertion.private.key.passphrase
sasl.oauthbearer.assertion.private.key.pem sasl.oauthbearer.client.credentials.client.id
sasl.oauthbearer.client.credentials.client.secret sasl.oauthbearer.client.id
sasl.oauthbearer.client.secret sasl.oauthbearer.config sasl.oauthbearer.extensions
sasl.oauthbearer.grant.type sasl.oauthbearer.metadata.authentication.type
sasl.oauthbearer.method sasl.oauthbearer.scope sasl.oauthbearer.sub.claim.name
sasl.oauthbearer.token.endpoint.url sasl.password sasl.username security.protocol
socket.blocking.max.ms socket.connection.setup.timeout.ms socket.keepalive.enable
socket.max.fails socket.nagle.disable socket.receive.buffer.bytes socket.send.buffer.bytes
socket.timeout.ms ssl.ca.certificate.stores ssl.ca.location ssl.ca.pem ssl.certificate.location
ssl.certificate.pem ssl.cipher.suites ssl.crl.location ssl.curves.list
ssl.endpoint.identification.algorithm ssl.engine.id ssl.engine.location ssl.key.location
ssl.key.password ssl.key.pem ssl.keystore.location ssl.keystore.password ssl.providers
ssl.sigalgs.list statistics.interval.ms topic.blacklist topic.metadata.propagation.max.ms
topic.metadata.refresh.fast.cnt topic.metadata.refresh.fast.interval.ms
topic.metadata.refresh.interval.ms topic.metadata.refresh.sparse
"""
_CONSUMER: Final = """
auto.commit.enable auto.commit.interval.ms auto.offset.reset check.crcs
consume.callback.max.messages coordinator.query.interval.ms enable.auto.commit
enable.auto.offset.store enable.partition.eof fetch.error.backoff.ms fetch.max.bytes
fetch.message.max.bytes fetch.min.bytes fetch.queue.backoff.ms fetch.wait.max.ms group.id
group.instance.id group.protocol group.protocol.type group.remote.assignor heartbeat.interval.ms
isolation.level max.partition.fetch.bytes max.poll.interval.ms max.poll.records
offset.store.method offset.store.path offset.store.sync.interval.ms partition.assignment.strategy
queued.max.messages.kbytes queued.min.messages session.timeout.ms share.acknowledgement.mode
"""
_PRODUCER: Final = """
acks batch.num.messages batch.size compression.codec compression.level compression.type
delivery.report.only.error delivery.timeout.ms enable.gapless.guarantee enable.idempotence
linger.ms message.send.max.retries message.timeout.ms partitioner produce.offset.report
queue.buffering.backpressure.threshold queue.buffering.max.kbytes queue.buffering.max.messages
queue.buffering.max.ms queuing.strategy request.required.acks request.timeout.ms retries
sticky.partitioning.linger.ms transaction.timeout.ms transactional.id
"""

LIBRDKAFKA_PROPERTIES: Final[Mapping[str, str]] = {
    **dict.fromkeys(_BOTH.split(), "*"),
    **dict.fromkeys(_CONSUMER.split(), "C"),
    **dict.fromkeys(_PRODUCER.split(), "P"),
}
"""librdkafka 2.x property names → ``"*"`` (any client), ``"C"`` (consumer), ``"P"`` (producer)."""

_JAVA_ONLY: Final[Mapping[str, str]] = {
    "key.serializer": "records are copied as bytes",
    "value.serializer": "records are copied as bytes",
    "key.deserializer": "records are copied as bytes",
    "value.deserializer": "records are copied as bytes",
    "interceptor.classes": "Java interceptors cannot run in librdkafka",
    "metric.reporters": "Java metrics reporters; mirrorlib reports its own metrics",
    "metrics.num.samples": "Java metrics setting",
    "metrics.sample.window.ms": "Java metrics setting",
    "metrics.recording.level": "Java metrics setting",
    "auto.include.jmx.reporter": "Java metrics setting",
    "partitioner.class": "replicated records keep their partition",
    "partitioner.ignore.keys": "replicated records keep their partition",
    "partitioner.adaptive.partitioning.enable": "replicated records keep their partition",
    "partitioner.availability.timeout.ms": "replicated records keep their partition",
    "exclude.internal.topics": "Java consumer setting without effect on assigned partitions",
    "max.block.ms": "Java producer blocking; librdkafka calls take their own timeouts",
    "metadata.max.idle.ms": "Java producer metadata tuning",
    "default.api.timeout.ms": "Java client call timeout; mirrorlib passes timeouts per call",
    "internal.leave.group.on.close": "Java internal setting",
    "socket.connection.setup.timeout.max.ms": "no librdkafka equivalent (backoff is built in)",
    "security.providers": "Java security providers",
    "ssl.protocol": "librdkafka negotiates the highest TLS version OpenSSL allows",
    "ssl.enabled.protocols": "librdkafka negotiates the highest TLS version OpenSSL allows",
    "ssl.provider": "Java security provider",
    "ssl.keymanager.algorithm": "Java key manager",
    "ssl.trustmanager.algorithm": "Java trust manager",
    "ssl.secure.random.implementation": "Java SecureRandom",
    "ssl.truststore.password": "PEM CA files need no password",
    "ssl.truststore.type": "store type, used to translate ssl.truststore.*",
    "ssl.keystore.type": "store type, used to translate ssl.keystore.*",
    "sasl.kerberos.ticket.renew.window.factor": "librdkafka renews Kerberos tickets with kinit",
    "sasl.kerberos.ticket.renew.jitter": "librdkafka renews Kerberos tickets with kinit",
    "sasl.login.refresh.window.factor": "Java login refresh tuning",
    "sasl.login.refresh.window.jitter": "Java login refresh tuning",
    "sasl.login.refresh.min.period.seconds": "Java login refresh tuning",
    "sasl.login.refresh.buffer.seconds": "Java login refresh tuning",
    "sasl.login.connect.timeout.ms": "Java OAuth HTTP tuning",
    "sasl.login.read.timeout.ms": "Java OAuth HTTP tuning",
    "sasl.login.retry.backoff.ms": "Java OAuth HTTP tuning",
    "sasl.login.retry.backoff.max.ms": "Java OAuth HTTP tuning",
    "sasl.oauthbearer.scope.claim.name": "used by Java's token validation only",
    "sasl.oauthbearer.jwks.endpoint.url": "broker-side token validation",
    "sasl.oauthbearer.jwks.endpoint.refresh.ms": "broker-side token validation",
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms": "broker-side token validation",
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms": "broker-side token validation",
    "sasl.oauthbearer.clock.skew.seconds": "broker-side token validation",
    "sasl.oauthbearer.expected.audience": "broker-side token validation",
    "sasl.oauthbearer.expected.issuer": "broker-side token validation",
    "sasl.oauthbearer.header.urlencode": "Java OAuth HTTP tuning",
    "sasl.oauthbearer.jwt.validator.class": "broker-side token validation",
    "transaction.two.phase.commit.enable": "Java producer setting without librdkafka equivalent",
    "enable.metrics.push.interval.ms": "Java metrics setting",
}

_RENAMED: Final[Mapping[str, str]] = {
    "max.request.size": "message.max.bytes",
    "fetch.max.wait.ms": "fetch.wait.max.ms",
    "send.buffer.bytes": "socket.send.buffer.bytes",
    "receive.buffer.bytes": "socket.receive.buffer.bytes",
}
_ASSIGNORS: Final[Mapping[str, str]] = {
    "org.apache.kafka.clients.consumer.RangeAssignor": "range",
    "org.apache.kafka.clients.consumer.RoundRobinAssignor": "roundrobin",
    "org.apache.kafka.clients.consumer.CooperativeStickyAssignor": "cooperative-sticky",
    "range": "range",
    "roundrobin": "roundrobin",
    "cooperative-sticky": "cooperative-sticky",
}
_SASL_MECHANISMS: Final = ("GSSAPI", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")

_PLAIN: Final = "org.apache.kafka.common.security.plain.PlainLoginModule"
_SCRAM: Final = "org.apache.kafka.common.security.scram.ScramLoginModule"
_OAUTH: Final = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
_KRB5: Final = (
    "com.sun.security.auth.module.Krb5LoginModule",
    "com.ibm.security.auth.module.Krb5LoginModule",
)
_OIDC_HANDLERS: Final = (
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerLoginCallbackHandler",
)
_CLIENT_CREDENTIALS_RETRIEVERS: Final = (
    "org.apache.kafka.common.security.oauthbearer.DefaultJwtRetriever",
    "org.apache.kafka.common.security.oauthbearer.ClientCredentialsJwtRetriever",
)


READ_COMMITTED: Final = "read_committed"
READ_UNCOMMITTED: Final = "read_uncommitted"
ISOLATION_LEVELS: Final = (READ_COMMITTED, READ_UNCOMMITTED)


def replication_isolation(configured: str | None, *, exactly_once: bool) -> str:
    """The ``isolation.level`` of a flow's replication consumer, in every engine (the embedded
    copier and its worker processes, Spark's copy tasks) and in every read that compares with
    what it copies (the source end offsets of status and Spark's batches, ``verify``).

    ``read_committed`` by default: records of aborted source transactions are not copied, and
    the end of a partition is its last stable offset. ``read_uncommitted`` only when
    ``configured`` (the consumer's ``isolation.level`` as the configuration resolves it, ``None``
    when unset) says so, and never for an ``exactly_once`` flow. MM2 4.3.1 defaults to
    ``read_uncommitted`` (:class:`~mirrorlib.core.config.MirrorConfig` warns when a flow is
    configured that way)."""
    if exactly_once or configured is None:
        return READ_COMMITTED
    level = configured.strip().lower()
    if level not in ISOLATION_LEVELS:
        raise ConfigError(
            f"isolation.level={configured!r}: expected {READ_COMMITTED} or {READ_UNCOMMITTED}",
            key="isolation.level",
            value=configured,
        )
    return level


@attrs.frozen
class Setting:
    """A Java client setting: its ``value``, the key as the user wrote it (``origin``, e.g.
    ``B.producer.sasl.jaas.config``) and whether it came from a config provider (``secret``)."""

    value: str
    origin: str
    secret: bool = False

    def __repr__(self) -> str:  # a secret is masked
        shown = mask(self.origin, self.value, secret=self.secret)
        return f"Setting(value={shown!r}, origin={self.origin!r}, secret={self.secret!r})"


@attrs.frozen
class DroppedSetting:
    """A setting left out of a librdkafka configuration, and why."""

    key: str
    origin: str
    reason: str
    unknown: bool = False


@attrs.frozen
class ClientSettings:
    """A translated client configuration: librdkafka ``settings`` and the ``dropped`` ones."""

    settings: Mapping[str, str] = attrs.field(repr=masked_repr)  # secrets masked
    dropped: tuple[DroppedSetting, ...] = ()

    def as_dict(self) -> dict[str, str]:
        """A fresh ``dict`` to pass to confluent-kafka."""
        return dict(self.settings)


# -- JAAS ---------------------------------------------------------------------------------------


@attrs.frozen
class JaasEntry:
    """One login module of a JAAS configuration: ``module flag key=value… ;``."""

    module: str
    flag: str
    options: Mapping[str, str] = attrs.field(repr=masked_repr)  # secrets masked


_ESCAPES: Final[Mapping[str, str]] = {
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
}
_KINIT_COMMAND: Final = (
    'kinit -R -t "%{sasl.kerberos.keytab}" -k %{sasl.kerberos.principal} || '
    'kinit -t "%{sasl.kerberos.keytab}" -k %{sasl.kerberos.principal}'
)
_FLAGS: Final = ("required", "requisite", "sufficient", "optional")


def _jaas_tokens(text: str) -> list[tuple[str, str]]:
    """Tokens of a JAAS text, as Java's ``StreamTokenizer`` in Kafka's ``JaasConfig`` reads them:
    words, quoted strings (``"`` or ``'``, with escapes), ``=`` and ``;``; ``//`` and ``/* */``
    comments are skipped."""
    tokens: list[tuple[str, str]] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c.isspace() or ord(c) < 32:
            i += 1
        elif text.startswith(("//", "/*"), i):
            i = _comment_end(text, i)
        elif c in "=;":
            tokens.append((c, c))
            i += 1
        elif c in "\"'":
            value, i = _quoted(text, i)
            tokens.append(("str", value))
        else:
            start, i = i, _word_end(text, i)
            tokens.append(("word", text[start:i]))
    return tokens


def _comment_end(text: str, i: int) -> int:
    """The index after the ``//`` (to the end of the line) or ``/* */`` comment at ``i``."""
    if text.startswith("//", i):
        end = text.find("\n", i)
        return len(text) if end < 0 else end + 1
    end = text.find("*/", i + 2)
    if end < 0:
        raise ValueError("unterminated /* comment")
    return end + 2


def _quoted(text: str, i: int) -> tuple[str, int]:
    """The string quoted at ``i``, its escapes resolved, and the index after its closing quote."""
    quote = text[i]
    out: list[str] = []
    i += 1
    while i < len(text):
        ch = text[i]
        if ch == quote:
            return "".join(out), i + 1
        if ch == "\\" and i + 1 < len(text):
            ch, i = _escaped(text, i)
        else:
            i += 1
        out.append(ch)
    raise ValueError("unterminated quoted value")


def _escaped(text: str, i: int) -> tuple[str, int]:
    """The character escaped by the backslash at ``i`` (``\\n``, octal ``\\101``, or the next
    character itself) and the index after the escape."""
    octal = re.match(r"[0-7]{1,3}", text[i + 1 : i + 4])
    if octal:
        return chr(int(octal.group(), 8) & 0xFF), i + 1 + octal.end()
    nxt = text[i + 1]
    return _ESCAPES.get(nxt, nxt), i + 2


def _word_end(text: str, i: int) -> int:
    """The index after the word starting at ``i``."""
    while i < len(text) and not (text[i].isspace() or text[i] in "=;\"'"):
        if text.startswith(("//", "/*"), i):
            break
        i += 1
    return i


_JAVA_CLASS: Final = re.compile(r"[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)+")


def _module_name(word: str) -> str:
    """``login module <word>`` for a message when ``word`` looks like a Java class name, else
    ``the login module`` (the word may be a secret written in the wrong place)."""
    if _JAVA_CLASS.fullmatch(word):
        return f"login module {word}"
    return "the login module"


def parse_jaas(text: str) -> tuple[JaasEntry, ...]:
    """Parse a ``sasl.jaas.config`` value into its login modules.

    Raises ``ValueError`` (without the text, which holds secrets) when it is malformed: the
    message names a login module only when it looks like a Java class name, and never repeats
    another word of the text (a misplaced password would be one).
    """
    tokens = _jaas_tokens(text)
    entries: list[JaasEntry] = []
    i = 0
    while i < len(tokens):
        kind, module = tokens[i]
        if kind != "word":
            raise ValueError("expected a login module class name")
        name = _module_name(module)
        if i + 1 >= len(tokens) or tokens[i + 1][0] != "word":
            raise ValueError(f"{name} has no control flag (e.g. 'required')")
        flag = tokens[i + 1][1].lower()
        if flag not in _FLAGS:
            raise ValueError(
                f"invalid control flag for {name}; expected one of {', '.join(_FLAGS)}"
            )
        i += 2
        options: dict[str, str] = {}
        while True:
            if i >= len(tokens):
                raise ValueError(f"{name} is not terminated by ';'")
            kind, word = tokens[i]
            if kind == ";":
                i += 1
                break
            if kind != "word":
                raise ValueError(f"expected an option name in {name}")
            if (
                i + 2 >= len(tokens)
                or tokens[i + 1][0] != "="
                or tokens[i + 2][0] not in ("word", "str")
            ):
                raise ValueError(
                    f"value not specified for option {len(options) + 1} of {name} "
                    f"(options are key=value)"
                )
            options[word] = tokens[i + 2][1]
            i += 3
        entries.append(JaasEntry(module, flag, options))
    return tuple(entries)


# -- translation --------------------------------------------------------------------------------


class _Translator:
    def __init__(self, java: Mapping[str, Setting], role: str, alias: str | None) -> None:
        self.java = dict(java)
        self.role = role
        self.alias = alias
        self.out: dict[str, str] = {}
        self.explicit: set[str] = set()
        self.dropped: list[DroppedSetting] = []

    # helpers ------------------------------------------------------------------------------------

    def error(self, key: str, message: str) -> ConfigError:
        setting = self.java[key]
        secret = setting.secret or is_sensitive(key)
        shown = "[hidden]" if secret else setting.value
        where = f" (cluster {self.alias}, {self.role})" if self.alias else f" ({self.role})"
        return ConfigError(
            f"{setting.origin}={shown!r}{where}: {message}",
            key=setting.origin,
            alias=self.alias,
            value=shown,
        )

    def take(self, key: str) -> Setting | None:
        return self.java.pop(key, None)

    def value(self, key: str, default: str | None = None) -> str | None:
        setting = self.java.get(key)
        return default if setting is None else setting.value.strip()

    def put(self, name: str, value: str) -> None:
        """A translated setting: an explicit librdkafka setting of the same name wins."""
        if name not in self.explicit:
            self.out[name] = value

    def drop(self, key: str, reason: str, *, unknown: bool = False) -> None:
        setting = self.java.pop(key)
        self.dropped.append(DroppedSetting(key, setting.origin, reason, unknown))

    # the steps ----------------------------------------------------------------------------------

    def run(self) -> ClientSettings:
        self.security()
        self.jaas()
        self.kerberos_cmd()
        self.truststore()
        self.keystore()
        self.tls_options()
        self.buffers()
        self.assignment_strategy()
        self.offset_reset()
        self.compression_levels()
        for key in list(self.java):
            self.generic(key)
        return ClientSettings(dict(self.out), tuple(self.dropped))

    def security(self) -> None:
        if "security.protocol" in self.java:
            proto = self.value("security.protocol") or ""
            if proto.upper() not in SECURITY_PROTOCOLS:
                raise self.error(
                    "security.protocol",
                    f"must be one of (case insensitive): {', '.join(SECURITY_PROTOCOLS)}",
                )
            self.take("security.protocol")
            self.put("security.protocol", proto.lower())
        if "sasl.mechanism" in self.java:
            mech = self.value("sasl.mechanism") or ""
            if mech.upper() not in _SASL_MECHANISMS:
                raise self.error(
                    "sasl.mechanism",
                    f"librdkafka supports the SASL mechanisms {', '.join(_SASL_MECHANISMS)} "
                    "(sasl.mechanism); vendor mechanisms such as AWS_MSK_IAM need their "
                    "librdkafka equivalent (e.g. OAUTHBEARER with sasl.oauthbearer.method=oidc)",
                )
            self.take("sasl.mechanism")
            self.put("sasl.mechanism", mech.upper())
        for key in (
            "sasl.client.callback.handler.class",
            "sasl.login.class",
            "ssl.engine.factory.class",
        ):
            if key in self.java and self.value(key):
                raise self.error(
                    key,
                    "Java classes cannot be used with librdkafka; configure "
                    "the librdkafka sasl.*/ssl.* settings instead",
                )
        if "bootstrap.servers" in self.java:
            servers = [s for s in re.split(r"\s*,\s*", self.value("bootstrap.servers") or "") if s]
            self.take("bootstrap.servers")
            self.put("bootstrap.servers", ",".join(servers))

    def jaas(self) -> None:
        if "sasl.jaas.config" not in self.java:
            return
        key = "sasl.jaas.config"
        try:
            entries = parse_jaas(self.java[key].value)
        except ValueError as exc:
            raise self.error(key, f"malformed JAAS configuration: {exc}") from None
        if len(entries) != 1:
            raise self.error(key, f"must contain exactly one login module, found {len(entries)}")
        entry = entries[0]
        opts = dict(entry.options)
        if entry.module in (_PLAIN, _SCRAM):
            if "username" not in opts or "password" not in opts:
                raise self.error(
                    key, 'the login module needs username="..." and password="..." options'
                )
            if entry.module == _SCRAM and opts.get("tokenauth", "false").lower() == "true":
                raise self.error(
                    key,
                    "SCRAM delegation-token login (tokenauth=true) is not "
                    "supported by librdkafka; use sasl.username/sasl.password "
                    "with a SCRAM user",
                )
            self.put("sasl.username", opts["username"])
            self.put("sasl.password", opts["password"])
        elif entry.module in _KRB5:
            self.kerberos(key, opts)
        elif entry.module == _OAUTH:
            self.oauth(key, opts)
        else:
            raise self.error(
                key,
                f"login module {entry.module} has no librdkafka equivalent; use "
                "sasl.username/sasl.password (PLAIN, SCRAM), sasl.kerberos.* (GSSAPI) or "
                "sasl.oauthbearer.* (OAUTHBEARER)",
            )
        self.take(key)

    def kerberos(self, key: str, opts: Mapping[str, str]) -> None:
        if opts.get("useKeyTab", "false").lower() == "true":
            if "keyTab" not in opts or "principal" not in opts:
                raise self.error(
                    key,
                    'a keytab login needs keyTab="..." and principal="..." '
                    "(librdkafka: sasl.kerberos.keytab, "
                    "sasl.kerberos.principal)",
                )
            self.put("sasl.kerberos.keytab", opts["keyTab"])
            self.put("sasl.kerberos.principal", opts["principal"])
        elif opts.get("useTicketCache", "false").lower() == "true":
            # Use the existing ticket cache; do not let librdkafka run kinit.
            if "principal" in opts:
                self.put("sasl.kerberos.principal", opts["principal"])
            self.put("sasl.kerberos.min.time.before.relogin", "0")
        else:
            raise self.error(
                key,
                "Kerberos logins need useKeyTab=true (librdkafka: "
                "sasl.kerberos.keytab, sasl.kerberos.principal) or "
                "useTicketCache=true",
            )
        if "serviceName" in opts and "sasl.kerberos.service.name" not in self.java:
            self.put("sasl.kerberos.service.name", opts["serviceName"])

    def oauth(self, key: str, opts: Mapping[str, str]) -> None:
        handler = self.value("sasl.login.callback.handler.class")
        retriever = self.value("sasl.oauthbearer.jwt.retriever.class")
        if handler in _OIDC_HANDLERS or (retriever and retriever in _CLIENT_CREDENTIALS_RETRIEVERS):
            self.oauth_client_credentials(opts, retriever)
        else:
            self.oauth_unsecured(key, opts)

    def oauth_client_credentials(self, opts: Mapping[str, str], retriever: str | None) -> None:
        """Kafka's OAuth client-credentials login: librdkafka's OIDC method."""
        if retriever and retriever not in _CLIENT_CREDENTIALS_RETRIEVERS:
            raise self.java_class_error("sasl.oauthbearer.jwt.retriever.class")
        self.put("sasl.oauthbearer.method", "oidc")
        for java_name, name in (
            ("clientId", "sasl.oauthbearer.client.id"),
            ("clientSecret", "sasl.oauthbearer.client.secret"),
            ("scope", "sasl.oauthbearer.scope"),
        ):
            if java_name in opts:
                self.put(name, opts[java_name])
        extensions = {
            k[len("extension_") :]: v for k, v in opts.items() if k.startswith("extension_")
        }
        if extensions:
            self.put(
                "sasl.oauthbearer.extensions",
                ",".join(f"{k}={v}" for k, v in extensions.items()),
            )
        for done in (
            "sasl.login.callback.handler.class",
            "sasl.oauthbearer.jwt.retriever.class",
        ):
            if done in self.java:
                self.take(done)

    def oauth_unsecured(self, key: str, opts: Mapping[str, str]) -> None:
        """Kafka's unsecured OAuth login (unsigned tokens, for tests): librdkafka's
        ``sasl.oauthbearer.config``."""
        claims = {k: v for k, v in opts.items() if k.startswith("unsecuredLogin")}
        if not claims:
            raise self.error(
                key,
                "OAUTHBEARER needs a token source: set sasl.login.callback.handler.class to "
                "Kafka's OAuthBearerLoginCallbackHandler with sasl.oauthbearer.token.endpoint.url"
                " (librdkafka: sasl.oauthbearer.method=oidc, sasl.oauthbearer.client.id, "
                "sasl.oauthbearer.client.secret, sasl.oauthbearer.token.endpoint.url)",
            )
        principal_claim = claims.pop("unsecuredLoginPrincipalClaimName", "sub")
        scope_claim = claims.pop("unsecuredLoginScopeClaimName", "scope")
        parts = [f"principalClaimName={principal_claim}"]
        principal = claims.pop(f"unsecuredLoginStringClaim_{principal_claim}", None)
        if principal is None:
            raise self.error(
                key, f"the unsecured login needs unsecuredLoginStringClaim_{principal_claim}"
            )
        parts.append(f"principal={principal}")
        scope = claims.pop(f"unsecuredLoginListClaim_{scope_claim}", None)
        if scope:
            parts += [
                f"scopeClaimName={scope_claim}",
                "scope=" + ",".join(s for s in scope[1:].split(scope[0]) if s),
            ]
        life = claims.pop("unsecuredLoginLifetimeSeconds", None)
        if life:
            parts.append(f"lifeSeconds={life}")
        for name, value in list(claims.items()):
            if name.startswith("unsecuredLoginExtension_"):
                parts.append(f"extension_{name[len('unsecuredLoginExtension_') :]}={value}")
                del claims[name]
        if claims:
            raise self.error(
                key,
                f"unsecured-login options {', '.join(sorted(claims))} have no "
                "librdkafka equivalent (sasl.oauthbearer.config)",
            )
        self.put("enable.sasl.oauthbearer.unsecure.jwt", "true")
        self.put("sasl.oauthbearer.config", " ".join(parts))

    def java_class_error(self, key: str) -> ConfigError:
        return self.error(
            key,
            "Java classes cannot be used with librdkafka; configure the "
            "librdkafka sasl.oauthbearer.* settings instead",
        )

    def kerberos_cmd(self) -> None:
        if "sasl.kerberos.kinit.cmd" in self.java:
            cmd = self.value("sasl.kerberos.kinit.cmd") or ""
            if cmd in ("", "/usr/bin/kinit"):
                self.drop(
                    "sasl.kerberos.kinit.cmd",
                    "the Java default; librdkafka runs kinit from the PATH",
                )
            elif re.search(r"\s|%\{", cmd):
                pass  # already a librdkafka command line: passes through unchanged
            else:
                # Java names the kinit binary; librdkafka wants the whole command line.
                self.take("sasl.kerberos.kinit.cmd")
                self.put("sasl.kerberos.kinit.cmd", _KINIT_COMMAND.replace("kinit", cmd))
        handler = self.value("sasl.login.callback.handler.class")
        if handler and handler not in _OIDC_HANDLERS:
            raise self.java_class_error("sasl.login.callback.handler.class")
        if handler:  # OIDC handler without an OAUTHBEARER JAAS line
            self.drop(
                "sasl.login.callback.handler.class",
                "only meaningful with the OAuthBearerLoginModule",
            )
        retriever = self.value("sasl.oauthbearer.jwt.retriever.class")
        if retriever and retriever not in _CLIENT_CREDENTIALS_RETRIEVERS:
            raise self.java_class_error("sasl.oauthbearer.jwt.retriever.class")
        if retriever:
            self.drop(
                "sasl.oauthbearer.jwt.retriever.class",
                "client credentials are librdkafka's default OIDC grant",
            )

    def truststore(self) -> None:
        store_type = (self.value("ssl.truststore.type", "JKS") or "JKS").upper()
        if "ssl.truststore.location" in self.java:
            if store_type != "PEM":
                raise self.error(
                    "ssl.truststore.location",
                    f"librdkafka cannot read {store_type} truststores; export the CA "
                    "certificates to a PEM file (keytool -exportcert -rfc) and set "
                    "ssl.ca.location to it (or ssl.truststore.type=PEM if the file is PEM)",
                )
            self.put("ssl.ca.location", self.java["ssl.truststore.location"].value.strip())
            self.take("ssl.truststore.location")
        if "ssl.truststore.certificates" in self.java:
            self.put("ssl.ca.pem", self.java["ssl.truststore.certificates"].value)
            self.take("ssl.truststore.certificates")
        self.take("ssl.truststore.type")  # used above to translate the store: not dropped
        if "ssl.truststore.password" in self.java:
            self.drop("ssl.truststore.password", _JAVA_ONLY["ssl.truststore.password"])

    def keystore(self) -> None:
        store_type = (self.value("ssl.keystore.type", "JKS") or "JKS").upper()
        if "ssl.keystore.location" in self.java:
            location = self.java["ssl.keystore.location"].value.strip()
            if store_type == "PKCS12":
                self.put("ssl.keystore.location", location)
                if "ssl.keystore.password" in self.java:
                    self.put("ssl.keystore.password", self.java["ssl.keystore.password"].value)
            elif store_type == "PEM":
                self.put("ssl.certificate.location", location)
                self.put("ssl.key.location", location)
            else:
                raise self.error(
                    "ssl.keystore.location",
                    f"librdkafka cannot read {store_type} keystores; convert it to PKCS#12 "
                    "(keytool -importkeystore -deststoretype PKCS12) and set "
                    "ssl.keystore.type=PKCS12, or use PEM files with ssl.certificate.location "
                    "and ssl.key.location",
                )
            self.take("ssl.keystore.location")
        if "ssl.keystore.password" in self.java:
            if "ssl.keystore.location" not in self.out:
                self.drop("ssl.keystore.password", "no PKCS#12 keystore uses it")
            else:
                self.take("ssl.keystore.password")
        if "ssl.keystore.key" in self.java:
            self.put("ssl.key.pem", self.java["ssl.keystore.key"].value)
            self.take("ssl.keystore.key")
        if "ssl.keystore.certificate.chain" in self.java:
            self.put("ssl.certificate.pem", self.java["ssl.keystore.certificate.chain"].value)
            self.take("ssl.keystore.certificate.chain")
        self.take("ssl.keystore.type")  # used above to translate the store: not dropped

    def tls_options(self) -> None:
        """Host name verification and cipher suites, in librdkafka's spelling."""
        if "ssl.endpoint.identification.algorithm" in self.java:
            algo = (self.value("ssl.endpoint.identification.algorithm") or "").lower()
            if algo not in ("", "https", "none"):
                raise self.error(
                    "ssl.endpoint.identification.algorithm",
                    "librdkafka supports 'https' or 'none' (empty in Java)",
                )
            self.take("ssl.endpoint.identification.algorithm")
            self.put("ssl.endpoint.identification.algorithm", algo or "none")
        if "ssl.cipher.suites" in self.java:
            suites = self.value("ssl.cipher.suites") or ""
            if re.search(r"\bTLS_\w+_WITH_\w+", suites):
                raise self.error(
                    "ssl.cipher.suites",
                    "these are Java/IANA cipher suite names; librdkafka's ssl.cipher.suites "
                    "takes OpenSSL names (e.g. ECDHE-RSA-AES128-GCM-SHA256), separated by ':'",
                )
            self.take("ssl.cipher.suites")
            self.put("ssl.cipher.suites", ":".join(re.split(r"\s*[,:]\s*", suites.strip())))

    def buffers(self) -> None:
        if "buffer.memory" in self.java:
            raw = self.value("buffer.memory") or ""
            if not re.fullmatch(r"[0-9]+", raw):
                raise self.error("buffer.memory", "expected a number of bytes")
            self.take("buffer.memory")
            self.put("queue.buffering.max.kbytes", str(max(1, math.ceil(int(raw) / 1024))))
        for key in ("send.buffer.bytes", "receive.buffer.bytes"):
            if key in self.java and self.value(key) == "-1":
                self.take(key)
                self.put(_RENAMED[key], "0")  # OS default

    def assignment_strategy(self) -> None:
        if "partition.assignment.strategy" not in self.java:
            return
        names = re.split(r"\s*,\s*", self.value("partition.assignment.strategy") or "")
        mapped = []
        for name in names:
            if name not in _ASSIGNORS:
                raise self.error(
                    "partition.assignment.strategy",
                    f"{name} has no librdkafka equivalent; librdkafka's "
                    "partition.assignment.strategy supports range, roundrobin and "
                    "cooperative-sticky",
                )
            mapped.append(_ASSIGNORS[name])
        self.take("partition.assignment.strategy")
        self.put("partition.assignment.strategy", ",".join(mapped))

    def offset_reset(self) -> None:
        if "auto.offset.reset" not in self.java:
            return
        reset = (self.value("auto.offset.reset") or "").lower()
        if reset not in ("earliest", "latest"):
            raise self.error(
                "auto.offset.reset",
                "librdkafka's auto.offset.reset supports earliest and latest here ('none' "
                "is 'error' in librdkafka; by_duration has no equivalent)",
            )
        self.take("auto.offset.reset")
        self.put("auto.offset.reset", reset)

    def compression_levels(self) -> None:
        codec = (self.value("compression.type") or "").lower()
        for name in ("gzip", "lz4", "zstd"):
            key = f"compression.{name}.level"
            if key in self.java:
                if codec == name:
                    level = self.value(key) or ""
                    self.take(key)
                    self.put("compression.level", level)
                else:
                    self.drop(key, f"compression.type is not {name}")

    def generic(self, key: str) -> None:
        if key in _RENAMED:
            setting = self.take(key)
            assert setting is not None
            self.java[_RENAMED[key]] = setting
            key = _RENAMED[key]
        kind = LIBRDKAFKA_PROPERTIES.get(key)
        if kind is not None:
            wrong = (kind == "C" and self.role != "consumer") or (
                kind == "P" and self.role != "producer"
            )
            if wrong:
                other = "consumer" if kind == "C" else "producer"
                self.drop(key, f"a {other} setting, not used by the {self.role}")
                return
            setting = self.take(key)
            assert setting is not None
            self.out[key] = setting.value.strip()
            self.explicit.add(key)
            return
        if key in _JAVA_ONLY:
            self.drop(key, _JAVA_ONLY[key])
            return
        if key.startswith(("sasl.login.", "sasl.oauthbearer.")):
            self.drop(key, "Java login tuning without librdkafka equivalent")
            return
        self.drop(key, "unknown to librdkafka and to mirrorlib's translation", unknown=True)


def translate_client_settings(
    java: Mapping[str, Setting], *, role: str, alias: str | None = None
) -> ClientSettings:
    """Translate Java client settings (unprefixed names → :class:`Setting`) for a client of
    ``role`` (``producer``, ``consumer`` or ``admin``) of cluster ``alias``."""
    if role not in ROLES:
        raise ConfigError(
            f"unknown client role {role!r}: expected one of {', '.join(ROLES)}", alias=alias
        )
    return _Translator(java, role, alias).run()
