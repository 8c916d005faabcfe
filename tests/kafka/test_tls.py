"""TLS errors of the edge: missing files, certificate dates, the TLS probe (no broker needed)."""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path

import pytest

from mirrorlib.errors import ConfigError
from mirrorlib.kafka import client_conf
from mirrorlib.kafka.client import MirrorClient
from mirrorlib.kafka.tls import certificate_validity, check_tls_files, tls_failure
from mirrorlib.testing import CertificateAuthority

needs_openssl = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl")


def test_a_missing_tls_file_is_a_config_error_naming_key_file_and_cluster(tmp_path: Path) -> None:
    missing = str(tmp_path / "nowhere.pem")
    with pytest.raises(ConfigError) as caught:
        check_tls_files({"ssl.ca.location": missing}, alias="B")
    assert caught.value.key == "ssl.ca.location" and caught.value.alias == "B"
    assert str(caught.value) == (
        f"ssl.ca.location (ssl.truststore.location in MM2 terms)={missing!r} (cluster B): "
        "no such file"
    )
    with pytest.raises(ConfigError, match="ssl.key.location.*nowhere.pem"):
        client_conf({"bootstrap.servers": "h:1", "ssl.key.location": missing})
    with pytest.raises(ConfigError, match="cluster B"):
        MirrorClient({"bootstrap.servers": "h:1", "ssl.certificate.location": missing}, alias="B")
    # what exists, librdkafka's "probe" and a CA directory are fine
    check_tls_files({"ssl.ca.location": "probe", "ssl.crl.location": str(tmp_path)})
    assert client_conf({"ssl.ca.location": str(tmp_path)})["ssl.ca.location"] == str(tmp_path)


@needs_openssl
def test_certificate_validity_reads_the_dates(tmp_path: Path) -> None:
    ca = CertificateAuthority(tmp_path)
    start = dt.datetime(2020, 1, 1, tzinfo=dt.UTC)
    end = dt.datetime(2020, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    expired = ca.issue("old", not_before=start, not_after=end)
    assert certificate_validity(expired.certificate) == (start, end)
    assert certificate_validity(expired.bundle) == (start, end)  # key first, then certificate
    # GeneralizedTime (years from 2050) as well as UTCTime
    late = ca.issue("late", not_before=start, not_after=dt.datetime(2061, 1, 1, tzinfo=dt.UTC))
    assert certificate_validity(late.certificate) == (start, dt.datetime(2061, 1, 1, tzinfo=dt.UTC))
    assert certificate_validity(expired.key) is None
    assert certificate_validity(tmp_path / "nothing.pem") is None


def test_tls_failure_is_none_without_tls_or_without_a_listener() -> None:
    assert tls_failure({"bootstrap.servers": "127.0.0.1:1"}) is None
    # nobody listens: a connection failure, not a TLS problem (and answered quickly)
    assert tls_failure({"bootstrap.servers": "127.0.0.1:1", "security.protocol": "SSL"}) is None
