"""TLS material for local test clusters, made at test time with ``openssl`` and ``keytool``.

Each TLS cluster has its own certificate authority under ``<work_dir>/tls/``: a CA certificate
(``ca.pem``, what clients trust), a broker certificate for ``127.0.0.1`` / ``localhost`` in a
PKCS#12 keystore (``broker.p12``, read by the broker JVM directly), a PKCS#12 truststore with the
CA (``truststore.p12``, for brokers that require client certificates) and a client certificate
as PEM files for librdkafka (``client.pem`` + ``client.key``), as one PEM file with the key first
(``client-bundle.pem``, Java's ``ssl.keystore.type=PEM``) and as PKCS#12 (``client.p12``).
:meth:`CertificateAuthority.issue` makes more certificates, e.g. already expired ones.
"""

from __future__ import annotations

import datetime as dt
import shutil
import subprocess
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Final, Self

import attrs

from mirrorlib.errors import TestClusterError
from mirrorlib.testing.jars import java_executable

__all__ = ["TLS_PASSWORD", "Certificate", "CertificateAuthority", "TlsFiles"]

#: The password of every keystore and truststore of the test bed.
TLS_PASSWORD: Final = "mirrorlib-test"
#: Broker certificates are valid for these names (hostname verification stays on).
BROKER_HOSTS: Final = ("127.0.0.1", "localhost")

_CA_CONFIG: Final = """\
[ca]
default_ca = test_ca
[test_ca]
database = index.txt
new_certs_dir = issued
serial = serial
default_md = sha256
policy = any_name
unique_subject = no
[any_name]
commonName = supplied
"""
_TIME_FORMAT: Final = "%Y%m%d%H%M%SZ"
_lock = threading.Lock()  # openssl ca keeps a database per CA: one signer at a time


def _run(cmd: Sequence[str], cwd: Path, what: str) -> None:
    try:
        proc = subprocess.run(
            list(cmd), cwd=cwd, capture_output=True, text=True, timeout=120, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise TestClusterError(f"{what}: cannot run {cmd[0]}: {exc}") from exc
    if proc.returncode != 0:
        raise TestClusterError(
            f"{what}: `{' '.join(cmd)}` failed (exit {proc.returncode}): "
            f"{(proc.stderr or proc.stdout).strip()[-2000:]}"
        )


def _openssl() -> str:
    found = shutil.which("openssl")
    if found is None:
        raise TestClusterError(
            "openssl not found on PATH; TLS test clusters make their certificates with it "
            "(e.g. apt-get install openssl)"
        )
    return found


def _keytool() -> str:
    beside_java = Path(java_executable()).resolve().parent / "keytool"
    found = str(beside_java) if beside_java.exists() else shutil.which("keytool")
    if found is None:
        raise TestClusterError(f"keytool not found next to {java_executable()} or on PATH")
    return found


@attrs.frozen
class Certificate:
    """A certificate issued by a :class:`CertificateAuthority`: PEM files.

    ``bundle`` holds the key followed by the certificate (the layout of Java's
    ``ssl.keystore.type=PEM`` files).
    """

    certificate: Path
    key: Path
    bundle: Path


@attrs.frozen
class CertificateAuthority:
    """A throw-away certificate authority in ``directory`` (``ca.pem`` / ``ca.key``)."""

    directory: Path
    name: str = "mirrorlib test CA"

    @property
    def certificate(self) -> Path:
        """The CA certificate (PEM): what clients and brokers trust."""
        return self.directory / "ca.pem"

    @property
    def key(self) -> Path:
        return self.directory / "ca.key"

    def create(self) -> Self:
        """Make the CA key and self-signed certificate (valid ten years); no-op if they exist."""
        with _lock:
            if self.certificate.exists():
                return self
            self.directory.mkdir(parents=True, exist_ok=True)
            (self.directory / "issued").mkdir(exist_ok=True)
            (self.directory / "ca.cnf").write_text(_CA_CONFIG, encoding="utf-8")
            (self.directory / "index.txt").write_text("", encoding="utf-8")
            (self.directory / "serial").write_text("01\n", encoding="utf-8")
            _run(
                [
                    _openssl(), "req", "-x509", "-newkey", "ec",
                    "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", "ca.key", "-out", "ca.pem", "-days", "3650",
                    "-subj", f"/CN={self.name}",
                    "-addext", "basicConstraints=critical,CA:TRUE",
                    "-addext", "keyUsage=critical,keyCertSign,cRLSign",
                ],
                self.directory, "making the test CA",
            )  # fmt: skip
        return self

    def issue(
        self,
        name: str,
        *,
        hosts: Sequence[str] = (),
        not_before: dt.datetime | None = None,
        not_after: dt.datetime | None = None,
    ) -> Certificate:
        """A new key and certificate ``CN=name`` signed by this CA, as ``<name>.pem`` /
        ``<name>.key`` / ``<name>-bundle.pem``.

        ``hosts`` (IP addresses or DNS names) go into the subject alternative names. The
        certificate is valid from ``not_before`` (default: a day ago) to ``not_after`` (default:
        in ten years); dates in the past make an expired certificate.
        """
        self.create()
        now = dt.datetime.now(dt.UTC)
        start = not_before or now - dt.timedelta(days=1)
        end = not_after or now + dt.timedelta(days=3650)
        cert = Certificate(
            self.directory / f"{name}.pem",
            self.directory / f"{name}.key",
            self.directory / f"{name}-bundle.pem",
        )
        sans = ",".join(
            f"IP:{h}" if h.replace(".", "").isdigit() or ":" in h else f"DNS:{h}" for h in hosts
        )
        ext = "basicConstraints=CA:FALSE\n" + (f"subjectAltName={sans}\n" if sans else "")
        (self.directory / f"{name}.ext").write_text(ext, encoding="utf-8")
        openssl = _openssl()
        with _lock:
            _run(
                [
                    openssl, "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-keyout", cert.key.name, "-out", f"{name}.csr", "-subj", f"/CN={name}",
                ],
                self.directory, f"making the key of {name}",
            )  # fmt: skip
            _run(
                [
                    openssl, "ca", "-batch", "-config", "ca.cnf", "-cert", "ca.pem",
                    "-keyfile", "ca.key", "-in", f"{name}.csr", "-out", cert.certificate.name,
                    "-notext", "-extfile", f"{name}.ext",
                    "-startdate", start.astimezone(dt.UTC).strftime(_TIME_FORMAT),
                    "-enddate", end.astimezone(dt.UTC).strftime(_TIME_FORMAT),
                ],
                self.directory, f"signing the certificate of {name}",
            )  # fmt: skip
        cert.bundle.write_text(
            cert.key.read_text(encoding="ascii") + cert.certificate.read_text(encoding="ascii"),
            encoding="ascii",
        )
        return cert

    def keystore(self, cert: Certificate, path: Path, password: str = TLS_PASSWORD) -> Path:
        """``cert`` with its key and this CA's certificate as a PKCS#12 keystore at ``path``."""
        _run(
            [
                _openssl(), "pkcs12", "-export", "-in", str(cert.certificate),
                "-inkey", str(cert.key), "-certfile", str(self.certificate),
                "-name", cert.certificate.stem, "-out", str(path), "-passout", f"pass:{password}",
            ],
            self.directory, f"making the keystore {path.name}",
        )  # fmt: skip
        return path

    def truststore(self, path: Path, password: str = TLS_PASSWORD) -> Path:
        """This CA's certificate as a trusted entry of a PKCS#12 truststore (made by keytool)."""
        path.unlink(missing_ok=True)
        _run(
            [
                _keytool(), "-importcert", "-noprompt", "-alias", "ca",
                "-file", str(self.certificate), "-keystore", str(path),
                "-storetype", "PKCS12", "-storepass", password,
            ],
            self.directory, f"making the truststore {path.name}",
        )  # fmt: skip
        return path


@attrs.frozen
class TlsFiles:
    """The certificates and stores of one TLS test cluster, all under ``directory``.

    The paths are known at once; :meth:`create` makes the files (once).
    """

    directory: Path
    password: str = TLS_PASSWORD

    @property
    def authority(self) -> CertificateAuthority:
        """The cluster's own CA (issue more certificates with it)."""
        return CertificateAuthority(self.directory)

    @property
    def ca(self) -> Path:
        """The CA certificate, PEM (librdkafka ``ssl.ca.location``)."""
        return self.authority.certificate

    @property
    def broker_keystore(self) -> Path:
        """The broker's key and certificate, PKCS#12."""
        return self.directory / "broker.p12"

    @property
    def broker_truststore(self) -> Path:
        """The CA as a PKCS#12 truststore (brokers verifying client certificates)."""
        return self.directory / "truststore.p12"

    @property
    def client(self) -> Certificate:
        """The client certificate (``CN=client``), PEM."""
        return Certificate(
            self.directory / "client.pem",
            self.directory / "client.key",
            self.directory / "client-bundle.pem",
        )

    @property
    def client_keystore(self) -> Path:
        """The client key and certificate as a PKCS#12 keystore."""
        return self.directory / "client.p12"

    def create(self) -> Self:
        """Make every file (no-op when they exist already)."""
        if self.client_keystore.exists():
            return self
        ca = self.authority.create()
        broker = ca.issue("broker", hosts=BROKER_HOSTS)
        ca.keystore(broker, self.broker_keystore, self.password)
        ca.truststore(self.broker_truststore, self.password)
        ca.issue("client")
        ca.keystore(self.client, self.client_keystore, self.password)
        return self
