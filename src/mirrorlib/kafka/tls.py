"""Clear errors for TLS clusters: missing files, untrusted brokers, rejected client certificates.

librdkafka reports a failed TLS handshake only through its error callback and log lines, while
the request that needed the connection just times out ("Broker transport failure"). So when a
request to a TLS cluster fails, :func:`tls_failure` finds out why with a short-lived client of
its own and says it in terms of the files of the configuration: the CA file that did not verify
the broker's certificate, or the client certificate the broker rejected (and whether it has
expired). :func:`check_tls_files` turns a TLS file that does not exist into a
:class:`~mirrorlib.errors.ConfigError` before librdkafka fails with an OpenSSL error code.
"""

from __future__ import annotations

import base64
import datetime as dt
import os
import re
import time
from collections.abc import Mapping
from typing import Any, Final

from mirrorlib.errors import ConfigError

__all__ = [
    "TLS_FILE_KEYS",
    "certificate_validity",
    "check_tls_files",
    "failure_reason",
    "tls_failure",
]

#: librdkafka settings naming a file, and the MM2 (Java) setting they are usually written as.
TLS_FILE_KEYS: Final[Mapping[str, str]] = {
    "ssl.ca.location": "ssl.truststore.location",
    "ssl.certificate.location": "ssl.keystore.location",
    "ssl.key.location": "ssl.keystore.location",
    "ssl.keystore.location": "ssl.keystore.location",
    "ssl.crl.location": "",
}
_TLS_PROTOCOLS: Final = ("ssl", "sasl_ssl")
# a TLS alert the broker sends when it does not accept the client's certificate (or its lack)
_REJECTED: Final = re.compile(
    r"alert (bad certificate|certificate unknown|certificate expired|unknown ca|"
    r"certificate required|unsupported certificate|certificate revoked|access denied)"
)
_CALLBACK_KEYS: Final = ("logger", "error_cb", "stats_cb", "throttle_cb", "oauth_cb", "on_delivery")


def _where(alias: str | None) -> str:
    return f" (cluster {alias})" if alias else ""


def check_tls_files(config: Mapping[str, Any], alias: str | None = None) -> None:
    """Raise :class:`ConfigError` naming the key and the file when a TLS file setting of
    ``config`` (librdkafka names) points to nothing."""
    for key, java_key in TLS_FILE_KEYS.items():
        value = str(config.get(key) or "").strip()
        if not value or (key == "ssl.ca.location" and value == "probe"):
            continue
        if not os.path.exists(value):
            written = f" ({java_key} in MM2 terms)" if java_key else ""
            raise ConfigError(
                f"{key}{written}={value!r}{_where(alias)}: no such file",
                key=key,
                alias=alias,
                value=value,
            )


def _tlv(der: bytes, pos: int) -> tuple[int, int, int]:
    """(tag, start of content, end of content) of the DER element at ``pos``."""
    tag, length = der[pos], der[pos + 1]
    pos += 2
    if length & 0x80:
        size = length & 0x7F
        length = int.from_bytes(der[pos : pos + size], "big")
        pos += size
    return tag, pos, pos + length


def _der_time(der: bytes, tag: int, start: int, end: int) -> dt.datetime:
    text = der[start:end].decode("ascii")
    fmt = "%y%m%d%H%M%SZ" if tag == 0x17 else "%Y%m%d%H%M%SZ"  # UTCTime / GeneralizedTime
    return dt.datetime.strptime(text, fmt).replace(tzinfo=dt.UTC)


def certificate_validity(path: str | os.PathLike[str]) -> tuple[dt.datetime, dt.datetime] | None:
    """(not before, not after) of the first certificate of a PEM file; ``None`` if the file
    cannot be read or holds no certificate."""
    try:
        with open(path, encoding="ascii", errors="replace") as fh:
            text = fh.read()
        found = re.search(r"-----BEGIN CERTIFICATE-----(.+?)-----END CERTIFICATE-----", text, re.S)
        if found is None:
            return None
        der = base64.b64decode("".join(found.group(1).split()))
        _, pos, _ = _tlv(der, 0)  # Certificate
        _, pos, _ = _tlv(der, pos)  # tbsCertificate
        tag, _, end = _tlv(der, pos)
        if tag == 0xA0:  # [0] version
            pos = end
        for _ in range(3):  # serialNumber, signature, issuer
            _, _, pos = _tlv(der, pos)
        _, pos, _ = _tlv(der, pos)  # validity
        tag, start, end = _tlv(der, pos)
        not_before = _der_time(der, tag, start, end)
        tag, start, end = _tlv(der, end)
        return not_before, _der_time(der, tag, start, end)
    except (OSError, ValueError, IndexError):
        return None


def _client_certificate(config: Mapping[str, Any]) -> str:
    """How the client certificate is configured, for a message."""
    for key in ("ssl.certificate.location", "ssl.keystore.location"):
        value = str(config.get(key) or "").strip()
        if value:
            return f"{value} ({key})"
    if config.get("ssl.certificate.pem"):
        return "ssl.certificate.pem"
    return ""


def _rejected(config: Mapping[str, Any], alert: str) -> str:
    cert = _client_certificate(config)
    if not cert:
        return (
            f"the broker requires a client certificate ({alert}); set ssl.certificate.location "
            "and ssl.key.location (ssl.keystore.location in MM2 terms)"
        )
    location = str(config.get("ssl.certificate.location") or "").strip()
    validity = certificate_validity(location) if location else None
    if validity is not None:
        now = dt.datetime.now(dt.UTC)
        not_before, not_after = validity
        if not_after < now:
            return (
                f"the client certificate {cert} expired on {not_after:%Y-%m-%d %H:%M:%S} UTC; "
                f"the broker rejected it ({alert})"
            )
        if not_before > now:
            return (
                f"the client certificate {cert} is not valid before "
                f"{not_before:%Y-%m-%d %H:%M:%S} UTC; the broker rejected it ({alert})"
            )
    return f"the broker rejected the client certificate {cert} ({alert})"


def _explain(config: Mapping[str, Any], error: str) -> str | None:
    if "certificate verify failed" in error:
        ca = str(config.get("ssl.ca.location") or "").strip()
        source = f"ssl.ca.location {ca}" if ca else "the system CA store (no ssl.ca.location)"
        if config.get("ssl.ca.pem"):
            source = "ssl.ca.pem"
        return (
            f"TLS handshake failed: the broker's certificate could not be verified with {source} "
            "(certificate verify failed: is that the CA that signed it?)"
        )
    alert = _REJECTED.search(error)
    if alert is not None:
        return "TLS handshake failed: " + _rejected(config, "TLS alert: " + alert.group(1))
    if "SSL handshake failed" in error or "SSL routines" in error:
        return "TLS handshake failed: " + error.split(": ", 1)[-1].split(" (after", 1)[0]
    return None


def tls_failure(config: Mapping[str, Any], timeout: float = 5.0) -> str | None:
    """Why clients with librdkafka ``config`` cannot talk TLS to the cluster, naming the file to
    fix; ``None`` when the cluster is not TLS, or TLS is not the problem, or no connection
    attempt finished within ``timeout`` seconds.

    Connects with a short-lived client of its own and watches its error callback.
    """
    from confluent_kafka import KafkaException, Producer

    protocol = str(config.get("security.protocol") or "plaintext").strip().lower()
    if protocol not in _TLS_PROTOCOLS:
        return None
    errors: list[str] = []
    conf = {k: v for k, v in config.items() if k not in _CALLBACK_KEYS}
    conf.update({"log_level": 0, "error_cb": lambda err: errors.append(str(err))})
    try:
        probe = Producer(conf)
    except (KafkaException, TypeError, ValueError):
        return None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            probe.list_topics(timeout=min(0.5, max(deadline - time.monotonic(), 0.01)))
            return None  # connected: TLS works
        except KafkaException:
            pass
        probe.poll(0)
        for error in errors:
            explained = _explain(config, error)
            if explained is not None:
                return explained
        if any("Connect to" in e or "Connection refused" in e for e in errors):
            return None  # nobody listens: not a TLS problem
    return None


def failure_reason(config: Mapping[str, Any], exc: BaseException, timeout: float = 5.0) -> str:
    """The reason a request with ``config`` failed with ``exc``, for a message: the TLS problem
    (see :func:`tls_failure`) when there is one, else the error itself."""
    explained = tls_failure(config, timeout)
    if explained is not None:
        return explained
    return str(exc.args[0]) if exc.args else (str(exc) or type(exc).__name__)
