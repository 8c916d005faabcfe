"""Java client settings → librdkafka (JAAS, TLS stores, renames, drops, errors, masking)."""

from __future__ import annotations

import pytest

from mirrorlib import ConfigError
from mirrorlib.core.config import MirrorConfig
from mirrorlib.core.config.clients import (
    LIBRDKAFKA_PROPERTIES,
    Setting,
    parse_jaas,
    translate_client_settings,
)

PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTH = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
KRB5 = "com.sun.security.auth.module.Krb5LoginModule"


def translate(role: str = "producer", **java: str) -> dict[str, str]:
    settings = {
        k.replace("__", "."): Setting(v, "B." + role + "." + k.replace("__", "."))
        for k, v in java.items()
    }
    return translate_client_settings(settings, role=role, alias="B").as_dict()


# -- JAAS -------------------------------------------------------------------------------------------


def test_parse_jaas_quoting_escapes_and_comments() -> None:
    [entry] = parse_jaas(
        f'{PLAIN} required /* c */ username="al\\"ice" password=\'p;w=d\' // end\n  extra=word ;'
    )
    assert entry.module == PLAIN
    assert entry.flag == "required"
    assert dict(entry.options) == {"username": 'al"ice', "password": "p;w=d", "extra": "word"}


@pytest.mark.parametrize(
    "text",
    [
        f'{PLAIN} required username="a" password="b"',  # no ';'
        f'{PLAIN} username="a";',  # no flag
        f'{PLAIN} mandatory username="a";',  # bad flag
        f"{PLAIN} required username=;",
        f'{PLAIN} required username="a;',
    ],
)
def test_parse_jaas_errors(text: str) -> None:
    with pytest.raises(ValueError):
        parse_jaas(text)


@pytest.mark.parametrize("module", [PLAIN, SCRAM])
def test_plain_and_scram_become_username_password(module: str) -> None:
    out = translate(
        sasl__jaas__config=f'{module} required username="alice" password="s3;cr\\"et";',
        sasl__mechanism="scram-sha-512",
        security__protocol="SASL_SSL",
    )
    assert out == {
        "sasl.username": "alice",
        "sasl.password": 's3;cr"et',
        "sasl.mechanism": "SCRAM-SHA-512",
        "security.protocol": "sasl_ssl",
    }


def test_explicit_librdkafka_setting_wins() -> None:
    out = translate(
        sasl__jaas__config=f'{PLAIN} required username="alice" password="x";',
        sasl__username="bob",
    )
    assert out["sasl.username"] == "bob"


def test_kerberos_keytab() -> None:
    out = translate(
        sasl__jaas__config=(
            f'{KRB5} required useKeyTab=true storeKey=true keyTab="/etc/mm2.keytab" '
            'principal="mm2@EXAMPLE.COM";'
        ),
        sasl__kerberos__service__name="kafka",
        sasl__mechanism="GSSAPI",
    )
    assert out["sasl.kerberos.keytab"] == "/etc/mm2.keytab"
    assert out["sasl.kerberos.principal"] == "mm2@EXAMPLE.COM"
    assert out["sasl.kerberos.service.name"] == "kafka"


def test_kerberos_ticket_cache_and_kinit() -> None:
    out = translate(sasl__jaas__config=f"{KRB5} required useTicketCache=true;")
    assert out["sasl.kerberos.min.time.before.relogin"] == "0"
    out = translate(sasl__kerberos__kinit__cmd="/opt/krb/bin/kinit")
    assert out["sasl.kerberos.kinit.cmd"].startswith("/opt/krb/bin/kinit -R -t")
    assert translate(sasl__kerberos__kinit__cmd="/usr/bin/kinit") == {}


def test_oauth_client_credentials_become_oidc() -> None:
    out = translate(
        sasl__jaas__config=(
            f'{OAUTH} required clientId="mm2" clientSecret="sec" scope="kafka" '
            'extension_logicalCluster="lkc-1";'
        ),
        sasl__login__callback__handler__class=(
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
        ),
        sasl__oauthbearer__token__endpoint__url="https://idp/token",
        sasl__mechanism="OAUTHBEARER",
    )
    assert out == {
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.client.id": "mm2",
        "sasl.oauthbearer.client.secret": "sec",
        "sasl.oauthbearer.scope": "kafka",
        "sasl.oauthbearer.extensions": "logicalCluster=lkc-1",
        "sasl.oauthbearer.token.endpoint.url": "https://idp/token",
    }


def test_oauth_unsecured_login() -> None:
    out = translate(
        sasl__jaas__config=(
            f'{OAUTH} required unsecuredLoginStringClaim_sub="admin" '
            'unsecuredLoginListClaim_scope=",read,write" unsecuredLoginLifetimeSeconds="600";'
        )
    )
    assert out["enable.sasl.oauthbearer.unsecure.jwt"] == "true"
    assert out["sasl.oauthbearer.config"] == (
        "principalClaimName=sub principal=admin scopeClaimName=scope scope=read,write "
        "lifeSeconds=600"
    )


def test_oauth_without_token_source_is_rejected() -> None:
    with pytest.raises(ConfigError, match="sasl.oauthbearer.method=oidc"):
        translate(sasl__jaas__config=f"{OAUTH} required;")


def test_unknown_login_module_is_rejected() -> None:
    with pytest.raises(ConfigError, match="sasl.username") as info:
        translate(sasl__jaas__config='com.acme.Login required password="hunter2";')
    assert info.value.key == "B.producer.sasl.jaas.config"
    assert info.value.alias == "B"
    assert info.value.value == "[hidden]"
    assert "hunter2" not in str(info.value)


def test_malformed_jaas_is_masked() -> None:
    with pytest.raises(ConfigError, match="malformed") as info:
        translate(sasl__jaas__config=f'{PLAIN} required username="a" password="hunter2"')
    assert "hunter2" not in str(info.value)
    assert info.value.key == "B.producer.sasl.jaas.config"


# -- TLS ---------------------------------------------------------------------------------------------


def test_jks_truststore_rejected_naming_ssl_ca_location() -> None:
    with pytest.raises(ConfigError, match="ssl.ca.location") as info:
        translate(
            ssl__truststore__location="/etc/kafka/truststore.jks",
            ssl__truststore__password="changeit",
        )
    assert info.value.key == "B.producer.ssl.truststore.location"
    assert "changeit" not in str(info.value)
    with pytest.raises(ConfigError, match="ssl.ca.location"):
        translate(ssl__truststore__location="/t.p12", ssl__truststore__type="PKCS12")


def test_pem_truststore_and_keystore() -> None:
    out = translate(
        ssl__truststore__type="PEM",
        ssl__truststore__location="/etc/ca.pem",
        ssl__truststore__password="ignored",
        ssl__keystore__type="PEM",
        ssl__keystore__location="/etc/client.pem",
        ssl__key__password="kp",
        ssl__endpoint__identification__algorithm="",
    )
    assert out == {
        "ssl.ca.location": "/etc/ca.pem",
        "ssl.certificate.location": "/etc/client.pem",
        "ssl.key.location": "/etc/client.pem",
        "ssl.key.password": "kp",
        "ssl.endpoint.identification.algorithm": "none",
    }


def test_inline_pem_and_pkcs12_keystore() -> None:
    out = translate(
        ssl__truststore__type="PEM",
        ssl__truststore__certificates="-----BEGIN CERTIFICATE-----\nA\n-----END CERTIFICATE-----",
        ssl__keystore__type="PEM",
        ssl__keystore__key="KEY",
        ssl__keystore__certificate__chain="CHAIN",
    )
    assert out["ssl.ca.pem"].startswith("-----BEGIN CERTIFICATE-----")
    assert (out["ssl.key.pem"], out["ssl.certificate.pem"]) == ("KEY", "CHAIN")
    out = translate(
        ssl__keystore__type="PKCS12",
        ssl__keystore__location="/k.p12",
        ssl__keystore__password="pw",
        ssl__endpoint__identification__algorithm="HTTPS",
    )
    assert out == {
        "ssl.keystore.location": "/k.p12",
        "ssl.keystore.password": "pw",
        "ssl.endpoint.identification.algorithm": "https",
    }


def test_jks_keystore_rejected() -> None:
    with pytest.raises(ConfigError, match="PKCS#12"):
        translate(ssl__keystore__location="/k.jks")


def test_java_cipher_suite_names_rejected() -> None:
    with pytest.raises(ConfigError, match="OpenSSL"):
        translate(ssl__cipher__suites="TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256")
    out = translate(ssl__cipher__suites="ECDHE-RSA-AES128-GCM-SHA256, AES256-SHA")
    assert out["ssl.cipher.suites"] == "ECDHE-RSA-AES128-GCM-SHA256:AES256-SHA"


# -- renames, drops, roles -----------------------------------------------------------------------------


def test_renames() -> None:
    out = translate(
        max__request__size="2097152",
        buffer__memory="33554433",
        send__buffer__bytes="-1",
        receive__buffer__bytes="65536",
        compression__type="zstd",
        compression__zstd__level="5",
        compression__gzip__level="3",
        linger__ms="10",
        acks="all",
    )
    assert out == {
        "message.max.bytes": "2097152",
        "queue.buffering.max.kbytes": "32769",
        "socket.send.buffer.bytes": "0",
        "socket.receive.buffer.bytes": "65536",
        "compression.type": "zstd",
        "compression.level": "5",
        "linger.ms": "10",
        "acks": "all",
    }


def test_consumer_renames_and_values() -> None:
    out = translate(
        "consumer",
        fetch__max__wait__ms="100",
        partition__assignment__strategy=(
            "org.apache.kafka.clients.consumer.CooperativeStickyAssignor"
        ),
        auto__offset__reset="LATEST",
        isolation__level="read_committed",
        client__dns__lookup="use_all_dns_ips",
    )
    assert out == {
        "fetch.wait.max.ms": "100",
        "partition.assignment.strategy": "cooperative-sticky",
        "auto.offset.reset": "latest",
        "isolation.level": "read_committed",
        "client.dns.lookup": "use_all_dns_ips",
    }
    with pytest.raises(ConfigError, match="cooperative-sticky"):
        translate("consumer", partition__assignment__strategy="com.acme.Assignor")
    with pytest.raises(ConfigError, match="earliest and latest"):
        translate("consumer", auto__offset__reset="none")


def test_java_only_settings_are_dropped_and_listed() -> None:
    java = {
        "key.serializer": Setting("org.apache...ByteArraySerializer", "B.producer.key.serializer"),
        "interceptor.classes": Setting("x", "B.producer.interceptor.classes"),
        "fetch.min.bytes": Setting("1", "B.producer.fetch.min.bytes"),
        "totally.unknown": Setting("1", "B.producer.totally.unknown"),
        "linger.ms": Setting("5", "B.producer.linger.ms"),
    }
    result = translate_client_settings(java, role="producer", alias="B")
    assert result.as_dict() == {"linger.ms": "5"}
    dropped = {d.key: d for d in result.dropped}
    assert set(dropped) == {
        "key.serializer",
        "interceptor.classes",
        "fetch.min.bytes",
        "totally.unknown",
    }
    assert "consumer setting" in dropped["fetch.min.bytes"].reason
    assert dropped["totally.unknown"].unknown
    assert not dropped["key.serializer"].unknown


def test_admin_drops_producer_and_consumer_settings() -> None:
    assert translate("admin", request__timeout__ms="5", group__id="g", socket__timeout__ms="7") == {
        "socket.timeout.ms": "7"
    }


def test_unsupported_mechanism_and_java_classes() -> None:
    with pytest.raises(ConfigError, match="AWS_MSK_IAM|mechanisms"):
        translate(sasl__mechanism="AWS_MSK_IAM")
    with pytest.raises(ConfigError, match="Java classes"):
        translate(sasl__client__callback__handler__class="software.amazon.msk.auth.iam.X")


def test_librdkafka_names_table() -> None:
    assert LIBRDKAFKA_PROPERTIES["linger.ms"] == "P"
    assert LIBRDKAFKA_PROPERTIES["group.id"] == "C"
    assert LIBRDKAFKA_PROPERTIES["bootstrap.servers"] == "*"
    assert "error_cb" not in LIBRDKAFKA_PROPERTIES


# -- through MirrorConfig: names with prefixes, alias, masking, warnings -----------------------------


def test_errors_name_the_prefixed_key_and_alias() -> None:
    with pytest.raises(ConfigError) as info:
        MirrorConfig.from_properties(
            {
                "clusters": "A, B",
                "B.producer.sasl.jaas.config": 'com.acme.Login required password="pw";',
            }
        )
    assert info.value.key == "B.producer.sasl.jaas.config"
    assert info.value.alias == "B"
    assert "pw" not in str(info.value).replace("password", "")


def test_provider_resolved_values_are_masked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MM2_TEST_TS", "/etc/secret-path/ts.jks")
    with pytest.raises(ConfigError) as info:
        MirrorConfig.from_properties(
            {
                "clusters": "A, B",
                "config.providers": "env",
                "config.providers.env.class": "org.apache.kafka.common.config.provider.EnvVarConfigProvider",
                "A.ssl.truststore.location": "${env:MM2_TEST_TS}",
            }
        )
    assert "secret-path" not in str(info.value)
    assert info.value.key == "A.ssl.truststore.location"


def test_dropped_client_settings_become_warnings() -> None:
    cfg = MirrorConfig.from_properties(
        {
            "clusters": "A, B",
            "A.bootstrap.servers": "a:1",
            "B.bootstrap.servers": "b:1",
            "A.consumer.key.deserializer": "x",
            "A->B.producer.frobnicate": "1",
        }
    )
    kinds = {w.key: w.kind for w in cfg.warnings}
    assert kinds["A.consumer.key.deserializer"] == "dropped"
    assert kinds["A->B.producer.frobnicate"] == "unknown"
    assert "A->B.producer.frobnicate" in cfg.unknown_keys
